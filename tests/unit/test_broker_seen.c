/*
 * test_broker_seen.c — a broker reader's check when it comes back to a
 * replica (src/realtime/broker_seen.c): a replica that lags is not a loss,
 * another entry under an id already read is.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/broker_seen.h"

/* The fingerprint of the event published as text. */
static uint64_t sum_of(const char *text)
{
    return m0_seen_mix(M0_SEEN_SUM0, text, strlen(text));
}

static uint64_t sum_at(uint64_t id)
{
    char text[32];
    snprintf(text, sizeof text, "event %llu", (unsigned long long)id);
    return sum_of(text);
}

static struct m0_seen *fresh(void)
{
    struct m0_seen *s = malloc(sizeof *s);
    assert_non_null(s);
    m0_seen_reset(s);
    return s;
}

/* The flaky failover's case: the reader read 101..110 on one replica and
 * comes back on another that has only 104 so far (its counter is below
 * the position). The re-read waits for that replica, finds the same
 * entries, and ends at the position: no loss, whatever the counter said. */
static void test_a_replica_that_lags_is_no_loss(void **state)
{
    (void)state;
    struct m0_seen *s = fresh();
    for (uint64_t id = 101; id <= 110; id++)
        m0_seen_note(s, id, sum_at(id));
    assert_int_equal(m0_seen_begin(s, 110), 100);       /* re-read after 100 */
    uint64_t from = 0;
    assert_true(m0_seen_rereading(s, &from));
    assert_int_equal(from, 100);
    for (uint64_t id = 101; id <= 104; id++)             /* what the lagging replica has */
        assert_int_equal(m0_seen_recheck(s, id, sum_at(id)), M0_SEEN_SAME);
    assert_true(m0_seen_rereading(s, &from));
    assert_int_equal(from, 104);                          /* the next read goes on after 104 */
    for (uint64_t id = 105; id <= 110; id++)             /* it caught up */
        assert_int_equal(m0_seen_recheck(s, id, sum_at(id)), M0_SEEN_SAME);
    assert_false(m0_seen_rereading(s, &from));           /* done at the position */
    /* The reader goes on: a later reconnect checks the newest entries. */
    for (uint64_t id = 111; id <= 112; id++)
        m0_seen_note(s, id, sum_at(id));
    assert_int_equal(m0_seen_begin(s, 112), 100);
    free(s);
}

/* A failover that promoted a replica without 106..110: the log now holds
 * other events under those ids. The first one that differs is the loss;
 * what was remembered is forgotten (it is of a history the log lost). */
static void test_another_event_under_a_read_id_is_a_loss(void **state)
{
    (void)state;
    struct m0_seen *s = fresh();
    for (uint64_t id = 101; id <= 110; id++)
        m0_seen_note(s, id, sum_at(id));
    m0_seen_begin(s, 110);
    for (uint64_t id = 101; id <= 105; id++)
        assert_int_equal(m0_seen_recheck(s, id, sum_at(id)), M0_SEEN_SAME);
    assert_int_equal(m0_seen_recheck(s, 106, sum_of("published after the failover")), M0_SEEN_LOST);
    uint64_t from = 0;
    assert_false(m0_seen_rereading(s, &from));
    assert_int_equal(m0_seen_recheck(s, 107, sum_of("another")), M0_SEEN_SAME);   /* told once */
    assert_int_equal(m0_seen_begin(s, 110), 110);                                  /* nothing to re-read */
    free(s);
}

/* Only the run of remembered ids ending at the position is re-read: at
 * most M0_SEEN_MAX of them, and not across a gap the reader reported. */
static void test_what_is_reread(void **state)
{
    (void)state;
    struct m0_seen *s = fresh();
    uint64_t from = 0;
    assert_int_equal(m0_seen_begin(s, 50), 50);           /* nothing read yet (positioned at boot) */
    assert_false(m0_seen_rereading(s, &from));
    for (uint64_t id = 1000; id < 1000 + 3 * M0_SEEN_MAX; id++)
        m0_seen_note(s, id, sum_at(id));
    uint64_t top = 1000 + 3 * M0_SEEN_MAX - 1;
    assert_int_equal(m0_seen_begin(s, top), top - M0_SEEN_MAX);
    m0_seen_reset(s);
    for (uint64_t id = 101; id <= 105; id++)
        m0_seen_note(s, id, sum_at(id));
    for (uint64_t id = 108; id <= 110; id++)             /* 106, 107: a gap */
        m0_seen_note(s, id, sum_at(id));
    assert_int_equal(m0_seen_begin(s, 110), 107);
    /* An entry past the position ends the re-read; a recheck above it says nothing. */
    assert_int_equal(m0_seen_recheck(s, 111, sum_of("new")), M0_SEEN_SAME);
    assert_true(m0_seen_rereading(s, &from));
    m0_seen_done(s);
    assert_false(m0_seen_rereading(s, &from));
    /* An id never remembered cannot be compared: it is no loss. */
    m0_seen_begin(s, 110);
    assert_int_equal(m0_seen_recheck(s, 90, sum_of("old")), M0_SEEN_SAME);
    assert_true(m0_seen_rereading(s, &from));
    free(s);
}

static void test_fingerprints(void **state)
{
    (void)state;
    assert_int_not_equal(sum_of("a"), sum_of("b"));
    assert_int_equal(m0_seen_mix(m0_seen_mix(M0_SEEN_SUM0, "ab", 2), "c", 1), sum_of("abc"));
    assert_int_equal(m0_seen_mix(M0_SEEN_SUM0, "", 0), M0_SEEN_SUM0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_replica_that_lags_is_no_loss),
        cmocka_unit_test(test_another_event_under_a_read_id_is_a_loss),
        cmocka_unit_test(test_what_is_reread),
        cmocka_unit_test(test_fingerprints),
    };
    return cmocka_run_group_tests_name("broker_seen", tests, NULL, NULL);
}
