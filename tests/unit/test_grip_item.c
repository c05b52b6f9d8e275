/*
 * test_grip_item.c — a GRIP item across the bus (src/proto/grip_item.c):
 * EPCP items from gripcontrol's bodies encoded and decoded whole, frames
 * cut short refused, the Grip-Sig token's claims, the control port's
 * Bearer check; and a head's Grip-* fields read by m0_head_add and
 * m0_head_grip_finish (src/proto/body.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/body.h"
#include "m0/epcp.h"
#include "m0/grip.h"
#include "m0/grip_item.h"
#include "m0/jwt.h"

static const unsigned char KEY[] = "test-grip-key-0123456789abcdef-0123456789";
#define KEYLEN (sizeof KEY - 1)

static int view_is(struct m0_grip_view v, const char *want, size_t n)
{
    return v.n == n && memcmp(v.p, want, n) == 0;
}

/* gripcontrol's bodies (captured): through the encoder and back. */
static void test_round_trip(void **state)
{
    (void)state;
    static const char body[] =
        "{\"items\": [{\"id\": \"1\", \"prev-id\": \"0\", \"http-stream\": {\"content-filters\": [\"build-id\"],"
        " \"content\": \"event: message\\nid: %I\\ndata: {}\\n\\n\"}, \"channel\": \"events-test\","
        " \"meta\": {\"skip_users\": \"u1\"}},"
        " {\"http-stream\": {\"content-bin\": \"/wBiaW4=\"}, \"channel\": \"st\"},"
        " {\"http-stream\": {\"action\": \"close\"}, \"channel\": \"st\"},"
        " {\"id\": \"8\", \"prev-id\": \"7\", \"http-response\": {\"code\": 201, \"reason\": \"Made\","
        " \"headers\": {\"Content-Type\": \"text/plain\", \"X-A\": \"1\"}, \"body\": \"made\\n\"}, \"channel\": \"lp\"},"
        " {\"ws-message\": {\"content\": \"w\"}, \"channel\": \"ws\"}]}";
    struct m0_epcp_publish pub;
    assert_int_equal(m0_epcp_parse(&pub, body, sizeof body - 1), 200);
    assert_int_equal(pub.nitems, 5);
    struct m0_buf f = {0};
    struct m0_grip_item it;

    assert_int_equal(m0_grip_item_encode(&f, &pub.items[0]), M0_OK);
    assert_true(m0_grip_is_item(f.data, f.len));
    assert_int_equal(m0_grip_item_decode(f.data, f.len, &it), M0_OK);
    assert_int_equal(it.flags, M0_GRIP_IT_STREAM | M0_GRIP_IT_ID | M0_GRIP_IT_PREV_ID | M0_GRIP_IT_FILTERS);
    assert_int_equal(it.filters, M0_GRIP_F_BUILD_ID);
    assert_true(view_is(it.id, "1", 1) && view_is(it.prev_id, "0", 1));
    assert_true(view_is(it.content, "event: message\nid: %I\ndata: {}\n\n", 32));
    assert_int_equal(it.nmeta, 1);
    assert_true(view_is(it.mkey[0], "skip_users", 10) && view_is(it.mvalue[0], "u1", 2));
    assert_true(view_is(it.channel, "events-test", 11));
    /* Every shorter prefix of the frame is refused, never read past. */
    for (size_t n = 0; n < f.len; n++)
        assert_int_equal(m0_grip_item_decode(f.data, n, &it), M0_ERR);

    assert_int_equal(m0_grip_item_encode(&f, &pub.items[1]), M0_OK);
    assert_int_equal(m0_grip_item_decode(f.data, f.len, &it), M0_OK);
    assert_int_equal(it.flags, M0_GRIP_IT_STREAM);
    assert_true(view_is(it.content, "\xff\0bin", 5));

    assert_int_equal(m0_grip_item_encode(&f, &pub.items[2]), M0_OK);
    assert_int_equal(m0_grip_item_decode(f.data, f.len, &it), M0_OK);
    assert_int_equal(it.flags, M0_GRIP_IT_STREAM_CLOSE);

    assert_int_equal(m0_grip_item_encode(&f, &pub.items[3]), M0_OK);
    assert_int_equal(m0_grip_item_decode(f.data, f.len, &it), M0_OK);
    assert_int_equal(it.flags, M0_GRIP_IT_RESPONSE | M0_GRIP_IT_ID | M0_GRIP_IT_PREV_ID);
    assert_int_equal(it.code, 201);
    assert_true(view_is(it.reason, "Made", 4) && view_is(it.body, "made\n", 5));
    assert_int_equal(it.nheaders, 2);

    /* ws-message alone: for WebSocket holds only (no GRIP hold's flag). */
    assert_int_equal(m0_grip_item_encode(&f, &pub.items[4]), M0_OK);
    assert_int_equal(m0_grip_item_decode(f.data, f.len, &it), M0_OK);
    assert_int_equal(it.flags, M0_GRIP_IT_WS);
    assert_int_equal(it.ws_opcode, M0_EPCP_WS_TEXT);
    assert_true(view_is(it.ws_content, "w", 1) && view_is(it.channel, "ws", 2));
    for (size_t n = 0; n < f.len; n++)
        assert_int_equal(m0_grip_item_decode(f.data, n, &it), M0_ERR);
    /* An http-stream item carries no ws-message. */
    assert_int_equal(m0_grip_item_encode(&f, &pub.items[1]), M0_OK);
    assert_int_equal(m0_grip_item_decode(f.data, f.len, &it), M0_OK);
    assert_int_equal(it.ws_opcode, 0);
    assert_int_equal(it.ws_content.n, 0);
    /* An SSE frame is not an item. */
    assert_false(m0_grip_is_item("id: 1\ndata: x\n\n", 15));
    assert_int_equal(m0_grip_item_decode("id: 1\n", 6, &it), M0_ERR);
    m0_buf_free(&f);
    m0_epcp_free(&pub);
}

/* One item with http-stream and ws-message: both formats in its frame,
 * each for its own kind of hold; content-bin is a binary message; a
 * ws-message close, hint or refresh alone is not carried; a text message
 * that is not UTF-8 is refused (RFC 6455 §5.6). */
static void test_ws_message_formats(void **state)
{
    (void)state;
    static const char body[] =
        "{\"items\": [{\"channel\": \"mix\", \"id\": \"3\", \"formats\": {\"http-stream\": {\"content\": \"s\"},"
        " \"ws-message\": {\"content\": \"wm\"}}},"
        " {\"channel\": \"b\", \"ws-message\": {\"content-bin\": \"/wBi\"}},"
        " {\"channel\": \"c\", \"ws-message\": {\"action\": \"close\", \"code\": 1000}},"
        " {\"channel\": \"p\", \"ws-message\": {\"type\": \"ping\", \"content\": \"pp\"}}]}";
    struct m0_epcp_publish pub;
    assert_int_equal(m0_epcp_parse(&pub, body, sizeof body - 1), 200);
    assert_int_equal(pub.nitems, 4);
    struct m0_buf f = {0};
    struct m0_grip_item it;
    assert_int_equal(m0_grip_item_encode(&f, &pub.items[0]), M0_OK);
    assert_int_equal(m0_grip_item_decode(f.data, f.len, &it), M0_OK);
    assert_int_equal(it.flags, M0_GRIP_IT_STREAM | M0_GRIP_IT_WS | M0_GRIP_IT_ID);
    assert_true(view_is(it.content, "s", 1) && view_is(it.ws_content, "wm", 2));
    assert_int_equal(it.ws_opcode, M0_EPCP_WS_TEXT);
    assert_int_equal(m0_grip_item_encode(&f, &pub.items[1]), M0_OK);
    assert_int_equal(m0_grip_item_decode(f.data, f.len, &it), M0_OK);
    assert_int_equal(it.ws_opcode, M0_EPCP_WS_BINARY);
    assert_true(view_is(it.ws_content, "\xff\0b", 3));
    assert_int_equal(m0_grip_item_encode(&f, &pub.items[2]), M0_ERR);
    assert_int_equal(m0_grip_item_encode(&f, &pub.items[3]), M0_OK);
    assert_int_equal(m0_grip_item_decode(f.data, f.len, &it), M0_OK);
    assert_int_equal(it.ws_opcode, M0_EPCP_WS_PING);
    /* A frame whose opcode is not a message's is refused. */
    assert_int_equal(m0_grip_item_encode(&f, &pub.items[1]), M0_OK);
    f.data[f.len - 2 - 1 /* "b" */ - 4 - 3 - 1] = 8;     /* the opcode byte: close */
    assert_int_equal(m0_grip_item_decode(f.data, f.len, &it), M0_ERR);
    m0_buf_free(&f);
    m0_epcp_free(&pub);
    static const char bad[] = "{\"items\": [{\"channel\": \"t\", \"ws-message\": {\"type\": \"text\", \"content-bin\": \"/w==\"}}]}";
    assert_int_equal(m0_epcp_parse(&pub, bad, sizeof bad - 1), 400);
    assert_non_null(strstr(pub.err, "not UTF-8"));
    m0_epcp_free(&pub);
}

/* The layout is little-endian on any host: with --broker a frame written
 * on one host is read on another. */
static void test_frame_bytes_are_little_endian(void **state)
{
    (void)state;
    static const char body[] = "{\"items\": [{\"id\": \"ab\", \"http-stream\": {\"content\": \"xyz\"}, \"channel\": \"c\"}]}";
    struct m0_epcp_publish pub;
    assert_int_equal(m0_epcp_parse(&pub, body, sizeof body - 1), 200);
    struct m0_buf f = {0};
    assert_int_equal(m0_grip_item_encode(&f, &pub.items[0]), M0_OK);
    /* magic, flags, u32 filters, u16 id length + "ab", u16 prev-id length, u32 content length + "xyz" */
    static const unsigned char head[] = {0, 'G', M0_GRIP_IT_STREAM | M0_GRIP_IT_ID, 0, 0, 0, 0, 2, 0, 'a', 'b',
                                         0, 0, 3, 0, 0, 0, 'x', 'y', 'z'};
    assert_true(f.len > sizeof head);
    assert_memory_equal(f.data, head, sizeof head);
    m0_buf_free(&f);
    m0_epcp_free(&pub);
}

/* An http-response item answers a held request with a final status: a
 * frame whose code is 1xx (epcp.c refuses one; another host's frame may
 * still carry it) or past 599 does not decode, so no hold sends it. */
static void test_a_response_item_needs_a_final_status(void **state)
{
    (void)state;
    static const char body[] = "{\"items\": [{\"http-response\": {\"code\": 204, \"body\": \"forged\"}, \"channel\": \"lp\"}]}";
    struct m0_epcp_publish pub;
    assert_int_equal(m0_epcp_parse(&pub, body, sizeof body - 1), 200);
    struct m0_buf f = {0};
    struct m0_grip_item it;
    static const int codes[] = {100, 101, 103, 199, 600, 999};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        pub.items[0].response.code = codes[i];
        assert_int_equal(m0_grip_item_encode(&f, &pub.items[0]), M0_OK);
        assert_int_equal(m0_grip_item_decode(f.data, f.len, &it), M0_ERR);
    }
    pub.items[0].response.code = 204;
    assert_int_equal(m0_grip_item_encode(&f, &pub.items[0]), M0_OK);
    assert_int_equal(m0_grip_item_decode(f.data, f.len, &it), M0_OK);
    assert_int_equal(it.code, 204);
    m0_buf_free(&f);
    m0_epcp_free(&pub);
}

static void test_grip_sig_and_bearer(void **state)
{
    (void)state;
    char tok[M0_GRIP_SIG_MAX];
    ssize_t n = m0_grip_sig(tok, sizeof tok, KEY, KEYLEN, 1700000000);
    assert_true(n > 0);
    struct m0_jwt_key k = {.secret = KEY, .len = KEYLEN};
    struct m0_jwt_keys ks = {.v = &k, .n = 1};
    struct m0_jwt t = {0};
    assert_int_equal(m0_jwt_verify(tok, (size_t)n, &ks, 1700000000, 0, &t), M0_JWT_OK);
    assert_int_equal(t.exp, 1700000000 + 3600);
    assert_string_equal(m0_jwt_claim_str(&t, "iss", NULL), "pushpin");
    m0_jwt_clear(&t);

    char auth[400];
    snprintf(auth, sizeof auth, "Bearer %s", tok);
    assert_true(m0_grip_bearer_ok(auth, strlen(auth), KEY, KEYLEN, 1700000000));
    assert_false(m0_grip_bearer_ok(auth, strlen(auth), KEY, KEYLEN, 1700000000 + 3600 + 60));   /* expired */
    assert_false(m0_grip_bearer_ok(auth, strlen(auth), (const unsigned char *)"other", 5, 1700000000));
    snprintf(auth, sizeof auth, "bearer %s", (const char *)KEY);
    assert_true(m0_grip_bearer_ok(auth, strlen(auth), KEY, KEYLEN, 1700000000));                /* the key itself */
    assert_false(m0_grip_bearer_ok(auth, strlen(auth) - 1, KEY, KEYLEN, 1700000000));
    assert_false(m0_grip_bearer_ok("Basic abc", 9, KEY, KEYLEN, 1700000000));
    assert_false(m0_grip_bearer_ok("Bearer ", 7, KEY, KEYLEN, 1700000000));

    /* The cache: the same token within half its lifetime, a new one after. */
    size_t a_len, b_len;
    char a[M0_GRIP_SIG_MAX];
    const char *p = m0_grip_sig_cached(KEY, KEYLEN, 1700000000, &a_len);
    assert_non_null(p);
    memcpy(a, p, a_len);
    p = m0_grip_sig_cached(KEY, KEYLEN, 1700000000 + 1799, &b_len);
    assert_true(b_len == a_len && memcmp(p, a, a_len) == 0);
    p = m0_grip_sig_cached(KEY, KEYLEN, 1700000000 + 1800, &b_len);
    assert_false(b_len == a_len && memcmp(p, a, a_len) == 0);
    t = (struct m0_jwt){0};
    assert_int_equal(m0_jwt_verify(p, b_len, &ks, 1700000000 + 1800, 0, &t), M0_JWT_OK);
    assert_int_equal(t.exp, 1700000000 + 1800 + 3600);
    m0_jwt_clear(&t);
}

static void add(struct m0_head *h, const char *n, const char *v)
{
    const char *why;
    assert_int_equal(m0_head_add(h, n, strlen(n), v, strlen(v), &why), M0_OK);
}

/* A head with grip_on: Grip-* never in the lines, the hold and its first
 * channel known, Grip-Status in the status line. */
static void test_head_instructions(void **state)
{
    (void)state;
    struct m0_head h = {0};
    m0_head_reset(&h);
    m0_head_status(&h, 200, NULL, 0);
    h.grip_on = 1;
    add(&h, "Content-Type", "text/event-stream");
    add(&h, "Grip-Hold", "stream");
    add(&h, "Grip-Channel", "events-test; prev-id=0; filter=build-id, user-anonymous; filter=require-sub");
    add(&h, "Grip-Link", "</events/?link=next>; rel=next");
    add(&h, "Grip-Status", "203 Fine");
    add(&h, "grip-unknown", "x");
    int rc = m0_head_grip_finish(&h);
    if (rc != M0_OK)
        print_error("grip_err: %s\n", h.grip_err);
    assert_int_equal(rc, M0_OK);
    assert_int_equal(h.hold, M0_HOLD_STREAM);
    assert_int_equal(h.grip_hold, M0_GRIP_HOLD_STREAM);
    assert_string_equal(m0_head_channel(&h), "events-test\nuser-anonymous");   /* every channel is held */
    assert_int_equal(h.status, 203);
    assert_memory_equal(h.lines.data, "HTTP/1.1 203 Fine\r\nContent-Type: text/event-stream\r\n", h.lines.len);
    m0_head_free(&h);

    /* Without grip_on (no key): Grip-* are the application's fields. */
    m0_head_reset(&h);
    m0_head_status(&h, 200, NULL, 0);
    add(&h, "Grip-Hold", "stream");
    assert_int_equal(m0_head_grip_finish(&h), M0_OK);
    assert_int_equal(h.hold, M0_HOLD_NONE);
    assert_non_null(strstr(h.lines.data, "Grip-Hold: stream"));
    m0_head_free(&h);

    /* A stream hold whose status carries no content (Grip-Status or the
     * view's own): refused, as an instruction that cannot be followed. A
     * long-poll with such a status is held (its answer is the head alone). */
    static const char *const bodiless[] = {"204", "304"};
    for (size_t i = 0; i < 2; i++) {
        m0_head_reset(&h);
        m0_head_status(&h, 200, NULL, 0);
        h.grip_on = 1;
        add(&h, "Grip-Hold", "stream");
        add(&h, "Grip-Channel", "st");
        add(&h, "Grip-Status", bodiless[i]);
        assert_int_equal(m0_head_grip_finish(&h), M0_ERR);
        assert_non_null(strstr(h.grip_err, "204 or 304"));
        assert_int_equal(h.hold, M0_HOLD_NONE);
        m0_head_free(&h);
    }
    m0_head_reset(&h);
    m0_head_status(&h, 204, NULL, 0);
    h.grip_on = 1;
    add(&h, "Grip-Hold", "stream");
    add(&h, "Grip-Channel", "st");
    assert_int_equal(m0_head_grip_finish(&h), M0_ERR);
    m0_head_free(&h);
    m0_head_reset(&h);
    m0_head_status(&h, 200, NULL, 0);
    h.grip_on = 1;
    add(&h, "Grip-Hold", "response");
    add(&h, "Grip-Channel", "lp");
    add(&h, "Grip-Status", "304");
    assert_int_equal(m0_head_grip_finish(&h), M0_OK);
    assert_int_equal(h.grip_hold, M0_GRIP_HOLD_RESPONSE);
    assert_int_equal(h.status, 304);
    m0_head_free(&h);

    /* A refused instruction: grip_err, no hold. */
    m0_head_reset(&h);
    m0_head_status(&h, 200, NULL, 0);
    h.grip_on = 1;
    add(&h, "Grip-Hold", "forever");
    assert_int_equal(m0_head_grip_finish(&h), M0_ERR);
    assert_non_null(h.grip_err);
    assert_int_equal(h.hold, M0_HOLD_NONE);
    m0_head_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_ws_message_formats),
        cmocka_unit_test(test_frame_bytes_are_little_endian),
        cmocka_unit_test(test_a_response_item_needs_a_final_status),
        cmocka_unit_test(test_grip_sig_and_bearer),
        cmocka_unit_test(test_head_instructions),
    };
    return cmocka_run_group_tests_name("grip_item", tests, NULL, NULL);
}
