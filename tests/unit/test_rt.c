/*
 * test_rt.c — the realtime engine's fan-out passes (src/realtime/rt.c) as its
 * sink sees them: corked passes of at most the budget of subscribers, told
 * when a pass can touch each subscriber only once (one event in flight, so
 * the sink may write each delivery at once instead of queueing it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/bus.h"
#include "m0/cli.h"
#include "m0/config.h"
#include "m0/loop.h"
#include "m0/rt.h"

#define NSUB 5000
#define BUDGET 1024                 /* rt.c's FANOUT_BUDGET */

/* The fake sink: what each pass (cork .. flush) delivered. */
struct fake {
    struct m0_loop *loop;
    struct m0_rt *rt;
    int corking;
    unsigned in_pass;               /* deliveries since cork */
    unsigned max_pass;
    unsigned passes, once_passes;
    unsigned twice;                 /* a subscriber delivered to twice in a once pass */
    uint64_t delivered, expected;
    uint32_t seen_pass[NSUB];       /* pass number of the slot's last delivery */
    uint8_t got[NSUB];
    int once;
};

static void f_deliver(void *ctx, uint32_t slot, const struct m0_rt_event *ev)
{
    struct fake *f = ctx;
    assert_false(ev->replay);
    assert_int_equal(ev->kind, M0_RT_SSE);   /* an event of the bus, typed once by the engine */
    assert_true(ev->id != 0);
    assert_true(f->corking);        /* live deliveries come inside a pass */
    if (f->once && f->seen_pass[slot] == f->passes)
        f->twice++;
    f->seen_pass[slot] = f->passes;
    f->got[slot]++;
    f->in_pass++;
    f->delivered++;
}

static void f_cork(void *ctx, int once)
{
    struct fake *f = ctx;
    f->corking = 1;
    f->once = once;
    f->in_pass = 0;
    f->passes++;
    f->once_passes += once != 0;
}

static unsigned f_corked(const void *ctx)
{
    const struct fake *f = ctx;
    return f->in_pass;              /* written at once or queued: touched */
}

static void f_flush(void *ctx)
{
    struct fake *f = ctx;
    if (f->corking && f->in_pass > f->max_pass)
        f->max_pass = f->in_pass;
    f->corking = 0;
}

static int f_awaiting(void *ctx, uint32_t slot, uint32_t gen)
{
    (void)ctx;
    (void)slot;
    (void)gen;
    return 1;
}

/* After the engine's hook: stop once everything was delivered. */
static void stop_when_done(struct m0_loop *l, void *ctx)
{
    struct fake *f = ctx;
    if (f->delivered >= f->expected)
        m0_loop_stop(l);
}

static struct fake *setup_engine(uint64_t *position)
{
    static struct m0_bus dummy;     /* m0_rt_prepare only asks that a bus exists */
    m0_bus_current = &dummy;
    struct fake *f = calloc(1, sizeof *f);
    assert_non_null(f);
    struct m0_config cfg;
    m0_config_defaults(&cfg);
    f->loop = m0_loop_new();
    assert_non_null(f->loop);
    const struct m0_rt_sink sink = {.ctx = f, .deliver = f_deliver, .cork = f_cork, .corked = f_corked,
                                    .flush = f_flush, .awaiting = f_awaiting};
    f->rt = m0_rt_new(f->loop, &cfg, NSUB, &sink);
    m0_rt_set_position(f->rt, position);
    assert_int_equal(m0_rt_prepare(f->rt), M0_OK);
    m0_loop_add_hook(f->loop, stop_when_done, f);
    for (uint32_t i = 0; i < NSUB; i++)
        assert_int_equal(m0_rt_subscribe(f->rt, i, 1, "c", 1, 0, 0), M0_OK);
    return f;
}

static void teardown_engine(struct fake *f)
{
    m0_rt_free(f->rt);
    m0_loop_free(f->loop);
    free(f);
    m0_bus_current = NULL;
}

static void publish(struct fake *f, uint64_t id)
{
    char frame[64];
    int n = snprintf(frame, sizeof frame, "id: %llu\ndata: e\n\n", (unsigned long long)id);
    m0_rt_event(f->rt, "c", 1, id, frame, (size_t)n);
    f->expected += NSUB;
}

/* One event in flight: every pass is a once pass (the sink may write each
 * delivery at once), of at most the budget, and nobody gets it twice. */
static void test_one_event_in_flight_passes_are_once_and_sliced(void **state)
{
    (void)state;
    uint64_t position = 1;
    struct fake *f = setup_engine(&position);
    publish(f, 1);
    assert_int_equal(m0_loop_run(f->loop), M0_OK);
    assert_int_equal(f->delivered, NSUB);
    assert_true(f->passes >= (NSUB + BUDGET - 1) / BUDGET);
    assert_int_equal(f->once_passes, f->passes);
    assert_true(f->max_pass <= BUDGET);
    assert_int_equal(f->twice, 0);
    for (uint32_t i = 0; i < NSUB; i++)
        assert_int_equal(f->got[i], 1);
    teardown_engine(f);
}

/* A burst (two events in flight): a pass may touch a subscriber twice, so
 * it is not a once pass (the sink queues, one write carries both). */
static void test_a_burst_is_not_a_once_pass(void **state)
{
    (void)state;
    uint64_t position = 2;
    struct fake *f = setup_engine(&position);
    publish(f, 1);
    publish(f, 2);
    assert_int_equal(m0_loop_run(f->loop), M0_OK);
    assert_int_equal(f->delivered, 2 * NSUB);
    for (uint32_t i = 0; i < NSUB; i++)
        assert_int_equal(f->got[i], 2);
    assert_true(f->once_passes < f->passes);      /* the first passes had both in flight */
    assert_true(f->max_pass <= 2 * BUDGET);       /* a slice ends mid-list: one budget of visits */
    teardown_engine(f);
}

/* The typed event (rt.h): what a source replays is typed once by the
 * engine — an SSE event with the id its line gives, a GRIP item by its
 * tag, a notice (m0-gap, no id) — so no sink looks at the bytes. */
static struct m0_rt_event seen[4];
static unsigned nseen;

static void t_deliver(void *ctx, uint32_t slot, const struct m0_rt_event *ev)
{
    (void)ctx;
    (void)slot;
    if (nseen < 4)
        seen[nseen++] = *ev;
}

static void test_events_are_typed_once_by_the_engine(void **state)
{
    (void)state;
    struct m0_config cfg;
    m0_config_defaults(&cfg);
    struct m0_loop *l = m0_loop_new();
    assert_non_null(l);
    const struct m0_rt_sink sink = {.deliver = t_deliver, .cork = f_cork, .corked = f_corked, .flush = f_flush,
                                    .awaiting = f_awaiting};
    struct m0_rt *rt = m0_rt_new(l, &cfg, 4, &sink);
    static const char sse[] = "id: 42\ndata: e\n\n", grip[] = "\0Gitem", gap[] = "event: m0-gap\ndata: {}\n\n";
    nseen = 0;
    m0_rt_replay(rt, 1, sse, sizeof sse - 1);
    m0_rt_replay(rt, 1, grip, sizeof grip - 1);
    m0_rt_replay(rt, 1, gap, sizeof gap - 1);
    assert_int_equal(nseen, 3);
    assert_int_equal(seen[0].kind, M0_RT_SSE);
    assert_int_equal(seen[0].id, 42);
    assert_true(seen[0].replay);
    assert_int_equal(seen[1].kind, M0_RT_GRIP);
    assert_int_equal(seen[1].n, sizeof grip - 1);       /* its bytes as they are (m0_grip_item_decode reads them) */
    assert_int_equal(seen[2].kind, M0_RT_NOTICE);
    assert_int_equal(seen[2].id, 0);
    m0_rt_free(rt);
    m0_loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_event_in_flight_passes_are_once_and_sliced),
        cmocka_unit_test(test_a_burst_is_not_a_once_pass),
        cmocka_unit_test(test_events_are_typed_once_by_the_engine),
    };
    return cmocka_run_group_tests_name("rt", tests, NULL, NULL);
}
