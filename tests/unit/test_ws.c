/*
 * test_ws.c — RFC 6455 (src/proto/ws.c): the accept value (§1.3's example),
 * the handshake check (§4.2.1: 400 / 426), the frame encoder at every
 * length boundary (0, 125, 126, 65535, 65536) and the parser on the same
 * frames as a client masks them, fed whole and byte by byte; fragmentation
 * with interleaved control frames, every failure and its close code, UTF-8
 * across fragment boundaries, close frames; the SSE → WebSocket data
 * extraction (sse.c); the handshake snapshot and the POST a message
 * becomes.
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
#include "m0/cli.h"
#include "m0/config.h"
#include "m0/http.h"
#include "m0/sse.h"
#include "m0/ws.h"

static const struct m0_limits lim = {
    .max_target = 8192, .max_header_bytes = 16384, .max_headers = 100,
    .max_body = 1048576, .body_mem = 1024 * 1024,
};

/* ------------------------------------------------------------- helpers */

/* Parse a request head into r (h is left for the caller to free). */
static void parse_req(const char *raw, struct m0_req *r, struct m0_http *h)
{
    m0_req_init(r);
    m0_http_init(h, r, &lim);
    size_t off = 0, n = strlen(raw);
    for (int i = 0; i < 10; i++) {
        size_t used = 0;
        int rc = m0_http_feed(h, raw + off, n - off, &used);
        off += used;
        if (rc == M0_DONE)
            return;
        assert_int_not_equal(rc, M0_ERR);
    }
    fail_msg("request did not complete");
}

static int check(const char *raw, const char **why)
{
    struct m0_req r;
    struct m0_http h;
    struct m0_ws_handshake hs;
    parse_req(raw, &r, &h);
    int rc = m0_ws_handshake_check(&r, &hs, why);
    m0_http_free(&h);
    m0_req_free(&r);
    return rc;
}

static const uint8_t key4[4] = {0x37, 0xfa, 0x21, 0x3d};

/* A client frame: head bytes as given (b0), masked with key4. */
static void client_frame(struct m0_buf *b, uint8_t b0, const void *p, uint64_t n)
{
    uint8_t head[M0_WS_FRAME_HEAD_MAX];
    size_t h = m0_ws_frame_head(head, b0 & 0x0f, n, 0);
    head[0] = b0;
    head[1] |= 0x80;
    m0_buf_append(b, head, h);
    m0_buf_append(b, key4, 4);
    char *dst = m0_buf_reserve(b, (size_t)n);
    for (uint64_t i = 0; i < n; i++)
        dst[i] = (char)(((const uint8_t *)p)[i] ^ key4[i & 3]);
    b->len += (size_t)n;
}

/* Feed all of b (step 0: at once; else step bytes at a time), recording
 * events until an error or close. Returns the number of events. */
struct rec {
    enum m0_ws_event_type type;
    int opcode;
    uint16_t code;
    struct m0_buf data;
};

static int feed(struct m0_ws_parser *p, const struct m0_buf *b, size_t step, struct rec *out, int max)
{
    int n = 0;
    size_t off = 0;
    while (off < b->len && n < max) {
        size_t avail = b->len - off;
        if (step && avail > step)
            avail = step;
        size_t used = 0;
        struct m0_ws_event ev;
        enum m0_ws_event_type t = m0_ws_parse(p, b->data + off, avail, &used, &ev);
        assert_true(used <= avail);
        off += used;
        if (t == M0_WS_EV_NONE) {
            assert_int_equal(used, avail);
            continue;
        }
        memset(&out[n].data, 0, sizeof out[n].data);
        out[n].type = t;
        out[n].opcode = ev.opcode;
        out[n].code = ev.code;
        m0_buf_append(&out[n].data, ev.data ? ev.data : "", ev.len);
        n++;
        if (t == M0_WS_EV_ERROR || t == M0_WS_EV_CLOSE)
            break;
    }
    return n;
}

static void free_recs(struct rec *r, int n)
{
    for (int i = 0; i < n; i++)
        m0_buf_free(&r[i].data);
}

/* One error expected from b, whole and byte by byte. */
static void expect_error(const struct m0_buf *b, uint16_t code, uint64_t max)
{
    for (size_t step = 0; step <= 1; step++) {
        struct m0_ws_parser p;
        struct rec r[8];
        m0_ws_parser_init(&p, max);
        int n = feed(&p, b, step, r, 8);
        assert_true(n >= 1);
        assert_int_equal(r[n - 1].type, M0_WS_EV_ERROR);
        assert_int_equal(r[n - 1].code, code);
        /* After an error, nothing more is reported. */
        size_t used = 0;
        struct m0_ws_event ev;
        assert_int_equal(m0_ws_parse(&p, "\x81\x80", 2, &used, &ev), M0_WS_EV_NONE);
        assert_int_equal(used, 2);
        free_recs(r, n);
        m0_ws_parser_free(&p);
    }
}

/* ------------------------------------------------------------ handshake */

static void test_accept_rfc_example(void **state)
{
    (void)state;
    char out[M0_WS_ACCEPT_LEN + 1];
    m0_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", 24, out);
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

#define HS_HEAD "GET /chat?room=1 HTTP/1.1\r\nHost: server.example.com\r\n"
#define HS_KEY "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"

static void test_handshake_check(void **state)
{
    (void)state;
    const char *why;
    assert_int_equal(check(HS_HEAD "Upgrade: websocket\r\nConnection: Upgrade\r\n" HS_KEY
                           "Sec-WebSocket-Version: 13\r\n\r\n", &why), 0);
    /* Tokens are case-insensitive and Connection is a list. */
    assert_int_equal(check(HS_HEAD "Upgrade: WebSocket\r\nConnection: keep-alive, upgrade\r\n" HS_KEY
                           "Sec-WebSocket-Version: 13\r\n\r\n", &why), 0);
    /* 400: not GET, HTTP/1.0, no Upgrade, no Connection: upgrade, bad keys. */
    assert_int_equal(check("POST /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" HS_KEY
                           "Sec-WebSocket-Version: 13\r\nContent-Length: 0\r\n\r\n", &why), 400);
    assert_int_equal(check("GET /chat HTTP/1.0\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" HS_KEY
                           "Sec-WebSocket-Version: 13\r\n\r\n", &why), 400);
    assert_int_equal(check(HS_HEAD "Connection: Upgrade\r\n" HS_KEY "Sec-WebSocket-Version: 13\r\n\r\n", &why), 400);
    assert_int_equal(check(HS_HEAD "Upgrade: websocket\r\n" HS_KEY "Sec-WebSocket-Version: 13\r\n\r\n", &why), 400);
    assert_int_equal(check(HS_HEAD "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n", &why), 400);
    assert_int_equal(check(HS_HEAD "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Key: c2hvcnQ=\r\nSec-WebSocket-Version: 13\r\n\r\n", &why), 400);
    assert_int_equal(check(HS_HEAD "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZR==\r\nSec-WebSocket-Version: 13\r\n\r\n", &why),
                     400);    /* 'R' carries bits past the 16th byte */
    assert_int_equal(check(HS_HEAD "Upgrade: websocket\r\nConnection: Upgrade\r\n" HS_KEY HS_KEY
                           "Sec-WebSocket-Version: 13\r\n\r\n", &why), 400);
    /* 426: the version is missing or not ours. */
    assert_int_equal(check(HS_HEAD "Upgrade: websocket\r\nConnection: Upgrade\r\n" HS_KEY "\r\n", &why), 426);
    assert_int_equal(check(HS_HEAD "Upgrade: websocket\r\nConnection: Upgrade\r\n" HS_KEY
                           "Sec-WebSocket-Version: 8\r\n\r\n", &why), 426);
    assert_non_null(why);
}

static void test_refusal_and_switching(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    m0_ws_refusal(&b, 426, "this server speaks WebSocket version 13");
    m0_buf_append(&b, "", 1);
    assert_non_null(strstr(b.data, "HTTP/1.1 426 Upgrade Required\r\n"));
    assert_non_null(strstr(b.data, "\r\nSec-WebSocket-Version: 13\r\n"));
    assert_non_null(strstr(b.data, "\r\nConnection: close\r\n"));
    m0_buf_reset(&b);
    m0_ws_refusal(&b, 400, "bad");
    m0_buf_append(&b, "", 1);
    assert_null(strstr(b.data, "Sec-WebSocket-Version"));
    m0_buf_reset(&b);
    m0_ws_switching(&b, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "chat", 4, "Set-Cookie: a=b\r\n", 17, 0, 0);
    m0_buf_append(&b, "", 1);
    static const char want[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                               "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                               "Sec-WebSocket-Protocol: chat\r\nSet-Cookie: a=b\r\n";
    assert_memory_equal(b.data, want, sizeof want - 1);
    assert_non_null(strstr(b.data, "\r\nDate: "));
    assert_true(strcmp(b.data + strlen(b.data) - 4, "\r\n\r\n") == 0);
    m0_buf_free(&b);
}

static void test_protocol_offered(void **state)
{
    (void)state;
    struct m0_req r;
    struct m0_http h;
    parse_req(HS_HEAD "Sec-WebSocket-Protocol: chat, superchat\r\nSec-WebSocket-Protocol: v2.json\r\n\r\n", &r, &h);
    assert_true(m0_ws_protocol_offered(&r, "chat", 4));
    assert_true(m0_ws_protocol_offered(&r, "superchat", 9));
    assert_true(m0_ws_protocol_offered(&r, "v2.json", 7));
    assert_false(m0_ws_protocol_offered(&r, "Chat", 4));
    assert_false(m0_ws_protocol_offered(&r, "cha", 3));
    m0_http_free(&h);
    m0_req_free(&r);
}

/* -------------------------------------------------------------- encoder */

static void test_frame_lengths(void **state)
{
    (void)state;
    static const struct {
        uint64_t len;
        size_t head;
        uint8_t b1;
    } cases[] = {{0, 2, 0}, {125, 2, 125}, {126, 4, 126}, {65535, 4, 126}, {65536, 10, 127}};
    for (size_t c = 0; c < M0_ARRAY_LEN(cases); c++) {
        uint64_t len = cases[c].len;
        uint8_t head[M0_WS_FRAME_HEAD_MAX];
        size_t h = m0_ws_frame_head(head, M0_WS_BINARY, len, 1);
        assert_int_equal(h, cases[c].head);
        assert_int_equal(head[0], 0x82);         /* FIN, binary */
        assert_int_equal(head[1], cases[c].b1);  /* and never the mask bit */
        uint64_t got = head[1];
        if (h == 4)
            got = (uint64_t)head[2] << 8 | head[3];
        if (h == 10) {
            got = 0;
            for (int i = 0; i < 8; i++)
                got = got << 8 | head[2 + i];
        }
        assert_int_equal(got, len);

        /* A whole frame, and the same payload as a client sends it,
         * through the parser whole and byte by byte. */
        char *payload = malloc(len + 1);
        for (uint64_t i = 0; i < len; i++)
            payload[i] = (char)('a' + i % 26);
        struct m0_buf b = {0};
        m0_ws_frame(&b, M0_WS_TEXT, payload, (size_t)len);
        assert_int_equal(b.len, h + len);
        assert_int_equal((uint8_t)b.data[0], 0x81);
        assert_memory_equal(b.data + h, payload, len);
        m0_buf_reset(&b);
        client_frame(&b, 0x81, payload, len);
        for (size_t step = 0; step <= 1; step++) {
            struct m0_ws_parser p;
            struct rec r[2];
            m0_ws_parser_init(&p, 1 << 20);
            assert_int_equal(feed(&p, &b, step, r, 2), 1);
            assert_int_equal(r[0].type, M0_WS_EV_MESSAGE);
            assert_int_equal(r[0].opcode, M0_WS_TEXT);
            assert_int_equal(r[0].data.len, len);
            if (len)
                assert_memory_equal(r[0].data.data, payload, len);
            free_recs(r, 1);
            m0_ws_parser_free(&p);
        }
        m0_buf_free(&b);
        free(payload);
    }
}

static void test_close_frame_encoding(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    m0_ws_close_frame(&b, 1000, "", 0);
    assert_int_equal(b.len, 4);
    assert_memory_equal(b.data, "\x88\x02\x03\xe8", 4);
    m0_buf_reset(&b);
    m0_ws_close_frame(&b, 0, NULL, 0);
    assert_memory_equal(b.data, "\x88\x00", 2);
    /* A long reason is cut to 123 bytes, never inside a character. */
    char reason[200];
    memset(reason, 'x', sizeof reason);
    memcpy(reason + 122, "\xc3\xa9", 2);       /* é straddles byte 123 */
    m0_buf_reset(&b);
    m0_ws_close_frame(&b, 1001, reason, sizeof reason);
    assert_int_equal((uint8_t)b.data[1], 2 + 122);
    assert_true(m0_ws_utf8_valid(b.data + 4, 122));
    m0_buf_free(&b);
}

/* --------------------------------------------------------------- parser */

static void test_fragments_reassembled_with_control_frames_between(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    /* "héllo wörld" in three fragments, the é and ö split across them,
     * a ping and a pong between. */
    const char *text = "h\xc3\xa9llo w\xc3\xb6rld";
    client_frame(&b, 0x01, text, 2);               /* "h\xc3" */
    client_frame(&b, 0x89, "ping!", 5);
    client_frame(&b, 0x00, text + 2, 7);           /* "\xa9llo w\xc3" */
    client_frame(&b, 0x8a, "", 0);
    client_frame(&b, 0x80, text + 9, 4);           /* "\xb6rld" */
    client_frame(&b, 0x82, "\x00\xff", 2);
    for (size_t step = 0; step <= 3; step++) {
        struct m0_ws_parser p;
        struct rec r[8];
        m0_ws_parser_init(&p, 1 << 20);
        int n = feed(&p, &b, step, r, 8);
        assert_int_equal(n, 4);
        assert_int_equal(r[0].type, M0_WS_EV_PING);
        assert_int_equal(r[0].data.len, 5);
        assert_memory_equal(r[0].data.data, "ping!", 5);
        assert_int_equal(r[1].type, M0_WS_EV_PONG);
        assert_int_equal(r[2].type, M0_WS_EV_MESSAGE);
        assert_int_equal(r[2].opcode, M0_WS_TEXT);
        assert_int_equal(r[2].data.len, strlen(text));
        assert_memory_equal(r[2].data.data, text, strlen(text));
        assert_int_equal(r[3].opcode, M0_WS_BINARY);
        assert_memory_equal(r[3].data.data, "\x00\xff", 2);
        free_recs(r, n);
        m0_ws_parser_free(&p);
    }
    m0_buf_free(&b);
}

static void test_take_moves_the_message(void **state)
{
    (void)state;
    struct m0_buf b = {0}, got = {0};
    client_frame(&b, 0x81, "one", 3);
    client_frame(&b, 0x81, "two", 3);
    struct m0_ws_parser p;
    m0_ws_parser_init(&p, 100);
    size_t used;
    struct m0_ws_event ev;
    assert_int_equal(m0_ws_parse(&p, b.data, b.len, &used, &ev), M0_WS_EV_MESSAGE);
    assert_int_equal(used, 9);
    m0_ws_parser_take(&p, &got);
    assert_int_equal(got.len, 3);
    assert_memory_equal(got.data, "one", 3);
    assert_null(p.msg.data);
    assert_int_equal(m0_ws_parse(&p, b.data + used, b.len - used, &used, &ev), M0_WS_EV_MESSAGE);
    assert_memory_equal(ev.data, "two", 3);
    m0_buf_free(&got);
    m0_buf_free(&b);
    m0_ws_parser_free(&p);
}

static void test_protocol_errors_close_1002(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    /* Unmasked client frame (§5.1). */
    m0_buf_append(&b, "\x81\x02hi", 4);
    expect_error(&b, 1002, 1 << 20);
    /* Reserved bits, reserved opcodes (data 3-7, control B-F). */
    static const uint8_t bad_b0[] = {0xc1, 0xa1, 0x91, 0x83, 0x87, 0x8b, 0x8f};
    for (size_t i = 0; i < sizeof bad_b0; i++) {
        m0_buf_reset(&b);
        client_frame(&b, bad_b0[i], "x", 1);
        expect_error(&b, 1002, 1 << 20);
    }
    /* Control frames: fragmented, or longer than 125. */
    m0_buf_reset(&b);
    client_frame(&b, 0x09, "x", 1);
    expect_error(&b, 1002, 1 << 20);
    char big[126] = {0};
    m0_buf_reset(&b);
    client_frame(&b, 0x89, big, 126);
    expect_error(&b, 1002, 1 << 20);
    /* A continuation with nothing open; a new message inside one. */
    m0_buf_reset(&b);
    client_frame(&b, 0x80, "x", 1);
    expect_error(&b, 1002, 1 << 20);
    m0_buf_reset(&b);
    client_frame(&b, 0x01, "x", 1);
    client_frame(&b, 0x81, "y", 1);
    expect_error(&b, 1002, 1 << 20);
    /* Lengths not in their minimal form. */
    m0_buf_reset(&b);
    m0_buf_append(&b, "\x81\xfe\x00\x05\x00\x00\x00\x00hello", 13);
    expect_error(&b, 1002, 1 << 20);
    m0_buf_reset(&b);
    m0_buf_append(&b, "\x82\xff\x00\x00\x00\x00\x00\x00\xff\xff\x00\x00\x00\x00", 14);
    expect_error(&b, 1002, 1 << 20);
    /* A 64-bit length with its top bit set. */
    m0_buf_reset(&b);
    m0_buf_append(&b, "\x82\xff\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", 14);
    expect_error(&b, 1002, 0);
    m0_buf_free(&b);
}

static void test_oversize_closes_1009_at_the_head(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    char payload[101];
    memset(payload, 'a', sizeof payload);
    client_frame(&b, 0x81, payload, 101);
    expect_error(&b, 1009, 100);
    /* Decided from the head alone: no payload byte is needed. */
    struct m0_ws_parser p;
    m0_ws_parser_init(&p, 100);
    size_t used;
    struct m0_ws_event ev;
    assert_int_equal(m0_ws_parse(&p, b.data, 6, &used, &ev), M0_WS_EV_ERROR);
    assert_int_equal(ev.code, 1009);
    m0_ws_parser_free(&p);
    /* Fragments add up: 60 + 60 > 100. */
    m0_buf_reset(&b);
    client_frame(&b, 0x02, payload, 60);
    client_frame(&b, 0x80, payload, 60);
    expect_error(&b, 1009, 100);
    /* Exactly the limit is fine. */
    m0_buf_reset(&b);
    client_frame(&b, 0x02, payload, 50);
    client_frame(&b, 0x80, payload, 50);
    m0_ws_parser_init(&p, 100);
    struct rec r[2];
    assert_int_equal(feed(&p, &b, 0, r, 2), 1);
    assert_int_equal(r[0].type, M0_WS_EV_MESSAGE);
    assert_int_equal(r[0].data.len, 100);
    free_recs(r, 1);
    m0_ws_parser_free(&p);
    m0_buf_free(&b);
}

static void test_text_must_be_utf8_1007(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    client_frame(&b, 0x81, "ok\xff", 3);
    expect_error(&b, 1007, 1 << 20);
    /* A character cut by the message's end. */
    m0_buf_reset(&b);
    client_frame(&b, 0x01, "\xe2\x82", 2);
    client_frame(&b, 0x80, "", 0);
    expect_error(&b, 1007, 1 << 20);
    /* Fail fast: the first fragment already shows it (a surrogate). */
    m0_buf_reset(&b);
    client_frame(&b, 0x01, "\xed\xa0\x80", 3);
    expect_error(&b, 1007, 1 << 20);
    /* Binary is never checked. */
    m0_buf_reset(&b);
    client_frame(&b, 0x82, "\xff\xfe", 2);
    struct m0_ws_parser p;
    struct rec r[2];
    m0_ws_parser_init(&p, 100);
    assert_int_equal(feed(&p, &b, 1, r, 2), 1);
    assert_int_equal(r[0].type, M0_WS_EV_MESSAGE);
    free_recs(r, 1);
    m0_ws_parser_free(&p);
    m0_buf_free(&b);
}

static void test_utf8_rules(void **state)
{
    (void)state;
    assert_true(m0_ws_utf8_valid("", 0));
    assert_true(m0_ws_utf8_valid("plain ascii, longer than eight bytes", 36));
    assert_true(m0_ws_utf8_valid("\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf", 18));
    assert_false(m0_ws_utf8_valid("\xc0\x80", 2));          /* overlong NUL */
    assert_false(m0_ws_utf8_valid("\xe0\x9f\xbf", 3));      /* overlong */
    assert_false(m0_ws_utf8_valid("\xed\xbf\xbf", 3));      /* surrogate */
    assert_false(m0_ws_utf8_valid("\xf4\x90\x80\x80", 4));  /* past U+10FFFF */
    assert_false(m0_ws_utf8_valid("\xf5\x80\x80\x80", 4));
    assert_false(m0_ws_utf8_valid("\x80", 1));
    assert_false(m0_ws_utf8_valid("abcdefgh\xc3", 9));       /* cut short */
}

static void test_close_frames(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    struct m0_ws_parser p;
    struct rec r[2];
    /* A code and a reason. */
    client_frame(&b, 0x88, "\x03\xe8" "bye", 5);
    m0_ws_parser_init(&p, 100);
    assert_int_equal(feed(&p, &b, 1, r, 2), 1);
    assert_int_equal(r[0].type, M0_WS_EV_CLOSE);
    assert_int_equal(r[0].code, 1000);
    assert_int_equal(r[0].data.len, 3);
    assert_memory_equal(r[0].data.data, "bye", 3);
    free_recs(r, 1);
    /* Anything after a close is ignored. */
    size_t used;
    struct m0_ws_event ev;
    assert_int_equal(m0_ws_parse(&p, b.data, b.len, &used, &ev), M0_WS_EV_NONE);
    m0_ws_parser_free(&p);
    /* No payload: 1005 reported. */
    m0_buf_reset(&b);
    client_frame(&b, 0x88, "", 0);
    m0_ws_parser_init(&p, 100);
    assert_int_equal(feed(&p, &b, 0, r, 2), 1);
    assert_int_equal(r[0].code, 1005);
    free_recs(r, 1);
    m0_ws_parser_free(&p);
    /* Codes that may be sent pass; the rest fail with 1002. */
    static const unsigned ok[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1014, 3000, 4999};
    static const unsigned bad[] = {0, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, 65535};
    for (size_t i = 0; i < M0_ARRAY_LEN(ok); i++)
        assert_true(m0_ws_close_code_valid(ok[i]));
    for (size_t i = 0; i < M0_ARRAY_LEN(bad); i++) {
        char code[2] = {(char)(bad[i] >> 8), (char)bad[i]};
        m0_buf_reset(&b);
        client_frame(&b, 0x88, code, 2);
        expect_error(&b, 1002, 100);
    }
    /* One byte of payload; a reason that is not UTF-8. */
    m0_buf_reset(&b);
    client_frame(&b, 0x88, "\x03", 1);
    expect_error(&b, 1002, 100);
    m0_buf_reset(&b);
    client_frame(&b, 0x88, "\x03\xe8\xff", 3);
    expect_error(&b, 1007, 100);
    m0_buf_free(&b);
}

/* ------------------------------------------------------- SSE → message */

static void test_sse_event_data(void **state)
{
    (void)state;
    struct m0_buf d = {0};
    int fire;
    const char *ev;
    size_t evl;
    /* What m0pub frames: id, event, one data line per line. */
    const char *f = "id: 7\nevent: message\ndata: {\"a\": 1}\ndata: line two\n\n";
    assert_int_equal(m0_sse_event_data(f, strlen(f), &d, &fire, &ev, &evl), strlen(f));
    assert_true(fire);
    assert_int_equal(evl, 7);
    assert_memory_equal(ev, "message", 7);
    assert_int_equal(d.len, strlen("{\"a\": 1}\nline two"));
    assert_memory_equal(d.data, "{\"a\": 1}\nline two", d.len);
    /* One space is dropped after the colon, not two; CR and CRLF end lines;
     * comments and unknown fields are skipped; "data" alone is an empty line. */
    m0_buf_reset(&d);
    f = ": hello\r\nevent: chat\rdata:  two spaces\r\ndata\nretry: 5\nid: 9\n\nrest";
    size_t took = m0_sse_event_data(f, strlen(f), &d, &fire, &ev, &evl);
    assert_int_equal(took, strlen(f) - 4);
    assert_true(fire);
    assert_int_equal(evl, 4);
    assert_memory_equal(ev, "chat", 4);
    assert_int_equal(d.len, strlen(" two spaces\n"));
    assert_memory_equal(d.data, " two spaces\n", d.len);
    /* No data: nothing fires (a heartbeat, an id-only event). */
    m0_buf_reset(&d);
    f = ": heartbeat\n\n";
    assert_int_equal(m0_sse_event_data(f, strlen(f), &d, &fire, &ev, &evl), strlen(f));
    assert_false(fire);
    assert_int_equal(d.len, 0);
    /* An empty data line fires with "". */
    f = "data: \n\n";
    assert_int_equal(m0_sse_event_data(f, strlen(f), &d, &fire, &ev, &evl), strlen(f));
    assert_true(fire);
    assert_int_equal(d.len, 0);
    /* Incomplete: nothing taken, nothing appended. */
    m0_buf_append(&d, "keep", 4);
    f = "data: no blank line\n";
    assert_int_equal(m0_sse_event_data(f, strlen(f), &d, &fire, &ev, &evl), 0);
    assert_int_equal(d.len, 4);
    /* The framer's own output round-trips, line breaks normalised as
     * EventSource normalises them. */
    struct m0_buf frame = {0};
    m0_sse_frame(&frame, 3, NULL, "a\r\nb\rc\n", 7);
    m0_buf_reset(&d);
    assert_int_equal(m0_sse_event_data(frame.data, frame.len, &d, &fire, &ev, &evl), frame.len);
    assert_int_equal(d.len, 6);
    assert_memory_equal(d.data, "a\nb\nc\n", 6);
    m0_buf_free(&frame);
    m0_buf_free(&d);
}

/* ------------------------------------------------ the message's request */

static void test_snapshot_and_message_request(void **state)
{
    (void)state;
    struct m0_req r, msg;
    struct m0_http h;
    parse_req(HS_HEAD "Upgrade: websocket\r\nConnection: Upgrade\r\n" HS_KEY "Sec-WebSocket-Version: 13\r\n"
                      "Sec-WebSocket-Protocol: chat\r\nCookie: sessionid=abc\r\nOrigin: http://x\r\n\r\n",
              &r, &h);
    struct m0_ws_snapshot *snap = m0_ws_snapshot_new(&r);
    m0_http_free(&h);
    m0_req_free(&r);               /* the snapshot stands alone */
    assert_true(m0_ws_snapshot_size(snap) < 200);

    m0_req_init(&msg);
    for (int round = 0; round < 2; round++) {       /* the request is reused */
        struct m0_buf payload = {0};
        m0_buf_append(&payload, "hello", 5);
        m0_ws_message_request(&msg, snap, "room-1", 6, 42, round ? M0_WS_BINARY : M0_WS_TEXT, &payload);
        assert_int_equal(payload.len, 0);
        assert_string_equal(msg.method, "POST");
        assert_string_equal(msg.target, "/chat?room=1");
        assert_int_equal(msg.path_len, 5);
        assert_memory_equal(msg.path, "/chat", 5);
        assert_string_equal(msg.query, "room=1");
        assert_int_equal(msg.http_minor, 1);
        assert_false(msg.flags & M0_REQ_KEEPALIVE);
        assert_string_equal(m0_req_header(&msg, "host")->value, "server.example.com");
        assert_string_equal(m0_req_header(&msg, "cookie")->value, "sessionid=abc");
        assert_string_equal(m0_req_header(&msg, "origin")->value, "http://x");
        assert_null(m0_req_header(&msg, "upgrade"));
        assert_null(m0_req_header(&msg, "connection"));
        assert_null(m0_req_header(&msg, "sec-websocket-key"));
        assert_null(m0_req_header(&msg, "sec-websocket-protocol"));
        assert_string_equal(m0_req_header(&msg, "m0-channel")->value, "room-1");
        assert_string_equal(m0_req_header(&msg, "m0-slot")->value, "42");
        assert_string_equal(m0_req_header(&msg, "m0-opcode")->value, round ? "binary" : "text");
        assert_string_equal(m0_req_header(&msg, "content-length")->value, "5");
        assert_string_equal(m0_req_header(&msg, "content-type")->value,
                            round ? "application/octet-stream" : "text/plain; charset=utf-8");
        assert_int_equal(msg.content_length, 5);
        assert_int_equal(msg.body_len, 5);
        char got[8];
        assert_int_equal(m0_req_body_read(&msg, 0, got, sizeof got), 5);
        assert_memory_equal(got, "hello", 5);
        m0_buf_free(&payload);
    }
    m0_req_free(&msg);
    m0_ws_snapshot_free(snap);
}

/* ------------------------------------------- the view's M0-* fields */

static void test_head_websocket_fields(void **state)
{
    (void)state;
    struct m0_head h = {0};
    const char *why;
    m0_head_reset(&h);
    m0_head_status(&h, 200, NULL, 0);
    assert_int_equal(m0_head_add(&h, "M0-Hold", 7, "WebSocket", 9, &why), M0_OK);
    assert_int_equal(h.hold, M0_HOLD_WEBSOCKET);
    assert_int_equal(m0_head_add(&h, "M0-Channel", 10, "room", 4, &why), M0_OK);
    assert_int_equal(m0_head_add(&h, "M0-WebSocket-Protocol", 21, "chat.v1", 7, &why), M0_OK);
    assert_string_equal(h.ws_protocol, "chat.v1");
    assert_int_equal(m0_head_add(&h, "M0-WebSocket-Protocol", 21, "two words", 9, &why), M0_ERR);
    assert_non_null(why);
    assert_int_equal(m0_head_add(&h, "M0-Opcode", 9, "binary", 6, &why), M0_OK);
    assert_int_equal(h.ws_opcode, M0_WS_BINARY);
    assert_int_equal(m0_head_add(&h, "M0-Opcode", 9, "text", 4, &why), M0_OK);
    assert_int_equal(h.ws_opcode, M0_WS_TEXT);
    assert_int_equal(m0_head_add(&h, "M0-Opcode", 9, "ping", 4, &why), M0_ERR);
    /* None of them is ever a header line the client sees. */
    m0_buf_append(&h.lines, "", 1);
    assert_null(strstr(h.lines.data, "M0-"));
    m0_head_reset(&h);
    assert_int_equal(m0_head_add(&h, "M0-Hold", 7, "sse", 3, &why), M0_OK);
    assert_int_equal(h.hold, M0_HOLD_UNKNOWN);
    m0_head_free(&h);
}

static void test_ws_max_message_flag(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    char *ok[] = {"m0serve", "app", "--ws-max-message", "64k"};
    m0_config_defaults(&cfg);
    assert_int_equal(cfg.ws_max_message, 1024 * 1024);
    assert_int_equal(m0_config_parse(&cfg, 4, ok, err, sizeof err), M0_OK);
    assert_int_equal(cfg.ws_max_message, 64 * 1024);
    char *zero[] = {"m0serve", "app", "--ws-max-message", "0"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 4, zero, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "--ws-max-message"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_rfc_example),
        cmocka_unit_test(test_handshake_check),
        cmocka_unit_test(test_refusal_and_switching),
        cmocka_unit_test(test_protocol_offered),
        cmocka_unit_test(test_frame_lengths),
        cmocka_unit_test(test_close_frame_encoding),
        cmocka_unit_test(test_fragments_reassembled_with_control_frames_between),
        cmocka_unit_test(test_take_moves_the_message),
        cmocka_unit_test(test_protocol_errors_close_1002),
        cmocka_unit_test(test_oversize_closes_1009_at_the_head),
        cmocka_unit_test(test_text_must_be_utf8_1007),
        cmocka_unit_test(test_utf8_rules),
        cmocka_unit_test(test_close_frames),
        cmocka_unit_test(test_sse_event_data),
        cmocka_unit_test(test_snapshot_and_message_request),
        cmocka_unit_test(test_head_websocket_fields),
        cmocka_unit_test(test_ws_max_message_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
