/*
 * test_sse.c — the SSE framer (src/proto/sse.c): line splitting as EventSource
 * reads it, the channel-name rules, Last-Event-ID parsing and saturation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/buf.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_splits_lines_like_eventsource),
        cmocka_unit_test(test_channel_rules),
        cmocka_unit_test(test_last_event_id_parsing),
        cmocka_unit_test(test_last_event_id_saturates),
    };
    return cmocka_run_group_tests_name("sse", tests, NULL, NULL);
}
