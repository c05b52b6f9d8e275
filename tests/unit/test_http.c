/*
 * test_http.c — the llhttp glue on canned bytes: the shared malformed
 * request table (whole and byte by byte), pipelining, 100-continue,
 * chunked bodies (with BWS in chunk extensions), methods llhttp does not
 * know (501), CONNECT (501), body spill to a temporary file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/http.h"
#include "cases.h"

static const struct m0_limits lim = {
    .max_target = 8192, .max_header_bytes = 16384, .max_headers = 100,
    .max_body = 1048576, .body_mem = 1024 * 1024,
};

struct outcome {
    int rc;          /* M0_DONE or M0_ERR (or M0_AGAIN: incomplete) */
    int status;      /* 200 for a complete request, else the parser's */
    int close;
    size_t used;     /* bytes consumed by the first message */
};

/* Feed raw in pieces of step bytes (0: all at once) as the loop does. */
static struct outcome parse(const char *raw, size_t n, size_t step, struct m0_req *r, struct m0_http *h,
                            const struct m0_limits *l)
{
    struct outcome o = {M0_AGAIN, 0, 0, 0};
    m0_req_init(r);
    m0_http_init(h, r, l);
    size_t off = 0, avail = step ? (step < n ? step : n) : n;
    for (int guard = 0; guard < 1000000; guard++) {
        size_t used = 0;
        int rc = m0_http_feed(h, raw + off, avail - off, &used);
        off += used;
        if (rc == M0_OK)
            continue;           /* head complete: feed again, even with 0 bytes */
        if (rc == M0_DONE || rc == M0_ERR) {
            o.rc = rc;
            o.status = rc == M0_DONE ? 200 : h->status;
            o.close = rc == M0_ERR || !(r->flags & M0_REQ_KEEPALIVE);
            o.used = off;
            return o;
        }
        if (avail == n)
            break;
        avail = step ? (avail + step < n ? avail + step : n) : n;
    }
    o.used = off;
    return o;
}

/* M0-* fields from a client never reach the request an application sees
 * (issue 10: a plain HTTP client cannot forge a WebSocket message). */
static void test_client_m0_fields_are_dropped(void **state)
{
    (void)state;
    static const char raw[] = "POST /chat HTTP/1.1\r\nHost: x\r\nM0-Channel: room\r\nm0-slot: 3\r\n"
                              "X-Keep: 1\r\nM0-OPCODE: text\r\nM0-Hold: websocket\r\nContent-Length: 2\r\n\r\nhi";
    for (size_t step = 0; step <= 1; step++) {
        struct m0_req r;
        struct m0_http h;
        struct outcome o = parse(raw, sizeof raw - 1, step, &r, &h, &lim);
        assert_int_equal(o.rc, M0_DONE);
        assert_int_equal(r.nhdrs, 3);
        assert_null(m0_req_header(&r, "m0-channel"));
        assert_null(m0_req_header(&r, "m0-slot"));
        assert_null(m0_req_header(&r, "m0-opcode"));
        assert_null(m0_req_header(&r, "m0-hold"));
        assert_non_null(m0_req_header(&r, "x-keep"));
        assert_int_equal(r.body_len, 2);
        m0_http_free(&h);
        m0_req_free(&r);
    }
}

static void test_case_table(void **state)
{
    (void)state;
    struct m0_case *cases;
    int n = m0_cases_load("../cases/requests.tsv", &cases);
    assert_true(n > 20);
    int failures = 0;
    for (int i = 0; i < n; i++) {
        for (size_t step = 0; step <= 1; step++) {
            struct m0_req r;
            struct m0_http h;
            struct outcome o = parse(cases[i].raw, cases[i].raw_len, step, &r, &h, &lim);
            /* A complete request consumes exactly its bytes: every "keep"
             * row is one request, so the chunk-size line filter neither
             * stops short nor runs past the message. */
            int short_read = o.rc == M0_DONE && o.used != cases[i].raw_len;
            if (o.status != cases[i].status || o.close != cases[i].close || short_read) {
                fprintf(stderr, "case %s (%s): got %d/%s, want %d/%s (%s; used %zu of %zu)\n", cases[i].name,
                        step ? "byte by byte" : "whole", o.status, o.close ? "close" : "keep",
                        cases[i].status, cases[i].close ? "close" : "keep", h.reason ? h.reason : "",
                        o.used, cases[i].raw_len);
                failures++;
            }
            m0_http_free(&h);
            m0_req_free(&r);
        }
    }
    m0_cases_free(cases, n);
    assert_int_equal(failures, 0);
}

static void test_pipelined_requests_split_in_order(void **state)
{
    (void)state;
    const char raw[] = "GET /one HTTP/1.1\r\nHost: a\r\n\r\n"
                       "POST /two?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
    struct m0_req r;
    struct m0_http h;
    struct outcome o = parse(raw, sizeof raw - 1, 0, &r, &h, &lim);
    assert_int_equal(o.rc, M0_DONE);
    assert_string_equal(r.path, "/one");
    assert_true(o.used < sizeof raw - 1);
    m0_http_next(&h);
    size_t used = 0, off = o.used;
    int rc;
    while ((rc = m0_http_feed(&h, raw + off, sizeof raw - 1 - off, &used)) == M0_OK)
        off += used;
    off += used;
    assert_int_equal(rc, M0_DONE);
    assert_int_equal(off, sizeof raw - 1);
    assert_string_equal(r.method, "POST");
    assert_string_equal(r.path, "/two");
    assert_string_equal(r.query, "x=1");
    assert_int_equal(r.body_len, 3);
    assert_memory_equal(r.body.data, "abc", 3);
    m0_http_free(&h);
    m0_req_free(&r);
}

static void test_expect_continue_pauses_at_head(void **state)
{
    (void)state;
    const char head[] = "PUT /u HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n";
    struct m0_req r;
    struct m0_http h;
    m0_req_init(&r);
    m0_http_init(&h, &r, &lim);
    size_t used;
    assert_int_equal(m0_http_feed(&h, head, sizeof head - 1, &used), M0_OK);
    assert_int_equal(used, sizeof head - 1);
    assert_true(r.flags & M0_REQ_EXPECT100);
    assert_int_equal(m0_http_feed(&h, "", 0, &used), M0_AGAIN);
    assert_int_equal(m0_http_feed(&h, "data", 4, &used), M0_DONE);
    assert_int_equal(r.body_len, 4);
    m0_http_free(&h);
    m0_req_free(&r);
}

/* m0_http_cap_body (the GRIP control port's --grip-max-body): a chunked
 * body is refused 413 at the chunk that passes the cap, with nothing of
 * that chunk stored; the cap never raises max_body, and the next message
 * on the connection has max_body again. */
static void test_body_cap_refuses_a_chunked_body_as_it_passes(void **state)
{
    (void)state;
    const char head[] = "POST /publish/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    struct m0_req r;
    struct m0_http h;
    size_t used;
    m0_req_init(&r);
    m0_http_init(&h, &r, &lim);
    assert_int_equal(m0_http_feed(&h, head, sizeof head - 1, &used), M0_OK);
    m0_http_cap_body(&h, 8);
    m0_http_cap_body(&h, 1 << 30);                       /* never raised */
    assert_int_equal(m0_http_feed(&h, "5\r\nabcde\r\n", 10, &used), M0_AGAIN);
    assert_int_equal(m0_http_feed(&h, "4\r\nfghi\r\n", 9, &used), M0_ERR);
    assert_int_equal(h.status, 413);
    assert_int_equal(r.body_len, 5);                    /* the chunk that passed is not stored */
    m0_http_free(&h);
    m0_req_free(&r);

    /* Within the cap: the whole body; the next message is back at max_body. */
    const char two[] = "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 8\r\n\r\nabcdefgh"
                       "POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\nabcdefghi";
    m0_req_init(&r);
    m0_http_init(&h, &r, &lim);
    assert_int_equal(m0_http_feed(&h, two, sizeof two - 1, &used), M0_OK);
    m0_http_cap_body(&h, 8);
    size_t off = used;
    assert_int_equal(m0_http_feed(&h, two + off, sizeof two - 1 - off, &used), M0_DONE);
    assert_int_equal(r.body_len, 8);
    off += used;
    m0_http_next(&h);
    assert_int_equal(m0_http_feed(&h, two + off, sizeof two - 1 - off, &used), M0_OK);
    off += used;
    assert_int_equal(m0_http_feed(&h, two + off, sizeof two - 1 - off, &used), M0_DONE);
    assert_int_equal(r.body_len, 9);
    m0_http_free(&h);
    m0_req_free(&r);
}

static void test_chunked_body_decoded(void **state)
{
    (void)state;
    const char raw[] = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "3\r\nabc\r\n5;ext=1\r\ndefgh\r\n0\r\nTrailer: x\r\n\r\n";
    struct m0_req r;
    struct m0_http h;
    struct outcome o = parse(raw, sizeof raw - 1, 1, &r, &h, &lim);
    assert_int_equal(o.rc, M0_DONE);
    assert_true(r.flags & M0_REQ_CHUNKED);
    assert_int_equal(r.body_len, 8);
    assert_memory_equal(r.body.data, "abcdefgh", 8);
    m0_http_free(&h);
    m0_req_free(&r);
}

/* RFC 9112 §7.1.1: BWS around ";" and "=" in chunk extensions; the body is
 * decoded exactly, whatever the read boundaries (every step from 1 to 7
 * bytes splits the whitespace runs differently). */
static void test_chunk_extension_bws_decoded(void **state)
{
    (void)state;
    const char raw[] = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "3 ; a=1\r\nabc\r\n"
                       "5\t;\tb = \"x ; y\" ; c\r\ndefgh\r\n"
                       "2;d\r\nij\r\n"
                       "0 ; last=\"yes\"\r\nX-Trailer: t\r\n\r\n";
    for (size_t step = 0; step <= 7; step++) {
        struct m0_req r;
        struct m0_http h;
        struct outcome o = parse(raw, sizeof raw - 1, step, &r, &h, &lim);
        assert_int_equal(o.rc, M0_DONE);
        assert_int_equal(o.used, sizeof raw - 1);
        assert_int_equal(r.body_len, 10);
        assert_memory_equal(r.body.data, "abcdefghij", 10);
        m0_http_free(&h);
        m0_req_free(&r);
    }
}

/* A pipelined request right behind a chunked body with BWS in its last
 * chunk-size line starts exactly where that body ends. */
static void test_chunk_extension_bws_then_pipelined(void **state)
{
    (void)state;
    const char raw[] = "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "1 ; x\r\nz\r\n0 ; y=1\r\n\r\n"
                       "GET /b HTTP/1.1\r\nHost: a\r\n\r\n";
    struct m0_req r;
    struct m0_http h;
    struct outcome o = parse(raw, sizeof raw - 1, 0, &r, &h, &lim);
    assert_int_equal(o.rc, M0_DONE);
    assert_int_equal(r.body_len, 1);
    assert_memory_equal(r.body.data, "z", 1);
    m0_http_next(&h);
    size_t used = 0, off = o.used;
    int rc;
    while ((rc = m0_http_feed(&h, raw + off, sizeof raw - 1 - off, &used)) == M0_OK)
        off += used;
    off += used;
    assert_int_equal(rc, M0_DONE);
    assert_int_equal(off, sizeof raw - 1);
    assert_string_equal(r.method, "GET");
    assert_string_equal(r.path, "/b");
    m0_http_free(&h);
    m0_req_free(&r);
}

/* RFC 9110 §9.1, §15.6.2: a method we do not implement is 501, and the
 * request keeps its real method and target for the access log. */
static void test_unknown_method_is_501_and_named(void **state)
{
    (void)state;
    const char raw[] = "QUERY /search?q=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}";
    for (size_t step = 0; step <= 3; step++) {
        struct m0_req r;
        struct m0_http h;
        struct outcome o = parse(raw, sizeof raw - 1, step, &r, &h, &lim);
        assert_int_equal(o.rc, M0_ERR);
        assert_int_equal(o.status, 501);
        assert_non_null(r.method);
        assert_string_equal(r.method, "QUERY");
        assert_int_equal(r.method_len, 5);
        assert_string_equal(r.target, "/search?q=1");
        assert_int_equal(r.body_len, 0);   /* refused at the head: no body read */
        m0_http_free(&h);
        m0_req_free(&r);
    }
}

/* A method that never ends is bounded by the head limit: the parser does
 * not keep buffering it. */
static void test_endless_method_hits_head_limit(void **state)
{
    (void)state;
    size_t n = 100000;
    char *raw = malloc(n);
    memset(raw, 'X', n);
    struct m0_req r;
    struct m0_http h;
    struct outcome o = parse(raw, n, 4096, &r, &h, &lim);
    assert_int_equal(o.rc, M0_ERR);
    assert_int_equal(o.status, 431);
    assert_true(o.used <= lim.max_header_bytes + lim.max_target + 4096);
    m0_http_free(&h);
    m0_req_free(&r);
    free(raw);
}

/* RFC 9110 §9.3.6: CONNECT in authority-form is 501; the destination is
 * kept as the request's authority. */
static void test_connect_is_501_with_authority(void **state)
{
    (void)state;
    const char raw[] = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
    struct m0_req r;
    struct m0_http h;
    struct outcome o = parse(raw, sizeof raw - 1, 1, &r, &h, &lim);
    assert_int_equal(o.rc, M0_ERR);
    assert_int_equal(o.status, 501);
    assert_string_equal(r.method, "CONNECT");
    assert_non_null(r.authority);
    assert_string_equal(r.authority, "example.com:443");
    m0_http_free(&h);
    m0_req_free(&r);
}

static void test_body_spills_to_file(void **state)
{
    (void)state;
    struct m0_limits small = lim;
    small.body_mem = 10;
    char raw[256];
    int n = snprintf(raw, sizeof raw, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 26\r\n\r\n%s",
                     "abcdefghijklmnopqrstuvwxyz");
    struct m0_req r;
    struct m0_http h;
    struct outcome o = parse(raw, (size_t)n, 7, &r, &h, &small);
    assert_int_equal(o.rc, M0_DONE);
    assert_int_equal(r.body.len, 10);
    assert_true(r.body_fd != -1);
    char buf[32] = {0};
    assert_int_equal(m0_req_body_read(&r, 5, buf, sizeof buf), 21);
    assert_memory_equal(buf, "fghijklmnopqrstuvwxyz", 21);
    assert_int_equal(m0_req_body_read(&r, 26, buf, sizeof buf), 0);
    m0_http_free(&h);
    m0_req_free(&r);
}

static void test_headers_trimmed_and_found(void **state)
{
    (void)state;
    const char raw[] = "GET http://example.com/abs?q HTTP/1.1\r\nHost: a\r\nX-Pad: \t v a l \t\r\n\r\n";
    struct m0_req r;
    struct m0_http h;
    struct outcome o = parse(raw, sizeof raw - 1, 0, &r, &h, &lim);
    assert_int_equal(o.rc, M0_DONE);
    const struct m0_hdr *hd = m0_req_header(&r, "x-pad");
    assert_non_null(hd);
    assert_string_equal(hd->value, "v a l");
    assert_string_equal(r.path, "/abs");   /* absolute-form reduced to its path */
    assert_string_equal(r.query, "q");
    assert_null(m0_req_header(&r, "x-missing"));
    m0_http_free(&h);
    m0_req_free(&r);
}

/* Found by tests/fuzz/fuzz_http: llhttp reads a request-line without an
 * HTTP-version as HTTP/0.9 and goes on to parse header lines; the request
 * was served as if it were HTTP/1.1 (http_minor 9). */
static void test_request_line_without_version_rejected(void **state)
{
    (void)state;
    const char raw[] = "GET /\r\nHost: a\r\n\r\n";
    for (size_t step = 0; step <= 1; step++) {
        struct m0_req r;
        struct m0_http h;
        struct outcome o = parse(raw, sizeof raw - 1, step, &r, &h, &lim);
        assert_int_equal(o.rc, M0_ERR);
        assert_int_equal(o.status, 400);
        m0_http_free(&h);
        m0_req_free(&r);
    }
}

/* Found by tests/fuzz/fuzz_http: llhttp ends a CONNECT message at its head
 * (what follows is a tunnel), so a Content-Length body was left to be
 * parsed as the next request on the connection: request smuggling. A
 * CONNECT is refused before its head ends — 400 for a target that is not
 * authority-form (this one), 501 otherwise — and the connection closes. */
static void test_connect_refused_body_never_parsed_as_request(void **state)
{
    (void)state;
    const char raw[] = "CONNECT http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 30\r\n\r\n"
                       "GET /admin HTTP/1.1\r\nHost: a\r\n\r\n";
    for (size_t step = 0; step <= 1; step++) {
        struct m0_req r;
        struct m0_http h;
        struct outcome o = parse(raw, sizeof raw - 1, step, &r, &h, &lim);
        assert_int_equal(o.rc, M0_ERR);
        assert_int_equal(o.status, 400);
        assert_true(o.close);
        m0_http_free(&h);
        m0_req_free(&r);
    }
}

static void test_token_and_value_predicates(void **state)
{
    (void)state;
    assert_true(m0_http_is_token("X-Custom_1!", 11));
    assert_false(m0_http_is_token("X Custom", 8));
    assert_false(m0_http_is_token("", 0));
    assert_true(m0_http_is_field_value("text/html; q=1\t", 15));
    assert_false(m0_http_is_field_value("a\r\nb", 4));
    assert_false(m0_http_is_field_value("a\0b", 3));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_case_table),
        cmocka_unit_test(test_pipelined_requests_split_in_order),
        cmocka_unit_test(test_expect_continue_pauses_at_head),
        cmocka_unit_test(test_chunked_body_decoded),
        cmocka_unit_test(test_chunk_extension_bws_decoded),
        cmocka_unit_test(test_chunk_extension_bws_then_pipelined),
        cmocka_unit_test(test_unknown_method_is_501_and_named),
        cmocka_unit_test(test_endless_method_hits_head_limit),
        cmocka_unit_test(test_connect_is_501_with_authority),
        cmocka_unit_test(test_body_spills_to_file),
        cmocka_unit_test(test_client_m0_fields_are_dropped),
        cmocka_unit_test(test_headers_trimmed_and_found),
        cmocka_unit_test(test_request_line_without_version_rejected),
        cmocka_unit_test(test_connect_refused_body_never_parsed_as_request),
        cmocka_unit_test(test_token_and_value_predicates),
        cmocka_unit_test(test_body_cap_refuses_a_chunked_body_as_it_passes),
    };
    return cmocka_run_group_tests_name("http", tests, NULL, NULL);
}
