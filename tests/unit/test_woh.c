/*
 * test_woh.c — WebSocket-over-HTTP's codec (src/proto/woh.c): events as
 * gripcontrol's encode_websocket_events writes them and Pushpin reads them,
 * the malformed bodies refused whole, the control messages with Pushpin's
 * rules, the grip extension's message-prefix.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "m0/woh.h"

static void test_events_round_trip(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    m0_woh_put(&b, M0_WOH_OPEN, NULL, 0);
    m0_woh_put(&b, M0_WOH_TEXT, "hello world", 11);
    m0_woh_put(&b, M0_WOH_BINARY, "\0\r\n", 3);
    m0_woh_put(&b, M0_WOH_PING, "", 0);
    m0_woh_put(&b, M0_WOH_CLOSE, "\x03\xe8", 2);
    m0_woh_put(&b, M0_WOH_DISCONNECT, NULL, 0);
    /* gripcontrol's encoding, byte for byte (the size in lower-case hex). */
    static const char want[] = "OPEN\r\nTEXT b\r\nhello world\r\nBINARY 3\r\n\0\r\n\r\nPING 0\r\n\r\n"
                               "CLOSE 2\r\n\x03\xe8\r\nDISCONNECT\r\n";
    assert_int_equal(b.len, sizeof want - 1);
    assert_memory_equal(b.data, want, b.len);
    size_t off = 0;
    struct m0_woh_event ev;
    static const enum m0_woh_type types[] = {M0_WOH_OPEN, M0_WOH_TEXT, M0_WOH_BINARY, M0_WOH_PING, M0_WOH_CLOSE,
                                             M0_WOH_DISCONNECT};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(m0_woh_next(b.data, b.len, &off, &ev), 1);
        assert_int_equal(ev.type, types[i]);
    }
    assert_int_equal(m0_woh_next(b.data, b.len, &off, &ev), 0);
    off = 0;
    m0_woh_next(b.data, b.len, &off, &ev);
    m0_woh_next(b.data, b.len, &off, &ev);
    assert_true(ev.has_content);
    assert_int_equal(ev.len, 11);
    assert_memory_equal(ev.content, "hello world", 11);
    m0_buf_free(&b);
}

static void test_sizes_are_hex_and_an_unknown_event_is_other(void **state)
{
    (void)state;
    char body[300] = "TEXT 100\r\n";
    memset(body + 10, 'x', 256);
    memcpy(body + 266, "\r\nFOO\r\nTEXT A\r\n0123456789\r\n", 27);
    size_t n = 266 + 27, off = 0;
    struct m0_woh_event ev;
    assert_int_equal(m0_woh_next(body, n, &off, &ev), 1);
    assert_int_equal(ev.len, 256);
    assert_int_equal(m0_woh_next(body, n, &off, &ev), 1);
    assert_int_equal(ev.type, M0_WOH_OTHER);
    assert_int_equal(m0_woh_next(body, n, &off, &ev), 1);
    assert_int_equal(ev.len, 10);
    assert_int_equal(m0_woh_next(body, n, &off, &ev), 0);
}

static void test_malformed_bodies_are_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "OPEN",                    /* no CRLF */
        "TEXT 5\r\nhell",          /* cut short */
        "TEXT 5\r\nhelloXX",       /* no CRLF after the content */
        "TEXT zz\r\nhi\r\n",       /* not hex */
        "TEXT \r\n\r\n",           /* no size */
        "text 2\r\nhi\r\n",        /* lower case */
        "\r\n",                    /* no name */
        "TEXT 123456789\r\n",      /* more than 8 digits */
        "TEXT 10000000000000003\r\nabc\r\n", /* 17 digits: 3 once wrapped in 64 bits */
        "TEXT ffffffff\r\nx\r\n",  /* past the end */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t off = 0;
        struct m0_woh_event ev;
        assert_int_equal(m0_woh_next(bad[i], strlen(bad[i]), &off, &ev), M0_ERR);
    }
}

static void test_control_messages(void **state)
{
    (void)state;
    struct m0_woh_ctl c = {0};
    const char *why;
    static const char sub[] = "{\"channel\": \"room\", \"type\": \"subscribe\"}";
    assert_int_equal(m0_woh_control(sub, sizeof sub - 1, &c, &why), M0_OK);
    assert_int_equal(c.type, M0_WOH_CTL_SUBSCRIBE);
    assert_int_equal(c.channel.len, 4);
    assert_memory_equal(c.channel.data, "room", 4);
    static const char det[] = "{\"type\": \"detach\"}";
    assert_int_equal(m0_woh_control(det, sizeof det - 1, &c, &why), M0_OK);
    assert_int_equal(c.type, M0_WOH_CTL_DETACH);
    static const char ka[] = "{\"type\": \"keep-alive\", \"content\": \"ka\", \"timeout\": 3, \"mode\": \"interval\"}";
    assert_int_equal(m0_woh_control(ka, sizeof ka - 1, &c, &why), M0_OK);
    assert_true(c.has_content && c.interval);
    assert_int_equal(c.opcode, 1);
    assert_int_equal(c.timeout_s, 3);
    static const char kab[] = "{\"type\": \"keep-alive\", \"content-bin\": \"AP8=\"}";
    assert_int_equal(m0_woh_control(kab, sizeof kab - 1, &c, &why), M0_OK);
    assert_int_equal(c.opcode, 2);
    assert_int_equal(c.timeout_s, M0_WOH_KEEPALIVE_DEFAULT);
    assert_int_equal(c.content.len, 2);
    assert_memory_equal(c.content.data, "\0\xff", 2);
    static const char kap[] = "{\"type\": \"keep-alive\", \"content\": \"p\", \"message-type\": \"ping\"}";
    assert_int_equal(m0_woh_control(kap, sizeof kap - 1, &c, &why), M0_OK);
    assert_int_equal(c.opcode, 9);
    static const char off[] = "{\"type\": \"keep-alive\"}";
    assert_int_equal(m0_woh_control(off, sizeof off - 1, &c, &why), M0_OK);
    assert_false(c.has_content);
    static const char meta[] = "{\"type\": \"set-meta\", \"name\": \"n\", \"value\": \"v\"}";
    assert_int_equal(m0_woh_control(meta, sizeof meta - 1, &c, &why), M0_OK);
    assert_int_equal(c.type, M0_WOH_CTL_SET_META);
    static const char *const bad[] = {
        "not json", "[]", "{}", "{\"type\": 1}", "{\"type\": \"nope\"}", "{\"type\": \"subscribe\"}",
        "{\"type\": \"subscribe\", \"channel\": \"\"}", "{\"type\": \"unsubscribe\", \"channel\": 3}",
        "{\"type\": \"keep-alive\", \"content\": 1}", "{\"type\": \"keep-alive\", \"content-bin\": \"!!\"}",
        "{\"type\": \"keep-alive\", \"timeout\": -1}", "{\"type\": \"keep-alive\", \"message-type\": \"close\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why = NULL;
        assert_int_equal(m0_woh_control(bad[i], strlen(bad[i]), &c, &why), M0_ERR);
        assert_non_null(why);
    }
    m0_woh_ctl_free(&c);
}

static void test_the_grip_extension_and_its_prefix(void **state)
{
    (void)state;
    char p[M0_WOH_PREFIX_MAX];
    size_t n = 99;
    assert_int_equal(m0_woh_grip_extension("grip", 4, p, &n), 1);
    assert_int_equal(n, 2);
    assert_memory_equal(p, "m:", 2);
    static const char q[] = "permessage-deflate; client_max_window_bits, grip; message-prefix=\"\"";
    assert_int_equal(m0_woh_grip_extension(q, sizeof q - 1, p, &n), 1);
    assert_int_equal(n, 0);
    static const char t[] = "Grip ; message-prefix=msg>";
    assert_int_equal(m0_woh_grip_extension(t, sizeof t - 1, p, &n), 1);
    assert_int_equal(n, 4);
    assert_memory_equal(p, "msg>", 4);
    static const char e[] = "grip; message-prefix=\"a\\\"b\"";
    assert_int_equal(m0_woh_grip_extension(e, sizeof e - 1, p, &n), 1);
    assert_int_equal(n, 3);
    assert_memory_equal(p, "a\"b", 3);
    assert_int_equal(m0_woh_grip_extension("permessage-deflate", 18, p, &n), 0);
    assert_int_equal(m0_woh_grip_extension("gripper", 7, p, &n), 0);
    static const char longp[] = "grip; message-prefix=0123456789012345678901234567890123456789";
    assert_int_equal(m0_woh_grip_extension(longp, sizeof longp - 1, p, &n), M0_ERR);
    static const char open[] = "grip; message-prefix=\"abc";
    assert_int_equal(m0_woh_grip_extension(open, sizeof open - 1, p, &n), M0_ERR);
}

static void test_the_content_type(void **state)
{
    (void)state;
    assert_true(m0_woh_is_content_type("application/websocket-events", 28));
    assert_true(m0_woh_is_content_type("Application/WebSocket-Events; charset=x", 39));
    assert_false(m0_woh_is_content_type("application/websocket-eventsx", 29));
    assert_false(m0_woh_is_content_type("text/plain", 10));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_round_trip),
        cmocka_unit_test(test_sizes_are_hex_and_an_unknown_event_is_other),
        cmocka_unit_test(test_malformed_bodies_are_refused),
        cmocka_unit_test(test_control_messages),
        cmocka_unit_test(test_the_grip_extension_and_its_prefix),
        cmocka_unit_test(test_the_content_type),
    };
    return cmocka_run_group_tests_name("woh", tests, NULL, NULL);
}
