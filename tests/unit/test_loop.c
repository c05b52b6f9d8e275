/*
 * test_loop.c — the event loop (src/event/loop.c): descriptor handlers added,
 * changed and removed from inside a callback (their own and others', the
 * handler table growing mid-dispatch); slot events carrying the
 * generation they were registered with; the completion queue posted from
 * other threads, in order, and deferred batches; before-sleep hooks, in
 * order, more than the old fixed table of eight, one added from inside a
 * hook; wake_at bounding the sleep.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "m0/loop.h"
#include "m0/timer.h"

/* ------------------------------------------------------------ harness */

/* One loop per test, with one hook of the harness's own that decides how
 * long m0_loop_run goes on: a number of passes that never sleep
 * (run_passes), or until enough completions arrived or a deadline passed
 * (run_until). */
struct harness {
    struct m0_loop *l;
    int passes_left;             /* > 0: run this many non-sleeping passes */
    uint64_t deadline;           /* loop clock; 0: none */
    struct m0_completion got[256];
    size_t n, want;
};

static void harness_hook(struct m0_loop *l, void *ctx)
{
    struct harness *h = ctx;
    if (h->passes_left > 0) {
        h->passes_left--;
        m0_loop_wake_at(l, m0_loop_now(l));         /* this pass does not sleep */
        return;
    }
    if (h->deadline != 0 && m0_loop_now(l) < h->deadline) {
        m0_loop_wake_at(l, m0_loop_now(l) + 5);
        return;
    }
    m0_loop_stop(l);
}

static void harness_done(struct m0_loop *l, const struct m0_completion *c, void *ctx)
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
    m0_loop_add_hook(h->l, harness_hook, h);
    m0_loop_on_complete(h->l, harness_done, h);
    *state = h;
    return 0;
}

static int teardown(void **state)
{
    struct harness *h = *state;
    m0_loop_free(h->l);
    free(h);
    return 0;
}

/* Run k passes, each handling what is ready now and never sleeping. */
static void run_passes(struct harness *h, int k)
{
    h->passes_left = k;
    h->deadline = 0;
    h->want = 0;
    assert_int_equal(m0_loop_run(h->l), M0_OK);
}

/* Run until want completions arrived in all, or ms passed. */
static void run_until(struct harness *h, size_t want, uint64_t ms)
{
    h->passes_left = 0;
    h->want = want;
    h->deadline = m0_clock_ms() + ms;
    if (h->n < want)
        assert_int_equal(m0_loop_run(h->l), M0_OK);
    h->want = 0;
}

static void make_pipe(int p[2])
{
    assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
}

/* ------------------------------------------------- descriptor handlers */

struct fdlog {
    struct harness *h;
    int calls[4];
    int fd[4];
    uint32_t events[4];
};

static void count_a(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    (void)l;
    struct fdlog *log = ctx;
    log->calls[0]++;
    log->fd[0] = fd;
    log->events[0] = events;
}

static void test_a_ready_descriptor_calls_its_handler(void **state)
{
    struct harness *h = *state;
    struct fdlog log = {.h = h};
    int p[2];
    make_pipe(p);
    assert_int_equal(m0_loop_add_fd(h->l, p[0], EPOLLIN, count_a, &log), M0_OK);
    run_passes(h, 2);
    assert_int_equal(log.calls[0], 0);                      /* nothing to read: not called */
    assert_int_equal(write(p[1], "x", 1), 1);
    run_passes(h, 1);
    assert_int_equal(log.calls[0], 1);
    assert_int_equal(log.fd[0], p[0]);
    assert_true(log.events[0] & EPOLLIN);
    /* Level-triggered: still readable, called again on the next pass. */
    run_passes(h, 1);
    assert_int_equal(log.calls[0], 2);
    m0_loop_del_fd(h->l, p[0]);
    run_passes(h, 1);
    assert_int_equal(log.calls[0], 2);                      /* removed: never again */
    close(p[0]);
    close(p[1]);
}

/* Whichever of two ready descriptors is dispatched first removes both: the
 * other's event, already in this pass's batch, must not reach its handler. */
static void remove_both(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    (void)events;
    struct fdlog *log = ctx;
    log->calls[fd == log->fd[0] ? 0 : 1]++;
    m0_loop_del_fd(l, log->fd[0]);
    m0_loop_del_fd(l, log->fd[1]);
}

static void test_a_handler_removes_itself_and_another_ready_one(void **state)
{
    struct harness *h = *state;
    struct fdlog log = {.h = h};
    int a[2], b[2];
    make_pipe(a);
    make_pipe(b);
    log.fd[0] = a[0];
    log.fd[1] = b[0];
    assert_int_equal(write(a[1], "x", 1), 1);
    assert_int_equal(write(b[1], "x", 1), 1);
    assert_int_equal(m0_loop_add_fd(h->l, a[0], EPOLLIN, remove_both, &log), M0_OK);
    assert_int_equal(m0_loop_add_fd(h->l, b[0], EPOLLIN, remove_both, &log), M0_OK);
    run_passes(h, 3);
    assert_int_equal(log.calls[0] + log.calls[1], 1);       /* one call in all, ever */
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}

/* Two ready descriptors whose handlers each add another, numbered far past
 * the end of the handler table, and change their own interest to nothing:
 * the first of them grows the table while the loop is dispatching this
 * pass's batch from it, and the second is dispatched from the grown one.
 * The added ones run from the next pass on; the two quieted ones no more. */
static void count_added(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    (void)l;
    struct fdlog *log = ctx;
    log->calls[2]++;
    log->fd[2] = fd;
    log->events[2] = events;
}

struct grow {
    struct fdlog *log;
    int idx, high;
};

static void add_high_one(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    (void)events;
    struct grow *g = ctx;
    g->log->calls[g->idx]++;
    assert_int_equal(m0_loop_add_fd(l, g->high, EPOLLIN, count_added, g->log), M0_OK);
    assert_int_equal(m0_loop_mod_fd(l, fd, 0), M0_OK);
}

static void test_handlers_add_descriptors_past_the_table_and_quiet_themselves(void **state)
{
    struct harness *h = *state;
    struct fdlog log = {.h = h};
    int a[2], c[2], b[2];
    make_pipe(a);
    make_pipe(c);
    make_pipe(b);
    struct grow ga = {&log, 0, 900}, gc = {&log, 1, 901};   /* far past a table sized for these */
    assert_int_equal(dup3(b[0], ga.high, O_CLOEXEC), ga.high);
    assert_int_equal(dup3(b[0], gc.high, O_CLOEXEC), gc.high);
    close(b[0]);
    assert_int_equal(write(a[1], "x", 1), 1);
    assert_int_equal(write(c[1], "x", 1), 1);
    assert_int_equal(write(b[1], "y", 1), 1);
    assert_int_equal(m0_loop_add_fd(h->l, a[0], EPOLLIN, add_high_one, &ga), M0_OK);
    assert_int_equal(m0_loop_add_fd(h->l, c[0], EPOLLIN, add_high_one, &gc), M0_OK);
    run_passes(h, 1);
    assert_int_equal(log.calls[0], 1);
    assert_int_equal(log.calls[1], 1);                      /* dispatched after the table grew */
    assert_int_equal(log.calls[2], 0);                      /* added after this pass's wait */
    run_passes(h, 2);
    assert_int_equal(log.calls[0], 1);                      /* interest 0: not called though readable */
    assert_int_equal(log.calls[1], 1);
    assert_int_equal(log.calls[2], 4);                      /* both added ones, both passes */
    assert_true(log.fd[2] == ga.high || log.fd[2] == gc.high);
    assert_true(log.events[2] & EPOLLIN);
    int fds[] = {a[0], a[1], c[0], c[1], b[1], ga.high, gc.high};
    for (size_t i = 0; i < M0_ARRAY_LEN(fds); i++) {
        m0_loop_del_fd(h->l, fds[i]);
        close(fds[i]);
    }
}

static void test_add_fd_reports_an_error(void **state)
{
    struct harness *h = *state;
    struct fdlog log = {.h = h};
    int p[2];
    make_pipe(p);
    assert_int_equal(m0_loop_add_fd(h->l, p[0], EPOLLIN, count_a, &log), M0_OK);
    errno = 0;
    assert_int_equal(m0_loop_add_fd(h->l, p[0], EPOLLIN, count_a, &log), M0_ERR);   /* twice */
    assert_int_equal(errno, EEXIST);
    close(p[1]);
    close(p[0]);                  /* closing it leaves epoll by itself */
    int bad = p[0];
    assert_int_equal(m0_loop_add_fd(h->l, bad, EPOLLIN, count_a, &log), M0_ERR);
    assert_int_equal(m0_loop_mod_fd(h->l, bad, EPOLLIN), M0_ERR);
}

/* ------------------------------------------------------------- slots */

struct slotlog {
    int calls;
    uint32_t slot, gen, events;
};

static void on_slot(struct m0_loop *l, uint32_t slot, uint32_t gen, uint32_t events, void *ctx)
{
    (void)l;
    struct slotlog *s = ctx;
    s->calls++;
    s->slot = slot;
    s->gen = gen;
    s->events = events;
}

/* The slot handler gets the generation the registration carried (its low
 * 31 bits): re-registered for a reused slot, the new one; the connection
 * module compares it with the slot's to drop a stale event. */
static void test_slot_events_carry_the_registration_generation(void **state)
{
    struct harness *h = *state;
    struct slotlog s = {0};
    int p[2];
    make_pipe(p);
    m0_loop_on_slot(h->l, on_slot, &s);
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(m0_loop_add_slot(h->l, p[0], 4000000000u, 3, EPOLLIN), M0_OK);
    run_passes(h, 1);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.slot, 4000000000u);                  /* all 32 bits of the slot */
    assert_int_equal(s.gen, 3);
    assert_true(s.events & EPOLLIN);
    assert_int_equal(m0_loop_mod_slot(h->l, p[0], 4000000000u, 4, EPOLLIN), M0_OK);
    run_passes(h, 1);
    assert_int_equal(s.calls, 2);
    assert_int_equal(s.gen, 4);                             /* the new registration's */
    assert_int_equal(m0_loop_mod_slot(h->l, p[0], 7, 0x80000005u, EPOLLIN), M0_OK);
    run_passes(h, 1);
    assert_int_equal(s.slot, 7);
    assert_int_equal(s.gen, 5);                             /* the top bit is the loop's tag */
    assert_int_equal(m0_loop_mod_slot(h->l, p[0], 7, 6, 0), M0_OK);
    run_passes(h, 1);
    assert_int_equal(s.calls, 3);                           /* no interest: no event */
    close(p[0]);
    close(p[1]);
}

/* ------------------------------------------------------- completions */

struct poster {
    struct m0_loop *l;
    uint32_t id, count;
};

static void *post_many(void *arg)
{
    struct poster *p = arg;
    for (uint32_t i = 0; i < p->count; i++) {
        struct m0_completion c = {.slot = p->id, .gen = i, .kind = 1, .rc = 0};
        m0_loop_post(p->l, &c);
    }
    return NULL;
}

struct ordered {
    uint32_t next[4];
    uint32_t total, want, disorder;
};

static void check_order(struct m0_loop *l, const struct m0_completion *c, void *ctx)
{
    struct ordered *o = ctx;
    if (c->slot >= 4 || c->gen != o->next[c->slot])
        o->disorder++;
    else
        o->next[c->slot]++;
    if (++o->total == o->want)
        m0_loop_stop(l);
}

/* Completions posted from other threads all arrive, each thread's in the
 * order it posted them (several posters, one eventfd, coalesced wakeups). */
static void test_completions_from_other_threads_arrive_in_order(void **state)
{
    struct harness *h = *state;
    enum { POSTERS = 3, EACH = 20000 };
    struct ordered o = {.want = POSTERS * EACH};
    m0_loop_on_complete(h->l, check_order, &o);
    struct poster p[POSTERS];
    pthread_t t[POSTERS];
    for (uint32_t i = 0; i < POSTERS; i++) {
        p[i] = (struct poster){.l = h->l, .id = i, .count = EACH};
        assert_int_equal(pthread_create(&t[i], NULL, post_many, &p[i]), 0);
    }
    h->passes_left = 0;
    h->want = 0;
    h->deadline = m0_clock_ms() + 20000;                    /* bound: 20 s */
    assert_int_equal(m0_loop_run(h->l), M0_OK);
    for (int i = 0; i < POSTERS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(o.disorder, 0);
    assert_int_equal(o.total, POSTERS * EACH);
    for (int i = 0; i < POSTERS; i++)
        assert_int_equal(o.next[i], EACH);
    /* Nothing is left behind: another pass brings nothing more. */
    o.want = 0;
    run_passes(h, 2);
    assert_int_equal(o.total, POSTERS * EACH);
}

struct deferring {
    struct m0_loop *l;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int step, done;
};

static void step_wait(struct deferring *d, int step)
{
    pthread_mutex_lock(&d->lock);
    while (d->step < step)
        pthread_cond_wait(&d->cond, &d->lock);
    pthread_mutex_unlock(&d->lock);
}

static void step_to(struct deferring *d, int step, int *field)
{
    pthread_mutex_lock(&d->lock);
    *field = step;
    pthread_cond_broadcast(&d->cond);
    pthread_mutex_unlock(&d->lock);
}

static void done_wait(struct deferring *d, int step)
{
    pthread_mutex_lock(&d->lock);
    while (d->done < step)
        pthread_cond_wait(&d->cond, &d->lock);
    pthread_mutex_unlock(&d->lock);
}

static void *deferring_poster(void *arg)
{
    struct deferring *d = arg;
    m0_loop_defer(d->l, 1);
    for (uint32_t i = 0; i < 3; i++) {
        struct m0_completion c = {.slot = 9, .gen = i, .kind = 1};
        m0_loop_post(d->l, &c);
    }
    step_to(d, 1, &d->done);            /* posted, deferred */
    step_wait(d, 1);
    m0_loop_flush(d->l);
    step_to(d, 2, &d->done);
    step_wait(d, 2);
    struct m0_completion c = {.slot = 9, .gen = 3, .kind = 1};
    m0_loop_post(d->l, &c);
    m0_loop_defer(d->l, 0);             /* ending the deferral flushes */
    c.gen = 4;
    m0_loop_post(d->l, &c);             /* and posts go straight out again */
    step_to(d, 3, &d->done);
    return NULL;
}

/* Between defer(1) and flush a thread's posts only collect (the loop sees
 * nothing); flush posts them in order; defer(0) flushes what is left. */
static void test_deferred_completions_go_out_on_flush(void **state)
{
    struct harness *h = *state;
    struct deferring d = {.l = h->l};
    pthread_mutex_init(&d.lock, NULL);
    pthread_cond_init(&d.cond, NULL);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, deferring_poster, &d), 0);
    done_wait(&d, 1);
    run_passes(h, 2);
    assert_int_equal(h->n, 0);                              /* collected, not posted */
    step_to(&d, 1, &d.step);
    done_wait(&d, 2);
    run_until(h, 3, 5000);
    assert_int_equal(h->n, 3);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(h->got[i].gen, i);
    step_to(&d, 2, &d.step);
    done_wait(&d, 3);
    run_until(h, 5, 5000);
    assert_int_equal(h->n, 5);
    assert_int_equal(h->got[3].gen, 3);
    assert_int_equal(h->got[4].gen, 4);
    pthread_join(t, NULL);
    pthread_mutex_destroy(&d.lock);
    pthread_cond_destroy(&d.cond);
}

/* Posted from the loop thread itself (an inline runner): handled on the
 * next pass, not from inside the post. */
static void test_a_completion_posted_on_the_loop_thread_waits_for_the_pass(void **state)
{
    struct harness *h = *state;
    struct m0_completion c = {.slot = 1, .gen = 2, .kind = 3, .rc = -1};
    m0_loop_post(h->l, &c);
    assert_int_equal(h->n, 0);
    run_passes(h, 1);
    assert_int_equal(h->n, 1);
    assert_int_equal(h->got[0].slot, 1);
    assert_int_equal(h->got[0].gen, 2);
    assert_int_equal(h->got[0].kind, 3);
    assert_int_equal(h->got[0].rc, -1);
}

/* ------------------------------------------------------------- hooks */

struct hooklog {
    int order[64];
    int n;
    struct m0_loop *l;
    int added;
};

struct hookid {
    struct hooklog *log;
    int id;
};

static void record_hook(struct m0_loop *l, void *ctx)
{
    (void)l;
    struct hookid *h = ctx;
    if (h->log->n < (int)M0_ARRAY_LEN(h->log->order))
        h->log->order[h->log->n++] = h->id;
}

static void test_hooks_run_every_pass_in_registration_order(void **state)
{
    struct harness *h = *state;
    struct hooklog log = {0};
    struct hookid ids[3] = {{&log, 1}, {&log, 2}, {&log, 3}};
    for (int i = 0; i < 3; i++)
        m0_loop_add_hook(h->l, record_hook, &ids[i]);
    run_passes(h, 2);
    /* Two passes, and a third begun: the harness's hook (first) stops the
     * loop before the others run in it. */
    int want[] = {1, 2, 3, 1, 2, 3};
    assert_int_equal(log.n, 6);
    assert_memory_equal(log.order, want, sizeof want);
}

static struct hookid late_id;

static void adding_hook(struct m0_loop *l, void *ctx)
{
    struct hooklog *log = ctx;
    if (!log->added) {
        log->added = 1;
        late_id = (struct hookid){log, 7};
        m0_loop_add_hook(l, record_hook, &late_id);
    }
}

/* A hook that adds a hook while the hooks are running: the new one runs by
 * the next pass, and every pass after. */
static void test_a_hook_added_from_a_hook_runs_by_the_next_pass(void **state)
{
    struct harness *h = *state;
    struct hooklog log = {0};
    m0_loop_add_hook(h->l, adding_hook, &log);
    run_passes(h, 3);
    assert_true(log.n >= 2);
    for (int i = 0; i < log.n; i++)
        assert_int_equal(log.order[i], 7);
}

/* In a child: 20 hooks on a loop, one pass. 0 when each ran once, in
 * order. The child of a loop whose hook table is fixed dies of abort(). */
static int twenty_hooks(void)
{
    struct m0_loop *l = m0_loop_new();
    if (l == NULL)
        return 3;
    struct hooklog log = {0};
    struct hookid ids[20];
    struct harness h = {.l = l, .passes_left = 1};
    m0_loop_add_hook(l, harness_hook, &h);
    for (int i = 0; i < 20; i++) {
        ids[i] = (struct hookid){&log, i};
        m0_loop_add_hook(l, record_hook, &ids[i]);
    }
    if (m0_loop_run(l) != M0_OK)
        return 4;
    if (log.n != 20)
        return 5;
    for (int i = 0; i < 20; i++)
        if (log.order[i] != i)
            return 6;
    m0_loop_free(l);
    return 0;
}

/* More hooks than the old fixed table of eight (which aborted at the
 * ninth): every one runs, in order. */
static void test_more_hooks_than_eight_all_run_in_order(void **state)
{
    (void)state;
    assert_int_equal(twenty_hooks(), 0);
}

/* --------------------------------------------------------- wake_at */

static void wake_soon(struct m0_loop *l, void *ctx)
{
    int *passes = ctx;
    if (++*passes == 2) {
        m0_loop_stop(l);
        return;
    }
    m0_loop_wake_at(l, m0_loop_now(l) + 60000);     /* a later deadline ... */
    m0_loop_wake_at(l, m0_loop_now(l) + 30);        /* ... the earliest one wins */
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The sleep ends at the earliest wake_at of the pass, and the loop clock
 * moves on after the wakeup. */
static void test_wake_at_bounds_the_sleep(void **state)
{
    (void)state;
    struct m0_loop *l = m0_loop_new();
    assert_non_null(l);
    int passes = 0;
    m0_loop_add_hook(l, wake_soon, &passes);
    uint64_t before = m0_loop_now(l);
    double began = mono_s();
    assert_int_equal(m0_loop_run(l), M0_OK);
    double took = mono_s() - began;
    assert_int_equal(passes, 2);
    assert_true(took >= 0.025);                     /* it slept ... */
    assert_true(took < 10.0);                       /* ... not until the later deadline */
    assert_true(m0_loop_now(l) >= before + 25);
    m0_loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_ready_descriptor_calls_its_handler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_handler_removes_itself_and_another_ready_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handlers_add_descriptors_past_the_table_and_quiet_themselves, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_add_fd_reports_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slot_events_carry_the_registration_generation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_completions_from_other_threads_arrive_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deferred_completions_go_out_on_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_completion_posted_on_the_loop_thread_waits_for_the_pass, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_hooks_run_every_pass_in_registration_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_hook_added_from_a_hook_runs_by_the_next_pass, setup, teardown),
        cmocka_unit_test(test_more_hooks_than_eight_all_run_in_order),
        cmocka_unit_test(test_wake_at_bounds_the_sleep),
    };
    return cmocka_run_group_tests_name("loop", tests, NULL, NULL);
}
