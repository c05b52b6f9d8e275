/*
 * test_job.c — jobs and the runner ⇄ loop channel (src/event/job.c): the run
 * state's compare-and-swap (one winner between a pool thread and the
 * loop), reset; body bytes handed over with one PART completion until the
 * loop takes them; the credit window (a runner blocks above it and wakes
 * at half); a client that left ends every wait; a lazy body (100 Continue
 * asked for once, waits for the bytes wanted, fails on error); the
 * asynchronous runner's poll and wakeup; a WebSocket's messages, close
 * frame and peer close code; the inline environment.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "m0/buf.h"
#include "m0/job.h"
#include "m0/loop.h"
#include "m0/timer.h"
#include "m0/ws.h"

/* ------------------------------------------------------------ harness */

/* A job on a real loop: what the job posts is collected by running the
 * loop for one pass that does not sleep (what is posted already), or until
 * a number of completions arrived (posted by a runner thread). */
struct harness {
    struct m0_loop *l;
    struct m0_job *job;
    int passes_left;
    uint64_t deadline;
    struct m0_completion got[64];
    size_t n, want;
    int wakes;                   /* job->wake calls (asynchronous runner) */
};

static void hook(struct m0_loop *l, void *ctx)
{
    struct harness *h = ctx;
    if (h->passes_left > 0) {
        h->passes_left--;
        m0_loop_wake_at(l, m0_loop_now(l));
    } else if (h->deadline != 0 && m0_loop_now(l) < h->deadline) {
        m0_loop_wake_at(l, m0_loop_now(l) + 5);
    } else {
        m0_loop_stop(l);
    }
}

static void on_done(struct m0_loop *l, const struct m0_completion *c, void *ctx)
{
    struct harness *h = ctx;
    if (h->n < M0_ARRAY_LEN(h->got))
        h->got[h->n] = *c;
    h->n++;
    if (h->want != 0 && h->n >= h->want)
        m0_loop_stop(l);
}

static int setup(void **state)
{
    struct harness *h = calloc(1, sizeof *h);
    h->l = m0_loop_new();
    if (h->l == NULL)
        return -1;
    m0_loop_add_hook(h->l, hook, h);
    m0_loop_on_complete(h->l, on_done, h);
    h->job = m0_job_new(42);
    h->job->gen = 7;
    h->job->loop = h->l;
    *state = h;
    return 0;
}

static int teardown(void **state)
{
    struct harness *h = *state;
    m0_job_free(h->job);
    m0_loop_free(h->l);
    free(h);
    return 0;
}

/* Collect what has been posted so far. */
static void pass(struct harness *h)
{
    h->passes_left = 1;
    h->deadline = 0;
    h->want = 0;
    assert_int_equal(m0_loop_run(h->l), M0_OK);
}

/* Collect until want completions in all (a runner thread posts them). */
static void run_until(struct harness *h, size_t want)
{
    h->passes_left = 0;
    h->want = want;
    h->deadline = m0_clock_ms() + 10000;
    if (h->n < want)
        assert_int_equal(m0_loop_run(h->l), M0_OK);
    h->want = 0;
    assert_int_equal(h->n, want);
}

static void assert_posted(const struct harness *h, size_t i, enum m0_cpl_kind kind)
{
    assert_true(i < h->n);
    assert_int_equal(h->got[i].slot, 42);
    assert_int_equal(h->got[i].gen, 7);
    assert_int_equal(h->got[i].kind, kind);
}

/* Queue n bytes of 'c' for the loop, as a runner frames a body piece. */
static int push_bytes(struct m0_job *job, size_t n, char c)
{
    char *p = m0_buf_reserve(&job->resp.out, n);
    memset(p, c, n);
    job->resp.out.len += n;
    return m0_job_push(job);
}

static uint8_t waiting_of(struct m0_job *job)
{
    m0_job_lock(job);
    uint8_t w = job->ch.waiting;
    m0_job_unlock(job);
    return w;
}

/* Bounded: until the runner thread waits for one of bits (it sets them
 * under the lock just before it sleeps on the condition variable). */
static void until_waiting(struct m0_job *job, unsigned bits)
{
    uint64_t deadline = m0_clock_ms() + 10000;
    while (!(waiting_of(job) & bits)) {
        assert_true(m0_clock_ms() < deadline);
        nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);
    }
}

/* A runner on its own thread, blocked in one of the channel's waits. */
struct runner {
    struct m0_job *job;
    enum { WAIT_CREDIT, WAIT_BODY } what;
    uint64_t want;
    atomic_int done;
    int rc;
    pthread_t t;
};

static void *runner_main(void *arg)
{
    struct runner *r = arg;
    r->rc = r->what == WAIT_CREDIT ? m0_job_wait_credit(r->job) : m0_job_wait_body(r->job, r->want);
    atomic_store(&r->done, 1);
    return NULL;
}

static void start(struct runner *r, struct m0_job *job, int what, uint64_t want)
{
    *r = (struct runner){.job = job, .what = what, .want = want};
    assert_int_equal(pthread_create(&r->t, NULL, runner_main, r), 0);
}

static int finish(struct runner *r)
{
    pthread_join(r->t, NULL);
    return r->rc;
}

/* ------------------------------------------------------- run states */

/* New and reset jobs are IDLE with an empty channel (a reset keeps the
 * allocations, but not a queue buffer grown past four windows). */
static void test_new_and_reset_jobs_are_idle_with_an_empty_channel(void **state)
{
    struct harness *h = *state;
    struct m0_job *job = h->job;
    assert_int_equal(job->slot, 42);
    assert_int_equal(atomic_load(&job->run_state), M0_JOB_IDLE);
    assert_int_equal(job->ch.q.len, 0);
    atomic_store(&job->run_state, M0_JOB_CANCELLED);
    job->ch.gone = job->ch.posted = job->ch.closing = 1;
    job->ch.waiting = M0_WAIT_CREDIT;
    job->ch.body_lazy = job->ch.body_wanted = job->ch.body_done = job->ch.body_error = 1;
    job->ch.unwritten = 99;
    job->ch.close_code = job->ch.peer_code = 1001;
    job->hold_start = job->hold_last_id = 5;
    m0_buf_append(&job->ch.q, "abc", 3);
    m0_job_offer(job, M0_WS_TEXT, "m", 1);
    m0_job_reset(job);
    assert_int_equal(atomic_load(&job->run_state), M0_JOB_IDLE);
    assert_int_equal(m0_buf_unread(&job->ch.q), 0);
    assert_true(job->ch.q.cap > 0);                        /* kept */
    assert_int_equal(job->ch.unwritten, 0);
    assert_int_equal(job->ch.gone | job->ch.posted | job->ch.closing | job->ch.waiting, 0);
    assert_int_equal(job->ch.body_lazy | job->ch.body_wanted | job->ch.body_done | job->ch.body_error, 0);
    assert_int_equal(job->ch.in_count, 0);
    assert_int_equal(job->ch.close_code + job->ch.peer_code, 0);
    assert_int_equal(job->hold_start + job->hold_last_id, 0);
    assert_false(m0_job_client_gone(job));
    m0_buf_reserve(&job->ch.q, 5 * M0_JOB_WINDOW);
    m0_job_reset(job);
    assert_int_equal(job->ch.q.cap, 0);                     /* too big to keep */
}

/* The CAS as the pool (QUEUED → RUNNING) and the loop (QUEUED →
 * CANCELLED, on --request-timeout or a client that left) each do it. */
static int claim(struct m0_job *job, int to, int *saw)
{
    int queued = M0_JOB_QUEUED;
    int won = atomic_compare_exchange_strong(&job->run_state, &queued, to);
    *saw = queued;
    return won;
}

struct racer {
    struct m0_job *job;
    pthread_barrier_t *go;
    int to, rounds, wins, saw_other;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    for (int i = 0; i < r->rounds; i++) {
        pthread_barrier_wait(r->go);        /* the job is QUEUED */
        int saw;
        if (claim(r->job, r->to, &saw))
            r->wins++;
        else if (saw != M0_JOB_QUEUED && saw != r->to)
            r->saw_other++;                 /* the loser sees the winner's state */
        pthread_barrier_wait(r->go);        /* both have tried */
        pthread_barrier_wait(r->go);        /* the main thread has checked */
    }
    return NULL;
}

/* A pool thread and the loop race for a QUEUED job: exactly one wins each
 * round, the job is in the winner's state, and the loser, seeing it, leaves
 * the job alone. */
static void test_queued_has_one_winner_between_pool_and_loop(void **state)
{
    struct harness *h = *state;
    struct m0_job *job = h->job;
    enum { ROUNDS = 3000 };
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 3);
    struct racer pool = {job, &go, M0_JOB_RUNNING, ROUNDS, 0, 0};
    struct racer loop = {job, &go, M0_JOB_CANCELLED, ROUNDS, 0, 0};
    pthread_t tp, tl;
    assert_int_equal(pthread_create(&tp, NULL, race, &pool), 0);
    assert_int_equal(pthread_create(&tl, NULL, race, &loop), 0);
    int bad = 0;
    for (int i = 0; i < ROUNDS; i++) {
        m0_job_reset(job);
        atomic_store(&job->run_state, M0_JOB_QUEUED);
        int before = pool.wins + loop.wins;
        pthread_barrier_wait(&go);
        pthread_barrier_wait(&go);
        int winners = pool.wins + loop.wins - before;
        int st = atomic_load(&job->run_state);
        if (winners != 1 || (st != M0_JOB_RUNNING && st != M0_JOB_CANCELLED))
            bad++;
        pthread_barrier_wait(&go);
    }
    pthread_join(tp, NULL);
    pthread_join(tl, NULL);
    pthread_barrier_destroy(&go);
    assert_int_equal(bad, 0);
    assert_int_equal(pool.wins + loop.wins, ROUNDS);
    assert_int_equal(pool.saw_other, loop.wins);           /* every loss saw the other's state */
    assert_int_equal(loop.saw_other, pool.wins);
    /* Once cancelled (or running), a late claim fails; reset makes it IDLE. */
    int saw;
    atomic_store(&job->run_state, M0_JOB_CANCELLED);
    assert_false(claim(job, M0_JOB_RUNNING, &saw));
    assert_int_equal(saw, M0_JOB_CANCELLED);
    assert_int_equal(atomic_load(&job->run_state), M0_JOB_CANCELLED);
    m0_job_reset(job);
    assert_int_equal(atomic_load(&job->run_state), M0_JOB_IDLE);
    assert_false(claim(job, M0_JOB_RUNNING, &saw));         /* IDLE is nobody's to start */
}

/* ---------------------------------------------------- body hand-over */

/* Pushes post one PART until the loop takes the bytes; the loop gets them
 * all, in order; the next push posts again. The first push into an empty
 * channel hands the buffer over whole (no copy). */
static void test_push_posts_one_part_until_the_loop_takes(void **state)
{
    struct harness *h = *state;
    struct m0_job *job = h->job;
    m0_buf_append(&job->resp.out, "abc", 3);
    const char *framed = job->resp.out.data;
    assert_int_equal(m0_job_push(job), M0_OK);
    assert_ptr_equal(job->ch.q.data, framed);               /* moved, not copied */
    assert_int_equal(m0_buf_unread(&job->resp.out), 0);
    assert_int_equal(push_bytes(job, 2, 'd'), M0_OK);
    assert_int_equal(m0_job_push(job), M0_OK);              /* nothing framed: nothing posted */
    pass(h);
    assert_int_equal(h->n, 1);
    assert_posted(h, 0, M0_CPL_PART);
    struct m0_buf out = {0};
    assert_int_equal(m0_job_take(job, &out), 5);
    assert_int_equal(out.len, 5);
    assert_memory_equal(out.data, "abcdd", 5);
    assert_int_equal(job->ch.unwritten, 5);                 /* taken, not yet written */
    assert_int_equal(m0_job_take(job, &out), 0);
    assert_int_equal(push_bytes(job, 1, 'e'), M0_OK);
    pass(h);
    assert_int_equal(h->n, 2);
    assert_posted(h, 1, M0_CPL_PART);
    assert_int_equal(m0_job_take(job, &out), 1);            /* appended after the unwritten bytes */
    assert_memory_equal(out.data + out.off, "abcdde", 6);
    m0_buf_free(&out);
}

/* Over the window (queued + unwritten > M0_JOB_WINDOW) a runner blocks;
 * credit that leaves more than half the window in flight does not wake it
 * (not once per write); credit to half does. Under the window it does not
 * wait at all. */
static void test_credit_blocks_over_the_window_and_wakes_at_half(void **state)
{
    struct harness *h = *state;
    struct m0_job *job = h->job;
    assert_int_equal(m0_job_wait_credit(job), M0_OK);      /* nothing queued: at once */
    assert_int_equal(push_bytes(job, M0_JOB_WINDOW, 'x'), M0_OK);
    assert_int_equal(m0_job_wait_credit(job), M0_OK);      /* a full window is allowed */
    assert_int_equal(push_bytes(job, 1000, 'y'), M0_OK);
    struct runner r;
    start(&r, job, WAIT_CREDIT, 0);
    until_waiting(job, M0_WAIT_CREDIT);
    struct m0_buf out = {0};
    assert_int_equal(m0_job_take(job, &out), M0_JOB_WINDOW + 1000);
    m0_job_credit(job, M0_JOB_WINDOW + 1);                  /* still over */
    m0_job_credit(job, M0_JOB_WINDOW / 2 + 1);             /* under the window, above half */
    assert_true(waiting_of(job) & M0_WAIT_CREDIT);          /* not woken */
    assert_false(atomic_load(&r.done));
    m0_job_credit(job, M0_JOB_WINDOW / 2);
    assert_int_equal(finish(&r), M0_OK);
    assert_int_equal(waiting_of(job), 0);
    m0_buf_free(&out);
}

/* The client leaving wakes a runner blocked for credit or for the body,
 * and from then on every wait and push fails at once, posting nothing. */
static void test_a_client_that_left_ends_every_wait(void **state)
{
    struct harness *h = *state;
    struct m0_job *job = h->job;
    assert_int_equal(push_bytes(job, M0_JOB_WINDOW + 1, 'x'), M0_OK);
    pass(h);
    assert_int_equal(h->n, 1);
    struct runner credit, body;
    start(&credit, job, WAIT_CREDIT, 0);
    until_waiting(job, M0_WAIT_CREDIT);
    m0_job_gone(job);
    assert_int_equal(finish(&credit), M0_ERR);
    assert_true(m0_job_client_gone(job));
    m0_job_reset(job);
    job->ch.body_lazy = 1;
    start(&body, job, WAIT_BODY, 10);
    until_waiting(job, M0_WAIT_BODY);
    m0_job_gone(job);
    assert_int_equal(finish(&body), M0_ERR);
    run_until(h, 2);
    assert_posted(h, 1, M0_CPL_CONTINUE);                   /* asked for before the client left */
    assert_int_equal(push_bytes(job, 10, 'z'), M0_ERR);
    assert_int_equal(m0_buf_unread(&job->resp.out), 0);     /* dropped */
    assert_int_equal(m0_job_push(job), M0_ERR);
    assert_int_equal(m0_job_wait_credit(job), M0_ERR);
    assert_int_equal(m0_job_wait_body(job, 1), M0_ERR);
    assert_int_equal(m0_job_push_raw(job, "a", 1, "b", 1), M0_ERR);
    assert_int_equal(m0_job_poll(job, M0_WAIT_CREDIT | M0_WAIT_BODY | M0_WAIT_MSG),
                     M0_WAIT_CREDIT | M0_WAIT_BODY | M0_WAIT_MSG);
    pass(h);
    assert_int_equal(h->n, 2);                              /* nothing more */
}

/* ------------------------------------------------------- a lazy body */

static void grow_body(struct m0_job *job, const char *p, size_t n)
{
    m0_job_lock(job);                       /* as the loop's parser appends */
    m0_buf_append(&job->req.body, p, n);
    job->req.body_len += n;
    m0_job_unlock(job);
    m0_job_body_progress(job, 0, 0);
}

/* Expect: 100-continue: the first wait asks the loop for the body (one
 * CONTINUE, never a second), and waits until the bytes wanted arrived or
 * the body is complete; what arrived can be read meanwhile. */
static void test_a_lazy_body_asks_once_and_waits_for_the_bytes_wanted(void **state)
{
    struct harness *h = *state;
    struct m0_job *job = h->job;
    assert_int_equal(m0_job_wait_body(job, 1000), M0_OK);   /* buffered before dispatch: no wait */
    job->ch.body_lazy = 1;
    struct runner r;
    start(&r, job, WAIT_BODY, 10);
    run_until(h, 1);
    assert_posted(h, 0, M0_CPL_CONTINUE);
    until_waiting(job, M0_WAIT_BODY);
    grow_body(job, "01234", 5);                 /* 5 of the 10 wanted: it waits on */
    until_waiting(job, M0_WAIT_BODY);           /* woken, and waiting again */
    assert_false(atomic_load(&r.done));
    int complete = -1;
    assert_int_equal(m0_job_body_len(job, &complete), 5);
    assert_int_equal(complete, 0);
    char got[16];
    assert_int_equal(m0_job_body_read(job, 0, got, sizeof got), 5);
    assert_memory_equal(got, "01234", 5);
    grow_body(job, "56789", 5);
    assert_int_equal(finish(&r), M0_OK);
    start(&r, job, WAIT_BODY, 20);              /* more than will ever come */
    until_waiting(job, M0_WAIT_BODY);
    m0_job_body_progress(job, 1, 0);            /* complete at 10 */
    assert_int_equal(finish(&r), M0_OK);
    assert_int_equal(m0_job_body_len(job, &complete), 10);
    assert_int_equal(complete, 1);
    pass(h);
    assert_int_equal(h->n, 1);                  /* 100 Continue was asked for once */
}

static void test_a_body_that_fails_fails_the_wait(void **state)
{
    struct harness *h = *state;
    struct m0_job *job = h->job;
    job->ch.body_lazy = 1;
    struct runner r;
    start(&r, job, WAIT_BODY, 1);
    until_waiting(job, M0_WAIT_BODY);
    m0_job_body_progress(job, 0, 1);            /* --body-timeout, or malformed */
    assert_int_equal(finish(&r), M0_ERR);
    assert_int_equal(m0_job_wait_body(job, 1), M0_ERR);
    run_until(h, 1);
}

/* ------------------------------------------ the asynchronous runner */

static struct harness *woken;

static void count_wake(struct m0_job *job)
{
    (void)job;
    woken->wakes++;
}

/* An asynchronous runner polls: what holds now is returned, what does not
 * arms job->wake, which the loop calls once when it happens (instead of
 * signalling), clearing every armed wait. */
static void test_poll_arms_the_wakeup_for_what_is_not_ready(void **state)
{
    struct harness *h = *state;
    struct m0_job *job = h->job;
    woken = h;
    job->wake = count_wake;
    assert_int_equal(m0_job_poll(job, M0_WAIT_CREDIT), M0_WAIT_CREDIT);
    assert_int_equal(m0_job_poll(job, M0_WAIT_BODY), M0_WAIT_BODY);    /* buffered body */
    assert_int_equal(job->ch.waiting, 0);
    assert_int_equal(push_bytes(job, M0_JOB_WINDOW + 1, 'x'), M0_OK);
    assert_int_equal(m0_job_poll(job, M0_WAIT_CREDIT | M0_WAIT_GONE | M0_WAIT_MSG), 0);
    assert_int_equal(job->ch.waiting, M0_WAIT_CREDIT | M0_WAIT_GONE | M0_WAIT_MSG);
    struct m0_buf out = {0};
    m0_job_take(job, &out);
    m0_job_credit(job, M0_JOB_WINDOW / 2 + 1);
    assert_int_equal(h->wakes, 0);
    m0_job_credit(job, M0_JOB_WINDOW / 2);
    assert_int_equal(h->wakes, 1);
    assert_int_equal(job->ch.waiting, 0);       /* every armed wait is over: the runner re-polls */
    assert_int_equal(m0_job_poll(job, M0_WAIT_MSG), 0);
    m0_job_offer(job, M0_WS_TEXT, "hi", 2);
    assert_int_equal(h->wakes, 2);
    assert_int_equal(m0_job_poll(job, M0_WAIT_MSG), M0_WAIT_MSG);
    m0_job_offer(job, M0_WS_TEXT, "again", 5);  /* nobody waits: no wake */
    assert_int_equal(h->wakes, 2);
    /* A lazy body: the first BODY poll asks for it, once. */
    job->ch.body_lazy = 1;
    pass(h);
    size_t before = h->n;
    assert_int_equal(m0_job_poll(job, M0_WAIT_BODY), 0);
    assert_int_equal(m0_job_poll(job, M0_WAIT_BODY), 0);
    pass(h);
    assert_int_equal(h->n, before + 1);
    assert_posted(h, before, M0_CPL_CONTINUE);
    m0_job_body_progress(job, 1, 0);
    assert_int_equal(h->wakes, 3);
    assert_int_equal(m0_job_poll(job, M0_WAIT_BODY), M0_WAIT_BODY);
    assert_int_equal(m0_job_poll(job, M0_WAIT_GONE), 0);
    m0_job_gone(job);
    assert_int_equal(h->wakes, 4);
    m0_buf_free(&out);
}

/* ------------------------------------------------------- a WebSocket */

struct taken {
    int opcode;
    char data[32];
    size_t n;
    int refuse;
};

static int take_one(void *ctx, int opcode, const char *p, size_t n)
{
    struct taken *t = ctx;
    if (t->refuse)
        return -1;
    t->opcode = opcode;
    t->n = n < sizeof t->data ? n : sizeof t->data;
    memcpy(t->data, p, t->n);
    return 0;
}

/* Offered messages are taken oldest first, whole (a NUL inside); a take
 * that refuses leaves the message; taking the last of an offer posts
 * TAKEN. Once the socket is gone: -1 with the peer's close code and the
 * reason of its close frame. */
static void test_messages_are_taken_in_order_then_the_close_code(void **state)
{
    struct harness *h = *state;
    struct m0_job *job = h->job;
    struct taken t = {0};
    unsigned code = 0;
    char reason[M0_WS_REASON_MAX];
    size_t rlen = 99;
    assert_int_equal(m0_job_msg_take(job, take_one, &t, &code, reason, &rlen), 0);    /* none yet */
    m0_job_offer(job, M0_WS_TEXT, "one", 3);
    m0_job_offer(job, M0_WS_BINARY, "t\0o", 3);
    t.refuse = 1;
    assert_int_equal(m0_job_msg_take(job, take_one, &t, &code, reason, &rlen), -2);
    t.refuse = 0;
    assert_int_equal(m0_job_msg_take(job, take_one, &t, &code, reason, &rlen), 1);
    assert_int_equal(t.opcode, M0_WS_TEXT);
    assert_int_equal(t.n, 3);
    assert_memory_equal(t.data, "one", 3);
    pass(h);
    assert_int_equal(h->n, 0);                  /* one still waits: no TAKEN yet */
    assert_int_equal(m0_job_msg_take(job, take_one, &t, &code, reason, &rlen), 1);
    assert_int_equal(t.opcode, M0_WS_BINARY);
    assert_memory_equal(t.data, "t\0o", 3);
    pass(h);
    assert_int_equal(h->n, 1);
    assert_posted(h, 0, M0_CPL_TAKEN);          /* the loop offers the next batch */
    assert_int_equal(m0_job_msg_take(job, take_one, &t, &code, reason, &rlen), 0);
    m0_job_offer(job, M0_WS_TEXT, "last", 4);
    m0_job_peer_reason(job, "going away", 10);
    m0_job_socket_gone(job, 1001);
    m0_job_socket_gone(job, 1006);              /* the first code stays */
    assert_int_equal(m0_job_msg_take(job, take_one, &t, &code, reason, &rlen), 1);   /* still delivered */
    assert_int_equal(m0_job_msg_take(job, take_one, &t, &code, reason, &rlen), -1);
    assert_int_equal(code, 1001);
    assert_int_equal(rlen, 10);
    assert_memory_equal(reason, "going away", 10);
    pass(h);
    assert_int_equal(h->n, 1);                  /* no TAKEN once gone */
}

/* A socket that vanished without a close frame ended with 1006. */
static void test_a_vanished_socket_ended_with_1006(void **state)
{
    struct harness *h = *state;
    struct taken t = {0};
    unsigned code = 0;
    char reason[M0_WS_REASON_MAX];
    size_t rlen = 99;
    m0_job_gone(h->job);
    assert_int_equal(m0_job_msg_take(h->job, take_one, &t, &code, reason, &rlen), -1);
    assert_int_equal(code, 1006);
    assert_int_equal(rlen, 0);
}

/* Frames pushed raw reach the loop in order with one PART; our close frame
 * comes after them (its reason cut to 123 bytes) and nothing after it. */
static void test_the_close_frame_follows_every_pushed_byte_and_ends_pushing(void **state)
{
    struct harness *h = *state;
    struct m0_job *job = h->job;
    unsigned code = 0;
    char reason[M0_WS_REASON_MAX];
    size_t rlen = 0;
    assert_int_equal(m0_job_take_close(job, &code, reason, &rlen), 0);
    assert_int_equal(m0_job_push_raw(job, "ab", 2, "cd", 2), M0_OK);
    assert_int_equal(m0_job_push_raw(job, "e", 1, NULL, 0), M0_OK);
    char longer[200];
    memset(longer, 'r', sizeof longer);
    assert_int_equal(m0_job_close_socket(job, 4000, longer, sizeof longer), M0_OK);
    assert_int_equal(m0_job_push_raw(job, "f", 1, NULL, 0), M0_ERR);
    assert_int_equal(m0_job_close_socket(job, 1000, "", 0), M0_ERR);
    pass(h);
    assert_int_equal(h->n, 1);
    assert_posted(h, 0, M0_CPL_PART);
    struct m0_buf out = {0};
    assert_int_equal(m0_job_take(job, &out), 5);
    assert_memory_equal(out.data, "abcde", 5);
    assert_int_equal(m0_job_take_close(job, &code, reason, &rlen), 1);
    assert_int_equal(code, 4000);
    assert_int_equal(rlen, M0_WS_REASON_MAX);
    assert_memory_equal(reason, longer, M0_WS_REASON_MAX);
    m0_buf_free(&out);
}

/* -------------------------------------------------- inline runners */

struct inline_log {
    int flushes, reads;
    uint64_t want;
    int rc;
};

static int inline_flush(struct m0_job *job, void *ctx)
{
    struct inline_log *log = ctx;
    log->flushes++;
    m0_buf_reset(&job->resp.out);
    return log->rc;
}

static int inline_read(struct m0_job *job, uint64_t want, void *ctx)
{
    (void)job;
    struct inline_log *log = ctx;
    log->reads++;
    log->want = want;
    return log->rc;
}

/* On the loop thread (no pool) a push writes through the environment's
 * flush, credit never waits, and a lazy body is read through its
 * read_body; nothing is posted. */
static void test_an_inline_runner_goes_through_its_environment(void **state)
{
    struct harness *h = *state;
    struct m0_job *job = h->job;
    struct inline_log log = {.rc = M0_OK};
    const struct m0_job_inline inl = {.flush = inline_flush, .read_body = inline_read, .ctx = &log};
    job->inl = &inl;
    assert_int_equal(push_bytes(job, M0_JOB_WINDOW * 2, 'x'), M0_OK);
    assert_int_equal(log.flushes, 1);
    assert_int_equal(m0_job_wait_credit(job), M0_OK);
    assert_int_equal(m0_job_wait_body(job, 8), M0_OK);     /* not lazy: nothing to read */
    assert_int_equal(log.reads, 0);
    job->ch.body_lazy = 1;
    assert_int_equal(m0_job_wait_body(job, 8), M0_OK);
    assert_int_equal(log.reads, 1);
    assert_int_equal(log.want, 8);
    log.rc = M0_ERR;                                        /* the client is gone */
    assert_int_equal(push_bytes(job, 1, 'y'), M0_ERR);
    assert_int_equal(m0_job_wait_body(job, 9), M0_ERR);
    pass(h);
    assert_int_equal(h->n, 0);
    job->inl = NULL;
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_new_and_reset_jobs_are_idle_with_an_empty_channel),
        T(test_queued_has_one_winner_between_pool_and_loop),
        T(test_push_posts_one_part_until_the_loop_takes),
        T(test_credit_blocks_over_the_window_and_wakes_at_half),
        T(test_a_client_that_left_ends_every_wait),
        T(test_a_lazy_body_asks_once_and_waits_for_the_bytes_wanted),
        T(test_a_body_that_fails_fails_the_wait),
        T(test_poll_arms_the_wakeup_for_what_is_not_ready),
        T(test_messages_are_taken_in_order_then_the_close_code),
        T(test_a_vanished_socket_ended_with_1006),
        T(test_the_close_frame_follows_every_pushed_byte_and_ends_pushing),
        T(test_an_inline_runner_goes_through_its_environment),
    };
#undef T
    return cmocka_run_group_tests_name("job", tests, NULL, NULL);
}
