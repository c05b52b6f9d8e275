/*
 * test_order.c — the reorder window (src/realtime/order.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/order.h"

/* The reorder window: in-order events pass at once, an early one waits for
 * the hole before it, a hole is given up after the window (or at once when
 * too much is held), and late or duplicate ids drop. */
static void test_order_window(void **state)
{
    (void)state;
    struct m0_order o;
    struct m0_order_item it;
    m0_order_init(&o, 10);
    assert_int_equal(m0_order_offer(&o, 10, "a", 1, 100), M0_ORDER_NOW);
    assert_int_equal(m0_order_offer(&o, 12, "c", 1, 100), M0_ORDER_HELD);
    assert_int_equal(m0_order_pop(&o, &it), 0);                 /* 11 is missing */
    assert_int_equal(m0_order_offer(&o, 12, "c", 1, 101), M0_ORDER_LATE);   /* duplicate */
    assert_int_equal(m0_order_expire(&o, 150, 100), 0);         /* still inside the window */
    assert_int_equal(m0_order_deadline(&o, 100), 200);
    assert_int_equal(m0_order_offer(&o, 11, "b", 1, 160), M0_ORDER_NOW);
    assert_int_equal(m0_order_pop(&o, &it), 1);
    assert_int_equal(it.id, 12);
    free(it.data);
    assert_int_equal(m0_order_deadline(&o, 100), 0);
    assert_int_equal(m0_order_offer(&o, 15, "f", 1, 200), M0_ORDER_HELD);   /* 13, 14 missing */
    assert_int_equal(m0_order_expire(&o, 299, 100), 0);
    assert_int_equal(m0_order_expire(&o, 300, 100), 14);        /* given up after the window */
    assert_int_equal(m0_order_pop(&o, &it), 1);
    assert_int_equal(it.id, 15);
    free(it.data);
    assert_int_equal(m0_order_offer(&o, 13, "d", 1, 301), M0_ORDER_LATE);   /* too late */
    for (uint64_t id = 17; id < 17 + M0_ORDER_MAX_HELD + 1; id++)   /* 16 missing, too many held */
        assert_int_equal(m0_order_offer(&o, id, "x", 1, 400), M0_ORDER_HELD);
    assert_int_equal(m0_order_expire(&o, 401, 100), 16);        /* over the bound: at once */
    assert_int_equal(m0_order_pop(&o, &it), 1);
    assert_int_equal(it.id, 17);
    free(it.data);
    m0_order_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_window),
    };
    return cmocka_run_group_tests_name("order", tests, NULL, NULL);
}
