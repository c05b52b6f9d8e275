/*
 * test_loop.c — the event loop's before-sleep hooks (src/loop.c): any
 * number may be added (one per ASGI mount, the pool, the bus, the broker),
 * each runs once per pass in registration order, and hooks added by a hook
 * (the table grows under the walk) run in that same pass, after it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/loop.h"
#include "m0/types.h"

#define NHOOKS 40

struct run {
    int order[4 * NHOOKS];
    int n;
    int passes;
};

struct hook_ctx {
    struct run *run;
    int id;
};

static void record(struct m0_loop *l, void *ctx)
{
    struct hook_ctx *h = ctx;
    h->run->order[h->run->n++] = h->id;
    m0_loop_wake_at(l, m0_loop_now(l));   /* never sleep: the test runs passes */
}

/* The last hook counts passes and stops the loop after the second. */
static void stopper(struct m0_loop *l, void *ctx)
{
    struct run *r = ctx;
    if (++r->passes == 2)
        m0_loop_stop(l);
    m0_loop_wake_at(l, m0_loop_now(l));
}

static void test_more_hooks_than_the_old_table(void **state)
{
    (void)state;
    struct m0_loop *l = m0_loop_new();
    assert_non_null(l);
    struct run r = {0};
    struct hook_ctx ctx[NHOOKS];
    for (int i = 0; i < NHOOKS; i++) {
        ctx[i] = (struct hook_ctx){.run = &r, .id = i};
        m0_loop_add_hook(l, record, &ctx[i]);       /* the 9th used to abort */
    }
    m0_loop_add_hook(l, stopper, &r);
    assert_int_equal(m0_loop_run(l), M0_OK);
    assert_int_equal(r.passes, 2);
    assert_int_equal(r.n, 2 * NHOOKS);
    for (int i = 0; i < 2 * NHOOKS; i++)
        assert_int_equal(r.order[i], i % NHOOKS);   /* every pass, in registration order */
    m0_loop_free(l);
}

/* A hook that adds hooks while the table is walked (it grows under it). */
struct adder {
    struct run *run;
    struct hook_ctx added[NHOOKS];
    int done;
};

static void add_many(struct m0_loop *l, void *ctx)
{
    struct adder *a = ctx;
    if (!a->done) {
        a->done = 1;
        for (int i = 0; i < NHOOKS; i++) {
            a->added[i] = (struct hook_ctx){.run = a->run, .id = 100 + i};
            m0_loop_add_hook(l, record, &a->added[i]);
        }
    }
    m0_loop_wake_at(l, m0_loop_now(l));
}

static void test_hooks_added_by_a_hook(void **state)
{
    (void)state;
    struct m0_loop *l = m0_loop_new();
    struct run r = {0};
    struct adder a = {.run = &r};
    m0_loop_add_hook(l, add_many, &a);
    m0_loop_add_hook(l, stopper, &r);
    assert_int_equal(m0_loop_run(l), M0_OK);
    /* Pass 1: appended after the stopper, the added hooks run once; pass 2
     * stops at the stopper, before them. */
    assert_int_equal(r.passes, 2);
    assert_int_equal(r.n, NHOOKS);
    for (int i = 0; i < r.n; i++)
        assert_int_equal(r.order[i], 100 + i % NHOOKS);
    m0_loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_more_hooks_than_the_old_table),
        cmocka_unit_test(test_hooks_added_by_a_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
