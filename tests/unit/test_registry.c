/*
 * test_realtime.c — the SSE framer, the channel-name rules, the bus
 * datagram codec and the registry: subscriptions, resume filter, journal
 * replay and the m0-gap marker.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "m0/buf.h"
#include "m0/bus.h"
#include "m0/order.h"
#include "m0/health.h"
#include "m0/registry.h"
#include "m0/sse.h"

static char *framed(uint64_t id, const char *event, const char *data)
{
    static struct m0_buf b;
    m0_buf_reset(&b);
    m0_sse_frame(&b, id, event, data, strlen(data));
    m0_buf_append(&b, "", 1);
    return b.data;
}

static void test_frame_splits_lines_like_eventsource(void **state)
{
    (void)state;
    assert_string_equal(framed(7, "message", "hello"), "id: 7\nevent: message\ndata: hello\n\n");
    assert_string_equal(framed(0, NULL, "a\nb\r\nc\rd"), "data: a\ndata: b\ndata: c\ndata: d\n\n");
    assert_string_equal(framed(1, NULL, ""), "id: 1\ndata: \n\n");
    assert_string_equal(framed(2, NULL, "trailing\n"), "id: 2\ndata: trailing\ndata: \n\n");
}

static void test_channel_rules(void **state)
{
    (void)state;
    char long_name[M0_CHANNEL_MAX + 2];
    memset(long_name, 'x', sizeof long_name);
    assert_null(m0_sse_channel_error("user_42", 7));
    assert_non_null(m0_sse_channel_error("caf\xc3\xa9", 5));   /* ASCII only */
    assert_null(m0_sse_channel_error(long_name, M0_CHANNEL_MAX));
    assert_non_null(m0_sse_channel_error(long_name, M0_CHANNEL_MAX + 1));
    assert_non_null(m0_sse_channel_error("", 0));
    assert_non_null(m0_sse_channel_error("a\nb", 3));
    assert_non_null(m0_sse_channel_error("a\x7f", 2));
    assert_non_null(m0_sse_channel_error("m0.internal", 11));
    assert_null(m0_sse_channel_error("m0internal", 10));
}

static void test_last_event_id_parsing(void **state)
{
    (void)state;
    assert_int_equal(m0_sse_parse_last_id("12", 2), 12);
    assert_int_equal(m0_sse_parse_last_id("", 0), 0);
    assert_true(m0_sse_parse_last_id("12a", 3) == UINT64_MAX);
    assert_true(m0_sse_parse_last_id("-5", 2) == UINT64_MAX);
    assert_true(m0_sse_parse_last_id("99999999999999999999", 20) == UINT64_MAX);   /* overflow */
}

/* Values past UINT64_MAX saturate. A check of "next < id" after
 * id * 10 + d misses a wrap by less than 2^64: 3 * 10^19 wrapped to
 * 11553255926290448384 and resumed from a made-up id. */
static void test_last_event_id_saturates(void **state)
{
    (void)state;
    assert_true(m0_sse_parse_last_id("18446744073709551615", 20) == UINT64_MAX);   /* the max itself */
    assert_true(m0_sse_parse_last_id("18446744073709551614", 20) == UINT64_MAX - 1);
    assert_true(m0_sse_parse_last_id("18446744073709551616", 20) == UINT64_MAX);
    assert_true(m0_sse_parse_last_id("18446744073709551620", 20) == UINT64_MAX);
    assert_true(m0_sse_parse_last_id("30000000000000000000", 20) == UINT64_MAX);   /* wrapped before */
    assert_true(m0_sse_parse_last_id("25000000000000000000", 20) == UINT64_MAX);   /* wrapped before */
    assert_true(m0_sse_parse_last_id("36893488147419103231", 20) == UINT64_MAX);   /* 2^65 - 1 */
    assert_true(m0_sse_parse_last_id("09999999999999999999", 20) == 9999999999999999999ull);
}

static void test_bus_codec_round_trip_and_rejects(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    m0_bus_encode(&b, 42, "news", 4, "data: x\n\n", 9);
    struct m0_bus_msg m;
    assert_int_equal(m0_bus_decode(b.data, b.len, &m), M0_OK);
    assert_int_equal(m.kind, 'p');
    assert_int_equal(m.id, 42);
    assert_int_equal(m.channel_len, 4);
    assert_memory_equal(m.channel, "news", 4);
    assert_int_equal(m.payload_len, 9);
    assert_memory_equal(m.payload, "data: x\n\n", 9);
    assert_int_equal(m0_bus_decode(b.data, M0_BUS_HDR - 1, &m), M0_ERR);   /* short */
    assert_int_equal(m0_bus_decode(b.data, M0_BUS_HDR + 2, &m), M0_ERR);   /* channel cut */
    b.data[2] = 'h';
    assert_int_equal(m0_bus_decode(b.data, b.len, &m), M0_ERR);            /* unknown kind */
    b.data[2] = 'p';
    b.data[0] = 'X';
    assert_int_equal(m0_bus_decode(b.data, b.len, &m), M0_ERR);            /* bad magic */
    m0_buf_free(&b);
}

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

/* Delivery log for registry tests. */
static char delivered[8][512];

static void collect(void *ctx, uint32_t slot, const char *p, size_t n)
{
    (void)ctx;
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

static void test_health_json(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    struct m0_health h = {.pid = 9, .worker = 1, .connections = 3, .held_streams = 2,
                          .pool_threads = 4, .pool_busy = 1};
    struct m0_channel_stat top[] = {{.name = "a\"b", .len = 3, .subscribers = 2}};
    m0_health_render(&b, &h, top, 1);
    m0_buf_append(&b, "", 1);
    assert_non_null(strstr(b.data, "\"held_streams\": 2"));
    assert_non_null(strstr(b.data, "\"idle\": 3"));
    assert_non_null(strstr(b.data, "{\"channel\": \"a\\\"b\", \"subscribers\": 2}"));
    m0_buf_free(&b);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Issue 7 item 9: a publisher stopped while it holds the bus lock must not
 * stall the others. Every publish returns (the lock is waited for at most
 * 1 ms), ids stay unique and increasing, the events still reach the bus;
 * and once the holder dies its robust lock is taken again. */
static void test_a_stopped_lock_holder_stalls_no_publisher(void **state)
{
    (void)state;
    struct m0_bus bus;
    assert_int_equal(m0_bus_create(&bus, 1), M0_OK);
    m0_bus_current = &bus;
    pid_t holder = fork();
    assert_true(holder >= 0);
    if (holder == 0) {
        pthread_mutex_lock(&bus.shared->lock);
        raise(SIGSTOP);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(holder, &status, WUNTRACED), holder);
    assert_true(WIFSTOPPED(status));
    uint64_t last = 0, id;
    double began = now_s();
    for (int i = 0; i < 50; i++) {
        assert_int_equal(m0_bus_publish("news", 4, NULL, "x", 1, &id), M0_OK);
        assert_true(id > last);
        last = id;
    }
    assert_true(now_s() - began < 5.0);       /* 50 x 1 ms, with room; a blocking lock never returns */
    char buf[512];
    int got = 0;
    while (recv(bus.read_fds[0], buf, sizeof buf, MSG_DONTWAIT) > 0)
        got++;
    assert_int_equal(got, 50);
    kill(holder, SIGKILL);
    assert_int_equal(waitpid(holder, &status, 0), holder);
    assert_int_equal(m0_bus_publish("news", 4, NULL, "y", 1, &id), M0_OK);   /* EOWNERDEAD: taken */
    assert_int_equal(id, last + 1);
    assert_int_equal(pthread_mutex_trylock(&bus.shared->lock), 0);          /* and released after */
    pthread_mutex_unlock(&bus.shared->lock);
    m0_bus_current = NULL;
    close(bus.read_fds[0]);
    close(bus.write_fds[0]);
    free(bus.read_fds);
    free(bus.write_fds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_splits_lines_like_eventsource),
        cmocka_unit_test(test_channel_rules),
        cmocka_unit_test(test_last_event_id_parsing),
        cmocka_unit_test(test_last_event_id_saturates),
        cmocka_unit_test(test_bus_codec_round_trip_and_rejects),
        cmocka_unit_test(test_order_window),
        cmocka_unit_test(test_registry_fans_out_per_channel),
        cmocka_unit_test(test_resume_replays_then_filters_duplicates),
        cmocka_unit_test(test_gap_marker_when_journal_is_short),
        cmocka_unit_test(test_journal_byte_cap),
        cmocka_unit_test(test_fanout_in_slices_keeps_order_and_survives_unsubscribe),
        cmocka_unit_test(test_journal_cap_across_channels),
        cmocka_unit_test(test_health_json),
        cmocka_unit_test(test_a_stopped_lock_holder_stalls_no_publisher),
    };
    return cmocka_run_group_tests_name("realtime", tests, NULL, NULL);
}
