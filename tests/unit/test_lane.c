/*
 * test_lane.c — submit lanes (src/event/lane.c): records keep their slot and
 * generation bit for bit, so a reader can tell a record for a reused slot
 * from a stale one; FIFO order; a full lane says so (one record or a
 * sendmmsg batch) and the loop-side queue keeps what it could not send, in
 * order; several readers share a lane and each record reaches exactly
 * one; take's timeout; close twice.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "m0/lane.h"
#include "m0/timer.h"

static void open_lane(struct m0_lane *lane)
{
    assert_int_equal(m0_lane_open(lane, 0), M0_OK);
    assert_true(lane->submit_fd >= 0 && lane->take_fd >= 0);
}

/* How many records the lane takes before it is full. */
static size_t fill(struct m0_lane *lane, uint32_t first)
{
    size_t n = 0;
    for (;;) {
        struct m0_lane_rec r = {.slot = first + (uint32_t)n, .gen = 1, .kind = M0_RUN_START};
        int rc = m0_lane_send(lane, &r);
        if (rc == M0_AGAIN)
            return n;
        assert_int_equal(rc, M0_OK);
        n++;
        assert_true(n < 1000000);
    }
}

/* A slot's job, then the same slot reused (a newer generation), the top
 * bit and the extremes of both fields: every record comes back whole, in
 * order, so a reader comparing gen with the slot's current generation
 * drops exactly the stale ones. */
static void test_records_keep_slot_and_generation_in_order(void **state)
{
    (void)state;
    struct m0_lane lane;
    open_lane(&lane);
    const struct m0_lane_rec sent[] = {
        {.slot = 5, .gen = 1, .kind = M0_RUN_START},
        {.slot = 5, .gen = 2, .kind = M0_RUN_START},          /* slot 5 reused */
        {.slot = 5, .gen = 1, .kind = M0_RUN_MESSAGE},        /* late, for the old connection */
        {.slot = 0, .gen = 0x80000000u, .kind = M0_RUN_MESSAGE},
        {.slot = UINT32_MAX, .gen = UINT32_MAX, .kind = M0_RUN_START},
        {.slot = 0, .gen = 0, .kind = M0_RUN_STOP},
    };
    for (size_t i = 0; i < M0_ARRAY_LEN(sent); i++)
        assert_int_equal(m0_lane_send(&lane, &sent[i]), M0_OK);
    uint32_t current_gen_of_5 = 2;
    int run = 0, dropped = 0;
    for (size_t i = 0; i < M0_ARRAY_LEN(sent); i++) {
        struct m0_lane_rec got;
        assert_int_equal(m0_lane_poll(&lane, &got), M0_OK);
        assert_memory_equal(&got, &sent[i], sizeof got);
        if (got.slot == 5 && got.gen == current_gen_of_5)
            run++;
        else if (got.slot == 5)
            dropped++;
    }
    assert_int_equal(run, 1);
    assert_int_equal(dropped, 2);
    struct m0_lane_rec none;
    assert_int_equal(m0_lane_poll(&lane, &none), M0_AGAIN);       /* empty */
    m0_lane_close(&lane);
}

/* Full: a send says M0_AGAIN (not an error), a batch sends none; once the
 * reader takes one, one more fits. */
static void test_a_full_lane_says_again(void **state)
{
    (void)state;
    struct m0_lane lane;
    open_lane(&lane);
    size_t cap = fill(&lane, 0);
    assert_true(cap > 0);
    struct m0_lane_rec more[3] = {{.slot = 100}, {.slot = 101}, {.slot = 102}};
    assert_int_equal(m0_lane_send_many(&lane, more, 3), 0);
    struct m0_lane_rec got;
    assert_int_equal(m0_lane_poll(&lane, &got), M0_OK);
    assert_int_equal(got.slot, 0);
    assert_int_equal(m0_lane_send_many(&lane, more, 3), 1);       /* room for one */
    for (uint32_t i = 1; i < cap; i++) {
        assert_int_equal(m0_lane_poll(&lane, &got), M0_OK);
        assert_int_equal(got.slot, i);
    }
    assert_int_equal(m0_lane_poll(&lane, &got), M0_OK);
    assert_int_equal(got.slot, 100);
    assert_int_equal(m0_lane_poll(&lane, &got), M0_AGAIN);
    m0_lane_close(&lane);
}

static void push_numbered(struct m0_lane_q *q, uint32_t i)
{
    struct m0_lane_rec r = {.slot = i, .gen = i * 7u, .kind = M0_RUN_START};
    m0_lane_q_push(q, &r);
}

/* The loop-side queue in front of a full lane: what the lane cannot take
 * waits, records pushed meanwhile go behind it, and the reader gets every
 * record once, in the order pushed, over several flushes (more than one
 * sendmmsg batch of 64). */
static void test_the_queue_keeps_order_across_a_full_lane(void **state)
{
    (void)state;
    struct m0_lane lane;
    open_lane(&lane);
    struct m0_lane_q q = {0};
    enum { N = 1000 };
    uint32_t pushed = 0, next = 0;
    while (pushed < N / 2)
        push_numbered(&q, pushed++);
    int flushes = 0, again = 0;
    while (next < N) {
        int rc = m0_lane_q_flush(&q, &lane);
        flushes++;
        assert_true(flushes < 100000);
        if (rc == M0_AGAIN)
            again++;
        if (pushed < N)     /* pushed while older records still wait */
            push_numbered(&q, pushed++);
        struct m0_lane_rec got;
        for (int i = 0; i < 3 && m0_lane_poll(&lane, &got) == M0_OK; i++) {   /* a slow reader */
            assert_int_equal(got.slot, next);
            assert_int_equal(got.gen, next * 7u);
            next++;
        }
    }
    assert_true(again > 0);                                         /* the lane did fill */
    assert_int_equal(m0_lane_q_flush(&q, &lane), M0_OK);            /* nothing left */
    struct m0_lane_rec got;
    assert_int_equal(m0_lane_poll(&lane, &got), M0_AGAIN);
    /* Emptied, the queue starts over at the front of its array. */
    m0_lane_q_push(&q, &(struct m0_lane_rec){.slot = 1});
    assert_int_equal(q.head, 0);
    assert_int_equal(q.n, 1);
    m0_lane_q_free(&q);
    assert_null(q.recs);
    m0_lane_close(&lane);
}

struct reader {
    struct m0_lane *lane;
    uint32_t took[4096];
    size_t n;
    int in_order;
};

static void *read_until_stop(void *arg)
{
    struct reader *r = arg;
    r->in_order = 1;
    for (;;) {
        struct m0_lane_rec rec;
        int rc = m0_lane_take(r->lane, &rec);
        if (rc == M0_AGAIN)
            continue;           /* the lane's receive timeout: the test's bound */
        if (rc != M0_OK || rec.kind == M0_RUN_STOP)
            return NULL;
        if (r->n > 0 && rec.slot <= r->took[r->n - 1])
            r->in_order = 0;
        if (r->n < M0_ARRAY_LEN(r->took))
            r->took[r->n++] = rec.slot;
    }
}

/* Four threads block on one lane: each record reaches exactly one of them
 * (none twice, none lost), each thread sees its records in FIFO order, and
 * one STOP record stops one thread. */
static void test_several_readers_each_record_reaches_one(void **state)
{
    (void)state;
    enum { READERS = 4, N = 2000 };
    struct m0_lane lane;
    open_lane(&lane);
    assert_int_equal(m0_lane_set_timeout(&lane, 100), M0_OK);
    static struct reader r[READERS];
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++) {
        r[i] = (struct reader){.lane = &lane};
        assert_int_equal(pthread_create(&t[i], NULL, read_until_stop, &r[i]), 0);
    }
    struct m0_lane_q q = {0};
    for (uint32_t i = 0; i < N; i++)
        m0_lane_q_push(&q, &(struct m0_lane_rec){.slot = i, .gen = 1, .kind = M0_RUN_START});
    for (int i = 0; i < READERS; i++)
        m0_lane_q_push(&q, &(struct m0_lane_rec){.kind = M0_RUN_STOP});
    uint64_t deadline = m0_clock_ms() + 20000;
    while (m0_lane_q_flush(&q, &lane) == M0_AGAIN) {
        assert_true(m0_clock_ms() < deadline);
        struct pollfd p = {.fd = lane.submit_fd, .events = POLLOUT};     /* the readers make room */
        assert_true(poll(&p, 1, 1000) >= 0);
    }
    for (int i = 0; i < READERS; i++)
        pthread_join(t[i], NULL);
    static unsigned char seen[N];
    memset(seen, 0, sizeof seen);
    size_t total = 0;
    for (int i = 0; i < READERS; i++) {
        assert_true(r[i].in_order);
        for (size_t k = 0; k < r[i].n; k++) {
            assert_true(r[i].took[k] < N);
            assert_int_equal(seen[r[i].took[k]], 0);        /* not twice */
            seen[r[i].took[k]] = 1;
        }
        total += r[i].n;
    }
    assert_int_equal(total, N);                             /* none lost */
    m0_lane_q_free(&q);
    m0_lane_close(&lane);
}

/* m0_lane_take gives up after the lane's timeout; 0 waits again. */
static void test_take_times_out(void **state)
{
    (void)state;
    struct m0_lane lane;
    open_lane(&lane);
    assert_int_equal(m0_lane_set_timeout(&lane, 50), M0_OK);
    struct m0_lane_rec got;
    uint64_t began = m0_clock_ms();
    assert_int_equal(m0_lane_take(&lane, &got), M0_AGAIN);
    uint64_t took = m0_clock_ms() - began;
    assert_true(took >= 40 && took < 10000);
    assert_int_equal(m0_lane_set_timeout(&lane, 0), M0_OK);
    assert_int_equal(m0_lane_send(&lane, &(struct m0_lane_rec){.slot = 3, .gen = 4}), M0_OK);
    assert_int_equal(m0_lane_take(&lane, &got), M0_OK);
    assert_int_equal(got.slot, 3);
    assert_int_equal(got.gen, 4);
    m0_lane_close(&lane);
}

/* Closing twice is harmless, and a closed lane's sends fail. */
static void test_close_twice(void **state)
{
    (void)state;
    struct m0_lane lane;
    open_lane(&lane);
    m0_lane_close(&lane);
    assert_int_equal(lane.submit_fd, -1);
    assert_int_equal(lane.take_fd, -1);
    m0_lane_close(&lane);
    assert_int_equal(m0_lane_send(&lane, &(struct m0_lane_rec){.slot = 1}), M0_ERR);
    assert_int_equal(m0_lane_send_many(&lane, &(struct m0_lane_rec){.slot = 1}, 1), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_keep_slot_and_generation_in_order),
        cmocka_unit_test(test_a_full_lane_says_again),
        cmocka_unit_test(test_the_queue_keeps_order_across_a_full_lane),
        cmocka_unit_test(test_several_readers_each_record_reaches_one),
        cmocka_unit_test(test_take_times_out),
        cmocka_unit_test(test_close_twice),
    };
    return cmocka_run_group_tests_name("lane", tests, NULL, NULL);
}
