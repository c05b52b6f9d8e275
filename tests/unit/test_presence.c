/*
 * test_presence.c — the shared occupancy table (src/realtime/presence.c,
 * presence_announce.c) and the --presence-events match: counts and lists
 * over blocks, leaves that remove, a block handed over or reaped, a full
 * block, a sub too long to list, the announcements, and readers that never
 * see a torn count while a writer churns.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "m0/presence.h"
#include "m0/presence_announce.h"
#include "../../src/realtime/presence_int.h"     /* a writer stopped mid-entry */

static const struct m0_presence_span ALL = {0, 0};

static void join(struct m0_presence *p, uint32_t blk, int32_t pid, const char *ch, const char *sub,
                 struct m0_presence_delta *d)
{
    m0_presence_join(p, blk, pid, ch, strlen(ch), sub, sub ? strlen(sub) : 0, d);
}

/* A listing as "name=count," in the order given. */
struct listed {
    char text[512];
    size_t n;
};

static void on_sub(void *ctx, const char *sub, size_t slen, uint64_t count)
{
    struct listed *l = ctx;
    size_t at = strlen(l->text);
    snprintf(l->text + at, sizeof l->text - at, "%.*s=%llu,", (int)slen, sub, (unsigned long long)count);
    l->n++;
}

static int listed_has(const struct listed *l, const char *item)
{
    return strstr(l->text, item) != NULL;
}

static void test_counts_and_lists_over_blocks(void **state)
{
    (void)state;
    struct m0_presence *p = m0_presence_create(2, 1024);
    assert_non_null(p);
    assert_int_equal(strlen(m0_presence_host(p)), 16);
    assert_int_equal(m0_presence_claim(p, 0, 100), M0_OK);
    assert_int_equal(m0_presence_claim(p, 1, 101), M0_OK);
    assert_int_equal(m0_presence_claim(p, 2, 101), M0_ERR);      /* out of range */
    struct m0_presence_delta a1, a2, b1, n1, l1, x;
    join(p, 0, 100, "room", "alice", &a1);
    assert_true(a1.counted && a1.sub_first);
    join(p, 1, 101, "room", "alice", &a2);
    assert_true(a2.sub_first);               /* the first in its block: the agent looks again */
    join(p, 1, 101, "room", "bob", &b1);
    join(p, 0, 100, "room", NULL, &n1);      /* no sub: counted, not listed */
    join(p, 0, 100, "lobby", "alice", &l1);
    join(p, 0, 999, "room", "mallory", &x);  /* not the block's owner: nothing */
    assert_false(x.counted);
    assert_int_equal(m0_presence_count(p, "room", 4, ALL), 4);
    assert_int_equal(m0_presence_count(p, "room", 4, (struct m0_presence_span){1, 1}), 2);
    assert_int_equal(m0_presence_count(p, "lobby", 5, ALL), 1);
    assert_int_equal(m0_presence_count(p, "nobody", 6, ALL), 0);
    assert_int_equal(m0_presence_sub_count(p, "room", 4, "alice", 5, ALL), 2);
    /* The newest event id each block noted, no loop asked. */
    assert_int_equal(m0_presence_last_id(p, "room", 4, ALL), 0);
    m0_presence_event(p, 0, 100, "room", 4, 7);
    m0_presence_event(p, 1, 101, "room", 4, 9);
    m0_presence_event(p, 0, 100, "room", 4, 5);          /* older: kept the newest */
    m0_presence_event(p, 0, 100, "elsewhere", 9, 11);    /* nobody holds it here: nothing */
    m0_presence_event(p, 0, 999, "room", 4, 99);         /* not the owner */
    assert_int_equal(m0_presence_last_id(p, "room", 4, ALL), 9);
    assert_int_equal(m0_presence_last_id(p, "room", 4, (struct m0_presence_span){0, 1}), 7);
    assert_int_equal(m0_presence_last_id(p, "elsewhere", 9, ALL), 0);
    struct listed l = {{0}, 0};
    assert_int_equal(m0_presence_list(p, "room", 4, 100, ALL, on_sub, &l), 2);
    assert_true(listed_has(&l, "alice=2,") && listed_has(&l, "bob=1,"));
    struct listed one = {{0}, 0};
    assert_int_equal(m0_presence_list(p, "room", 4, 1, ALL, on_sub, &one), 1);     /* the caller's limit */

    /* Leaves take back exactly what joins counted; an entry at 0 goes. */
    struct m0_presence_delta d;
    m0_presence_leave(p, 0, 100, a1.chan, a1.sub, &d);
    assert_true(d.counted && d.sub_first);
    assert_int_equal(m0_presence_sub_count(p, "room", 4, "alice", 5, ALL), 1);
    m0_presence_leave(p, 1, 101, a2.chan, a2.sub, &d);
    m0_presence_leave(p, 1, 101, b1.chan, b1.sub, &d);
    m0_presence_leave(p, 0, 100, n1.chan, n1.sub, &d);
    assert_int_equal(m0_presence_count(p, "room", 4, ALL), 0);
    struct listed none = {{0}, 0};
    assert_int_equal(m0_presence_list(p, "room", 4, 100, ALL, on_sub, &none), 0);
    uint32_t entries;
    uint64_t full;
    m0_presence_block_stats(p, 1, &entries, &full);
    assert_int_equal(entries, 0);
    m0_presence_block_stats(p, 0, &entries, &full);
    assert_int_equal(entries, 2);            /* lobby and its alice */
    m0_presence_destroy(p);
}

static void test_a_block_handed_over_or_reaped_stops_counting(void **state)
{
    (void)state;
    struct m0_presence *p = m0_presence_create(2, 1024);
    m0_presence_claim(p, 0, 100);
    m0_presence_claim(p, 1, 200);
    struct m0_presence_delta d, e;
    join(p, 0, 100, "room", "alice", &d);
    join(p, 1, 200, "room", "bob", &e);
    uint64_t reaps = m0_presence_reap_count(p);
    /* A replacement claims block 0: the predecessor's holds are gone, and
     * its late leave writes nothing into the new owner's block. */
    m0_presence_claim(p, 0, 101);
    assert_int_equal(m0_presence_reap_count(p), reaps + 1);
    assert_int_equal(m0_presence_count(p, "room", 4, ALL), 1);
    struct m0_presence_delta late;
    m0_presence_leave(p, 0, 100, d.chan, d.sub, &late);
    assert_false(late.counted);
    join(p, 0, 101, "room", "cleo", &d);
    assert_int_equal(m0_presence_count(p, "room", 4, ALL), 2);
    /* The master reaps pid 200: its block is emptied and nobody's. */
    assert_int_equal(m0_presence_reaped(p, 200), 1);
    assert_int_equal(m0_presence_reap_count(p), reaps + 2);
    assert_int_equal(m0_presence_count(p, "room", 4, ALL), 1);
    assert_int_equal(m0_presence_sub_count(p, "room", 4, "bob", 3, ALL), 0);
    assert_int_equal(m0_presence_reaped(p, 200), 0);
    m0_presence_destroy(p);
}

static void test_a_full_block_and_a_long_sub(void **state)
{
    (void)state;
    struct m0_presence *p = m0_presence_create(1, 64);       /* 64 cells: about a dozen entries */
    m0_presence_claim(p, 0, 1);
    char ch[32];
    struct m0_presence_delta d[64];
    size_t took = 0;
    for (int i = 0; i < 64; i++) {
        snprintf(ch, sizeof ch, "c%d", i);
        join(p, 0, 1, ch, NULL, &d[i]);
        took += d[i].counted;
    }
    assert_true(took > 8 && took < 64);
    uint32_t entries;
    uint64_t full;
    m0_presence_block_stats(p, 0, &entries, &full);
    assert_int_equal(entries, took);
    assert_int_equal(full, 64 - took);
    for (int i = 0; i < 64; i++) {
        struct m0_presence_delta x;
        if (d[i].counted)
            m0_presence_leave(p, 0, 1, d[i].chan, d[i].sub, &x);
    }
    m0_presence_block_stats(p, 0, &entries, &full);
    assert_int_equal(entries, 0);
    /* The runs freed are taken again. */
    struct m0_presence_delta again;
    join(p, 0, 1, "c1", NULL, &again);
    assert_true(again.counted);
    /* A sub longer than a list takes: the connection counts, unlisted. */
    char longsub[M0_PRESENCE_SUB_MAX + 2];
    memset(longsub, 'x', sizeof longsub - 1);
    longsub[sizeof longsub - 1] = '\0';
    struct m0_presence_delta ls;
    join(p, 0, 1, "c1", longsub, &ls);
    assert_true(ls.counted);
    assert_int_equal(ls.sub, M0_PRESENCE_NONE);
    assert_int_equal(m0_presence_count(p, "c1", 2, ALL), 2);
    m0_presence_destroy(p);
}

static void ann_collect(void *ctx, uint32_t e, const char *channel, size_t clen, const char *sub, size_t slen)
{
    struct listed *l = ctx;
    (void)e;
    size_t at = strlen(l->text);
    snprintf(l->text + at, sizeof l->text - at, "%.*s/%.*s,", (int)clen, channel, (int)slen, sub);
    l->n++;
}

static void ann_drop(void *ctx, uint32_t e, const char *channel, size_t clen, const char *sub, size_t slen)
{
    ann_collect(ctx, e, channel, clen, sub, slen);
    m0_presence_unannounce(m0_presence_current, e);
}

static void test_announcements(void **state)
{
    (void)state;
    struct m0_presence *p = m0_presence_create(1, 1024);
    m0_presence_current = p;
    m0_presence_announce_lock(p);
    assert_int_equal(m0_presence_announced(p, "room", 4, "alice", 5), M0_PRESENCE_NONE);
    uint32_t a = m0_presence_announce(p, "room", 4, "alice", 5);
    uint32_t b = m0_presence_announce(p, "room", 4, "bob", 3);
    uint32_t c = m0_presence_announce(p, "chat", 4, "alice", 5);
    assert_int_not_equal(a, M0_PRESENCE_NONE);
    assert_int_equal(m0_presence_announce(p, "room", 4, "alice", 5), a);        /* once */
    assert_int_equal(m0_presence_announced(p, "room", 4, "alice", 5), a);
    assert_int_equal(m0_presence_due(p, b), 0);
    m0_presence_set_due(p, b, 1000);
    m0_presence_set_due(p, c, 3000);
    struct listed due = {{0}, 0};
    m0_presence_announced_each(p, 1, 2000, ann_collect, &due);
    assert_string_equal(due.text, "room/bob,");
    struct listed all = {{0}, 0};
    m0_presence_announced_each(p, 0, 0, ann_collect, &all);
    assert_int_equal(all.n, 3);
    m0_presence_set_due(p, c, 0);            /* back in time: not pending */
    struct listed gone = {{0}, 0};
    m0_presence_announced_each(p, 1, 0, ann_drop, &gone);      /* the callback removes */
    assert_string_equal(gone.text, "room/bob,");
    assert_int_equal(m0_presence_announced(p, "room", 4, "bob", 3), M0_PRESENCE_NONE);
    assert_int_equal(m0_presence_announced(p, "room", 4, "alice", 5), a);
    m0_presence_unannounce(p, a);
    m0_presence_unannounce(p, c);
    struct listed left = {{0}, 0};
    m0_presence_announced_each(p, 0, 0, ann_collect, &left);
    assert_int_equal(left.n, 0);
    m0_presence_announce_unlock(p);
    m0_presence_current = NULL;
    m0_presence_destroy(p);
}

/* A sub announced on the channel and held nowhere (its leave pending) is
 * listed with 0 connections: the list is what the join/leave events say. */
static void test_a_list_holds_the_announced(void **state)
{
    (void)state;
    struct m0_presence *p = m0_presence_create(1, 1024);
    assert_int_equal(m0_presence_claim(p, 0, 100), M0_OK);
    struct m0_presence_delta d;
    join(p, 0, 100, "room", "bob", &d);
    m0_presence_announce_lock(p);
    uint32_t a = m0_presence_announce(p, "room", 4, "alice", 5);
    m0_presence_announce(p, "room", 4, "bob", 3);
    m0_presence_announce(p, "chat", 4, "carol", 5);
    m0_presence_set_due(p, a, 1000);
    m0_presence_announce_unlock(p);
    struct listed l = {{0}, 0};
    assert_int_equal(m0_presence_list(p, "room", 4, 100, ALL, on_sub, &l), 2);
    assert_true(listed_has(&l, "alice=0,") && listed_has(&l, "bob=1,"));
    struct listed one = {{0}, 0};
    assert_int_equal(m0_presence_list(p, "room", 4, 1, ALL, on_sub, &one), 1);     /* the held one first */
    assert_string_equal(one.text, "bob=1,");
    struct listed mine = {{0}, 0};           /* a span: its blocks' holds only */
    assert_int_equal(m0_presence_list(p, "room", 4, 100, (struct m0_presence_span){0, 1}, on_sub, &mine), 1);
    m0_presence_announce_lock(p);
    m0_presence_unannounce(p, a);            /* the leave is published */
    m0_presence_announce_unlock(p);
    struct listed after = {{0}, 0};
    assert_int_equal(m0_presence_list(p, "room", 4, 100, ALL, on_sub, &after), 1);
    assert_string_equal(after.text, "bob=1,");
    m0_presence_destroy(p);
}

static void test_events_match(void **state)
{
    (void)state;
    assert_true(m0_presence_events_match("room", "room", 4));
    assert_true(m0_presence_events_match("room", "room.42", 7));
    assert_false(m0_presence_events_match("room", "roo", 3));
    assert_true(m0_presence_events_match("chat., room", "room", 4));
    assert_true(m0_presence_events_match("chat.,room", "chat.x", 6));
    assert_false(m0_presence_events_match("chat.,room", "lobby", 5));
    assert_true(m0_presence_events_match("*", "anything", 8));
    assert_false(m0_presence_events_match("", "room", 4));
    assert_false(m0_presence_events_match(NULL, "room", 4));
    assert_false(m0_presence_events_match(",,", "room", 4));
}

/* ------------------------------------------------------ concurrent readers */

struct churn {
    struct m0_presence *p;
    volatile int stop;
    uint64_t rounds;
    int bad;
};

static void *writer(void *arg)
{
    struct churn *c = arg;
    struct m0_presence_delta held[40];
    char sub[16];
    while (!c->stop) {
        for (int i = 0; i < 40; i++) {
            snprintf(sub, sizeof sub, "w%d", i);
            join(c->p, 0, 1, (i & 1) ? "busy" : "room", sub, &held[i]);
        }
        for (int i = 39; i >= 0; i--) {
            struct m0_presence_delta d;
            m0_presence_leave(c->p, 0, 1, held[i].chan, held[i].sub, &d);
        }
        c->rounds++;
    }
    return NULL;
}

static void stable_sub(void *ctx, const char *sub, size_t slen, uint64_t count)
{
    struct churn *c = ctx;
    if (slen == 2 && sub[0] == 's' && count != 1)
        c->bad = 1;                          /* a stable sub miscounted */
}

static void *reader(void *arg)
{
    struct churn *c = arg;
    while (!c->stop) {
        /* "room" holds 5 stable subs (s0..s4) plus 0..20 churning ones. */
        uint64_t n = m0_presence_count(c->p, "room", 4, ALL);
        if (n < 5 || n > 25)
            c->bad = 1;
        if (m0_presence_sub_count(c->p, "room", 4, "s3", 2, ALL) != 1)
            c->bad = 1;
        m0_presence_list(c->p, "room", 4, 50, ALL, stable_sub, c);
    }
    return NULL;
}

static void test_readers_never_see_a_torn_count(void **state)
{
    (void)state;
    struct churn c = {.p = m0_presence_create(1, 4096)};
    m0_presence_claim(c.p, 0, 1);
    struct m0_presence_delta d;
    char sub[16];
    for (int i = 0; i < 5; i++) {
        snprintf(sub, sizeof sub, "s%d", i);
        join(c.p, 0, 1, "room", sub, &d);
    }
    pthread_t w, r[2];
    pthread_create(&w, NULL, writer, &c);
    for (int i = 0; i < 2; i++)
        pthread_create(&r[i], NULL, reader, &c);
    struct timespec t = {0, 300 * 1000 * 1000};
    nanosleep(&t, NULL);
    c.stop = 1;
    pthread_join(w, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(r[i], NULL);
    assert_true(c.rounds > 10);
    assert_false(c.bad);
    assert_int_equal(m0_presence_count(c.p, "room", 4, ALL), 5);
    m0_presence_destroy(c.p);
}

struct stuck {
    struct m0_presence *p;
    uint64_t count;
    struct listed l;
};

static void *read_room(void *arg)
{
    struct stuck *s = arg;
    s->count = m0_presence_count(s->p, "room", 4, ALL);
    m0_presence_list(s->p, "room", 4, 10, ALL, on_sub, &s->l);
    return NULL;
}

/* A loop preempted in the middle of an entry (its block's lock held, the
 * entry's counter odd) for longer than a reader's retries last: the reader
 * waits for it rather than count the block as empty. */
static void test_a_reader_waits_for_a_writer_stopped_mid_entry(void **state)
{
    (void)state;
    struct m0_presence *p = m0_presence_create(1, 1024);
    m0_presence_claim(p, 0, 1);
    struct m0_presence_delta d;
    join(p, 0, 1, "room", "alice", &d);
    join(p, 0, 1, "room", "alice", &d);
    join(p, 0, 1, "room", "bob", &d);
    struct block *b = block_at(p, 0);
    struct entry *e = entry_at(p, b, d.chan);
    pthread_mutex_lock(&b->wlock);
    __atomic_add_fetch(&e->seq, 1, __ATOMIC_RELEASE);          /* odd: mid-write */
    struct stuck s = {.p = p, .count = 99};
    pthread_t t;
    pthread_create(&t, NULL, read_room, &s);
    /* Give the reader time to exhaust its retries (it answers at once when
     * it gives up); then the writer finishes. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 300 * 1000 * 1000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    int answered_early = pthread_timedjoin_np(t, NULL, &until) == 0;
    __atomic_add_fetch(&e->seq, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&b->wlock);
    if (!answered_early)
        pthread_join(t, NULL);
    assert_int_equal(s.count, 3);
    assert_true(listed_has(&s.l, "alice=2,") && listed_has(&s.l, "bob=1,"));
    m0_presence_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_and_lists_over_blocks),
        cmocka_unit_test(test_a_block_handed_over_or_reaped_stops_counting),
        cmocka_unit_test(test_a_full_block_and_a_long_sub),
        cmocka_unit_test(test_announcements),
        cmocka_unit_test(test_a_list_holds_the_announced),
        cmocka_unit_test(test_events_match),
        cmocka_unit_test(test_readers_never_see_a_torn_count),
        cmocka_unit_test(test_a_reader_waits_for_a_writer_stopped_mid_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
