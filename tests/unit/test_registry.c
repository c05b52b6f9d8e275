/*
 * test_registry.c — the subscription registry (src/realtime/registry.c): fan-out per
 * channel, resume filter, journal replay and caps, the m0-gap marker,
 * fan-out in slices.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/registry.h"

/* Delivery log for registry tests. */
static char delivered[8][512];

static void collect(void *ctx, uint32_t slot, uint64_t id, const char *p, size_t n)
{
    (void)ctx;
    (void)id;
    size_t have = strlen(delivered[slot]);
    if (have + n < sizeof delivered[slot]) {
        memcpy(delivered[slot] + have, p, n);
        delivered[slot][have + n] = '\0';
    }
}

static void publish(struct m0_registry *r, const char *ch, uint64_t id)
{
    char frame[64];
    int n = snprintf(frame, sizeof frame, "id: %llu\ndata: e%llu\n\n", (unsigned long long)id,
                     (unsigned long long)id);
    m0_registry_publish(r, ch, strlen(ch), id, frame, (size_t)n, collect, NULL);
}

static void test_registry_fans_out_per_channel(void **state)
{
    (void)state;
    memset(delivered, 0, sizeof delivered);
    struct m0_registry *r = m0_registry_new(8, 100, 1 << 20, 0);
    m0_registry_subscribe(r, 1, "a", 1, 0, 0, collect, NULL);
    m0_registry_subscribe(r, 2, "a", 1, 0, 0, collect, NULL);
    m0_registry_subscribe(r, 3, "b", 1, 0, 0, collect, NULL);
    publish(r, "a", 1);
    assert_string_equal(delivered[1], "id: 1\ndata: e1\n\n");
    assert_string_equal(delivered[2], "id: 1\ndata: e1\n\n");
    assert_string_equal(delivered[3], "");
    assert_int_equal(m0_registry_subscribers(r), 3);
    struct m0_channel_stat top[4];
    assert_int_equal(m0_registry_top(r, top, 4), 2);
    assert_int_equal(top[0].subscribers, 2);
    assert_memory_equal(top[0].name, "a", 1);
    m0_registry_unsubscribe(r, 1);
    publish(r, "a", 2);
    assert_string_equal(delivered[1], "id: 1\ndata: e1\n\n");
    assert_string_equal(delivered[2], "id: 1\ndata: e1\n\nid: 2\ndata: e2\n\n");
    assert_false(m0_registry_is_subscribed(r, 1));
    m0_registry_free(r);
}

static void test_resume_replays_then_filters_duplicates(void **state)
{
    (void)state;
    memset(delivered, 0, sizeof delivered);
    struct m0_registry *r = m0_registry_new(8, 100, 1 << 20, 0);
    for (uint64_t id = 1; id <= 5; id++)
        publish(r, "a", id);
    m0_registry_subscribe(r, 4, "a", 1, 2, 0, collect, NULL);
    assert_string_equal(delivered[4], "id: 3\ndata: e3\n\nid: 4\ndata: e4\n\nid: 5\ndata: e5\n\n");
    publish(r, "a", 5);   /* a duplicate id is not sent again */
    publish(r, "a", 6);
    assert_non_null(strstr(delivered[4], "id: 6\n"));
    assert_null(strstr(strstr(delivered[4], "id: 5\n") + 1, "id: 5\n"));
    m0_registry_free(r);
}

static void test_gap_marker_when_journal_is_short(void **state)
{
    (void)state;
    memset(delivered, 0, sizeof delivered);
    struct m0_registry *r = m0_registry_new(8, 2, 1 << 20, 0);
    for (uint64_t id = 1; id <= 5; id++)
        publish(r, "a", id);   /* the journal keeps 4 and 5 only */
    m0_registry_subscribe(r, 5, "a", 1, 1, 0, collect, NULL);
    assert_true(strncmp(delivered[5], "event: m0-gap\n", 14) == 0);
    assert_non_null(strstr(delivered[5], "id: 4\n"));
    assert_null(strstr(delivered[5], "id: 3\n"));
    /* Covered resume: no marker. */
    m0_registry_subscribe(r, 6, "a", 1, 3, 0, collect, NULL);
    assert_string_equal(delivered[6], "id: 4\ndata: e4\n\nid: 5\ndata: e5\n\n");
    /* Events before the registry existed cannot be proven. */
    struct m0_registry *late = m0_registry_new(8, 100, 1 << 20, 10);
    m0_registry_subscribe(late, 7, "a", 1, 5, 0, collect, NULL);
    assert_true(strncmp(delivered[7], "event: m0-gap\n", 14) == 0);
    m0_registry_free(late);
    /* An event a publisher could not deliver here raises the floor. */
    memset(delivered, 0, sizeof delivered);
    m0_registry_raise_floor(r, 5);
    m0_registry_subscribe(r, 1, "a", 1, 4, 0, collect, NULL);
    assert_true(strncmp(delivered[1], "event: m0-gap\n", 14) == 0);
    m0_registry_free(r);
}

static void test_journal_byte_cap(void **state)
{
    (void)state;
    memset(delivered, 0, sizeof delivered);
    struct m0_registry *r = m0_registry_new(8, 100, 40, 0);   /* ~2 frames of 17 bytes */
    for (uint64_t id = 1; id <= 4; id++)
        publish(r, "a", id);
    m0_registry_subscribe(r, 1, "a", 1, 1, 0, collect, NULL);
    assert_true(strncmp(delivered[1], "event: m0-gap\n", 14) == 0);   /* 2 was evicted */
    assert_non_null(strstr(delivered[1], "id: 3\n"));
    m0_registry_subscribe(r, 2, "a", 1, 2, 0, collect, NULL);             /* 3 and 4 kept: covered */
    assert_string_equal(delivered[2], "id: 3\ndata: e3\n\nid: 4\ndata: e4\n\n");
    m0_registry_free(r);
}

static void test_fanout_in_slices_keeps_order_and_survives_unsubscribe(void **state)
{
    (void)state;
    memset(delivered, 0, sizeof delivered);
    struct m0_registry *r = m0_registry_new(8, 100, 1 << 20, 0);
    m0_registry_set_budget(r, 2);
    for (uint32_t s = 1; s <= 5; s++)
        m0_registry_subscribe(r, s, "a", 1, 0, 0, collect, NULL);
    publish(r, "a", 1);                 /* queued: the next slice delivers */
    assert_string_equal(delivered[5], "");
    m0_registry_fanout(r, collect, NULL);   /* list order is 5,4,3,2,1: two visited */
    assert_true(m0_registry_fanout_pending(r));
    assert_string_equal(delivered[5], "id: 1\ndata: e1\n\n");
    assert_string_equal(delivered[4], "id: 1\ndata: e1\n\n");
    assert_string_equal(delivered[3], "");
    publish(r, "a", 2);                 /* waits behind event 1 */
    assert_string_equal(delivered[5], "id: 1\ndata: e1\n\n");
    m0_registry_unsubscribe(r, 3);      /* the slot the cursor points at */
    m0_registry_subscribe(r, 6, "a", 1, 0, 0, collect, NULL);   /* joins after both publishes */
    while (m0_registry_fanout_pending(r))
        m0_registry_fanout(r, collect, NULL);
    assert_string_equal(delivered[3], "");
    assert_string_equal(delivered[2], "id: 1\ndata: e1\n\nid: 2\ndata: e2\n\n");
    assert_string_equal(delivered[1], "id: 1\ndata: e1\n\nid: 2\ndata: e2\n\n");
    assert_string_equal(delivered[5], "id: 1\ndata: e1\n\nid: 2\ndata: e2\n\n");
    assert_string_equal(delivered[6], "");                  /* both were published before it joined */
    m0_registry_free(r);
}

static void test_journal_cap_across_channels(void **state)
{
    (void)state;
    memset(delivered, 0, sizeof delivered);
    struct m0_registry *r = m0_registry_new(8, 100, 1 << 20, 0);
    m0_registry_set_journal_cap(r, 40);     /* two 17-byte frames in all */
    publish(r, "old", 1);
    publish(r, "old", 2);
    publish(r, "new", 3);
    publish(r, "new", 4);                   /* over the cap: "old" loses first */
    m0_registry_subscribe(r, 1, "old", 3, 1, 0, collect, NULL);
    assert_true(strncmp(delivered[1], "event: m0-gap\n", 14) == 0);
    m0_registry_subscribe(r, 2, "new", 3, 2, 0, collect, NULL);
    assert_string_equal(delivered[2], "id: 3\ndata: e3\n\nid: 4\ndata: e4\n\n");
    m0_registry_free(r);
}

/* A slot on a list of channels: each event once, in id order, live and on
 * a resume (journals merged); the notice reaches it once; unsubscribing
 * unlinks every node (their ids are reused). Issue 18. */
static void test_several_channels_per_slot(void **state)
{
    (void)state;
    memset(delivered, 0, sizeof delivered);
    struct m0_registry *r = m0_registry_new(8, 100, 1 << 20, 0);
    m0_registry_subscribe(r, 1, "a\nb\na\nc", 7, 0, 0, collect, NULL);
    m0_registry_subscribe(r, 2, "b", 1, 0, 0, collect, NULL);
    assert_int_equal(m0_registry_subscribers(r), 2);
    publish(r, "a", 1);
    publish(r, "b", 2);
    publish(r, "d", 3);
    publish(r, "c", 4);
    assert_string_equal(delivered[1], "id: 1\ndata: e1\n\nid: 2\ndata: e2\n\nid: 4\ndata: e4\n\n");
    assert_string_equal(delivered[2], "id: 2\ndata: e2\n\n");
    memset(delivered, 0, sizeof delivered);
    assert_int_equal(m0_registry_notice_all(r, "N", 1, collect, NULL), 2);
    assert_string_equal(delivered[1], "N");
    /* A resume after 1 on c, b: the journals of both, merged in id order. */
    memset(delivered, 0, sizeof delivered);
    m0_registry_subscribe(r, 3, "c\nb", 3, 1, 0, collect, NULL);
    assert_string_equal(delivered[3], "id: 2\ndata: e2\n\nid: 4\ndata: e4\n\n");
    assert_true(m0_registry_resumable(r, "a\nc", 3, 0));
    m0_registry_unsubscribe(r, 1);
    m0_registry_unsubscribe(r, 3);
    memset(delivered, 0, sizeof delivered);
    publish(r, "a", 5);
    publish(r, "b", 6);
    assert_string_equal(delivered[1], "");
    assert_string_equal(delivered[3], "");
    assert_string_equal(delivered[2], "id: 6\ndata: e6\n\n");
    m0_registry_subscribe(r, 4, "a\nc", 3, 0, 0, collect, NULL);
    publish(r, "c", 7);
    assert_string_equal(delivered[4], "id: 7\ndata: e7\n\n");
    assert_int_equal(m0_registry_subscribers(r), 2);
    m0_registry_free(r);
}

/* A view's history (issue 32): after since, the newest with tail, the
 * completeness rule of m0-gap, a predicate that skips. */
struct hist {
    uint64_t ids[16];
    size_t n;
};

static int take(void *ctx, uint64_t id, const char *frame, size_t n)
{
    if (memmem(frame, n, "skip", 4) != NULL)
        return 0;
    struct hist *h = ctx;
    if (h != NULL && h->n < 16)
        h->ids[h->n++] = id;
    return 1;
}

static void test_history_from_the_journal(void **state)
{
    (void)state;
    struct m0_registry *r = m0_registry_new(8, 3, 1 << 20, 0);
    int complete;
    uint64_t last;
    struct hist h = {{0}, 0};
    assert_int_equal(m0_registry_history(r, "a", 1, 0, 0, 10, take, &h, &complete, &last), 0);
    assert_true(complete);                   /* nothing ever: nothing missing */
    assert_int_equal(last, 0);
    for (uint64_t id = 1; id <= 4; id++)
        publish(r, "a", id);
    publish(r, "b", 5);
    assert_int_equal(m0_registry_history(r, "a", 1, 2, 0, 10, take, &h, &complete, &last), 2);
    assert_int_equal(h.ids[0], 3);
    assert_int_equal(h.ids[1], 4);
    assert_true(complete);
    assert_int_equal(last, 4);
    h.n = 0;                                 /* older than the journal (3 kept: 2..4) */
    assert_int_equal(m0_registry_history(r, "a", 1, 0, 0, 10, take, &h, &complete, &last), 3);
    assert_false(complete);
    h.n = 0;
    assert_int_equal(m0_registry_history(r, "a", 1, 2, 0, 1, take, &h, &complete, &last), 1);
    assert_int_equal(h.ids[0], 3);           /* oldest first, the limit's worth */
    assert_true(complete);
    h.n = 0;
    assert_int_equal(m0_registry_history(r, "a", 1, 0, 1, 2, take, &h, &complete, &last), 2);
    assert_int_equal(h.ids[0], 3);           /* tail: the newest two */
    assert_int_equal(h.ids[1], 4);
    assert_true(complete);                   /* nothing missing among or after them */
    h.n = 0;
    assert_int_equal(m0_registry_history(r, "a", 1, 0, 1, 5, take, &h, &complete, &last), 3);
    assert_true(complete);                   /* id 1, dropped, was before them: no hole */
    /* A non-event (the predicate says no) is neither given nor counted. */
    char frame[] = "id: 6\ndata: skip\n\n";
    m0_registry_publish(r, "a", 1, 6, frame, sizeof frame - 1, collect, NULL);
    h.n = 0;
    assert_int_equal(m0_registry_history(r, "a", 1, 0, 1, 2, take, &h, &complete, &last), 2);
    assert_int_equal(h.ids[1], 4);
    assert_int_equal(last, 6);
    /* Events up to 5 may be lost (a full bus): a hole among the newest. */
    m0_registry_raise_floor(r, 5);
    h.n = 0;
    assert_int_equal(m0_registry_history(r, "a", 1, 0, 1, 2, take, &h, &complete, &last), 2);
    assert_false(complete);
    assert_int_equal(m0_registry_history(r, "a", 1, 4, 0, 2, take, NULL, &complete, &last), 0);
    assert_false(complete);
    /* The floor (events before this worker) makes an old since incomplete. */
    m0_registry_raise_floor(r, 10);
    assert_int_equal(m0_registry_history(r, "c", 1, 9, 0, 5, take, NULL, &complete, &last), 0);
    assert_false(complete);
    assert_int_equal(m0_registry_history(r, "c", 1, 10, 0, 5, take, NULL, &complete, &last), 0);
    assert_true(complete);
    m0_registry_free(r);
}

/* A held socket's channels changed while it is open (woh.h's c:subscribe):
 * a kept channel is not interrupted, even by an event whose fan-out is
 * half done; a new one starts now (its journal is not replayed); one left
 * is left; a slot with none is subscribed from start. */
static void test_set_channels_keeps_kept_channels_and_starts_new_ones_now(void **state)
{
    (void)state;
    memset(delivered, 0, sizeof delivered);
    struct m0_registry *r = m0_registry_new(8, 100, 1 << 20, 0);
    m0_registry_set_budget(r, 1);
    m0_registry_subscribe(r, 1, "a", 1, 0, 0, collect, NULL);
    m0_registry_subscribe(r, 2, "a", 1, 0, 0, collect, NULL);
    m0_registry_subscribe(r, 3, "b", 1, 0, 0, collect, NULL);
    publish(r, "b", 1);                              /* journaled on b before slot 1 takes it */
    m0_registry_fanout(r, collect, NULL);
    publish(r, "a", 2);
    m0_registry_fanout(r, collect, NULL);            /* list order 2,1: slot 2 has it, slot 1 not yet */
    assert_string_equal(delivered[2], "id: 2\ndata: e2\n\n");
    assert_string_equal(delivered[1], "");
    m0_registry_set_channels(r, 1, "a\nb", 3, 99, collect, NULL);
    assert_string_equal(delivered[1], "id: 2\ndata: e2\n\n");      /* a's event, from the journal */
    while (m0_registry_fanout_pending(r))
        m0_registry_fanout(r, collect, NULL);
    assert_string_equal(delivered[1], "id: 2\ndata: e2\n\n");      /* once: the fan-out finds it has it */
    publish(r, "b", 3);
    while (m0_registry_fanout_pending(r))
        m0_registry_fanout(r, collect, NULL);
    assert_string_equal(delivered[1], "id: 2\ndata: e2\n\nid: 3\ndata: e3\n\n");   /* b's 1 was before */
    m0_registry_set_channels(r, 1, "b", 1, 99, collect, NULL);
    publish(r, "a", 4);
    publish(r, "b", 5);
    while (m0_registry_fanout_pending(r))
        m0_registry_fanout(r, collect, NULL);
    assert_string_equal(delivered[1], "id: 2\ndata: e2\n\nid: 3\ndata: e3\n\nid: 5\ndata: e5\n\n");
    m0_registry_set_channels(r, 1, "", 0, 99, collect, NULL);
    assert_false(m0_registry_is_subscribed(r, 1));
    /* None: subscribed from start, what the journal has after it replayed. */
    m0_registry_set_channels(r, 4, "b", 1, 3, collect, NULL);
    assert_string_equal(delivered[4], "id: 5\ndata: e5\n\n");
    assert_int_equal(m0_registry_subscribers(r), 3);
    m0_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_fans_out_per_channel),
        cmocka_unit_test(test_several_channels_per_slot),
        cmocka_unit_test(test_resume_replays_then_filters_duplicates),
        cmocka_unit_test(test_gap_marker_when_journal_is_short),
        cmocka_unit_test(test_journal_byte_cap),
        cmocka_unit_test(test_fanout_in_slices_keeps_order_and_survives_unsubscribe),
        cmocka_unit_test(test_journal_cap_across_channels),
        cmocka_unit_test(test_history_from_the_journal),
        cmocka_unit_test(test_set_channels_keeps_kept_channels_and_starts_new_ones_now),
    };
    return cmocka_run_group_tests_name("registry", tests, NULL, NULL);
}
