/*
 * test_commit.c — the head decision (src/proto/commit.c), without a loop:
 * the framing (keep-alive by version, Connection, draining and a lazy body
 * not whole; HEAD), whether a head may be held (the mount holds, a 2xx or
 * any GRIP status, never HEAD), and the one commit (a hold's Last-Event-ID,
 * a GRIP hold's start, a refused GRIP head's 502, one head per response).
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
#include "m0/commit.h"
#include "m0/http.h"
#include "m0/response.h"

static const struct m0_limits lim = {
    .max_target = 8192, .max_header_bytes = 16384, .max_headers = 100,
    .max_body = 1048576, .body_mem = 1024 * 1024,
};

/* A parsed request (its head and an empty body). */
struct rq {
    struct m0_req r;
    struct m0_http h;
};

static void parse(struct rq *q, const char *raw)
{
    m0_req_init(&q->r);
    m0_http_init(&q->h, &q->r, &lim);
    size_t off = 0, n = strlen(raw);
    for (int guard = 0; guard < 10; guard++) {
        size_t used = 0;
        int rc = m0_http_feed(&q->h, raw + off, n - off, &used);
        off += used;
        if (rc == M0_DONE)
            return;
        assert_true(rc == M0_OK || rc == M0_AGAIN);
    }
    fail_msg("request not complete: %s", raw);
}

static void done(struct rq *q)
{
    m0_http_free(&q->h);
    m0_req_free(&q->r);
}

static void test_framing_keepalive_by_version_and_connection(void **state)
{
    (void)state;
    struct rq q;
    parse(&q, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    struct m0_body_req br = m0_commit_framing(&q.r, 0, 1);
    assert_int_equal(br.http_minor, 1);
    assert_true(br.keepalive);
    assert_false(br.head);
    done(&q);
    parse(&q, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_false(m0_commit_framing(&q.r, 0, 1).keepalive);
    done(&q);
    parse(&q, "GET / HTTP/1.0\r\n\r\n");
    br = m0_commit_framing(&q.r, 0, 1);
    assert_int_equal(br.http_minor, 0);
    assert_false(br.keepalive);                   /* RFC 9112 §9.3: 1.0 persists only when asked */
    done(&q);
    parse(&q, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_true(m0_commit_framing(&q.r, 0, 1).keepalive);
    done(&q);
}

static void test_framing_draining_or_unfinished_body_closes(void **state)
{
    (void)state;
    struct rq q;
    parse(&q, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_false(m0_commit_framing(&q.r, 1, 1).keepalive);   /* draining: Connection: close */
    assert_false(m0_commit_framing(&q.r, 0, 0).keepalive);   /* its end unknown: cannot persist */
    done(&q);
    parse(&q, "HEAD / HTTP/1.1\r\nHost: a\r\n\r\n");
    struct m0_body_req br = m0_commit_framing(&q.r, 0, 1);
    assert_true(br.head);
    assert_true(br.keepalive);
    done(&q);
}

static void test_may_hold_needs_the_mount_a_2xx_and_not_head(void **state)
{
    (void)state;
    struct rq q;
    struct m0_head h;
    memset(&h, 0, sizeof h);
    m0_head_reset(&h);
    h.status = 200;
    h.hold = M0_HOLD_STREAM;
    parse(&q, "GET /s HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_true(m0_commit_may_hold(&h, &q.r, 1));
    assert_false(m0_commit_may_hold(&h, &q.r, 0));             /* the mount has no --realtime */
    h.status = 404;
    assert_false(m0_commit_may_hold(&h, &q.r, 1));             /* an error is an ordinary answer */
    h.grip_hold = 1;
    assert_true(m0_commit_may_hold(&h, &q.r, 1));              /* a GRIP hold keeps its status */
    h.grip_hold = 0;
    h.status = 200;
    h.hold = M0_HOLD_NONE;
    assert_false(m0_commit_may_hold(&h, &q.r, 1));
    done(&q);
    h.hold = M0_HOLD_STREAM;
    parse(&q, "HEAD /s HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_false(m0_commit_may_hold(&h, &q.r, 1));             /* HEAD: never held */
    done(&q);
    m0_head_free(&h);
}

struct out {
    struct m0_head h;
    struct m0_body b;
    struct m0_resp rs;
};

static void out_init(struct out *o, int status)
{
    memset(o, 0, sizeof *o);
    m0_head_reset(&o->h);
    m0_body_reset(&o->b);
    m0_resp_init(&o->rs);
    m0_head_status(&o->h, status, NULL, 0);
}

static void out_free(struct out *o)
{
    m0_head_free(&o->h);
    m0_resp_free(&o->rs);
}

static void test_commit_a_hold_takes_its_last_event_id(void **state)
{
    (void)state;
    struct rq q;
    struct out o;
    struct m0_commit d;
    const char *why;
    parse(&q, "GET /s HTTP/1.1\r\nHost: a\r\nLast-Event-ID: 41\r\n\r\n");
    out_init(&o, 200);
    assert_int_equal(m0_head_add(&o.h, "Content-Type", 12, "text/event-stream", 17, &why), M0_OK);
    o.h.hold = M0_HOLD_STREAM;
    struct m0_body_req br = m0_commit_framing(&q.r, 0, 1);
    assert_int_equal(m0_commit_head(&d, &o.h, &o.b, &o.rs, &q.r, &br, -1, 1), M0_OK);
    assert_true(d.held);
    assert_false(d.grip);
    assert_int_equal(d.last_id, 41);
    assert_true(o.rs.flags & M0_RESP_HOLD);
    assert_int_equal(o.rs.status, 200);
    assert_non_null(memmem(o.rs.out.data, o.rs.out.len, "HTTP/1.1 200 OK\r\n", 17));
    /* One head per response. */
    size_t len = o.rs.out.len;
    assert_int_equal(m0_commit_head(&d, &o.h, &o.b, &o.rs, &q.r, &br, -1, 1), M0_ERR);
    assert_int_equal(o.rs.out.len, len);
    out_free(&o);
    done(&q);
}

/* Issue 32: a view's M0-Last-Event-ID says where its stream starts (a page
 * that rendered the history up to it); a reconnect's Last-Event-ID wins. */
static void test_commit_a_hold_starts_where_the_view_said_unless_reconnected(void **state)
{
    (void)state;
    struct rq q;
    struct out o;
    struct m0_commit d;
    const char *why;
    parse(&q, "GET /s HTTP/1.1\r\nHost: a\r\n\r\n");
    out_init(&o, 200);
    assert_int_equal(m0_head_add(&o.h, "M0-Last-Event-ID", 16, "17", 2, &why), M0_OK);
    o.h.hold = M0_HOLD_STREAM;
    struct m0_body_req br = m0_commit_framing(&q.r, 0, 1);
    assert_int_equal(m0_commit_head(&d, &o.h, &o.b, &o.rs, &q.r, &br, -1, 1), M0_OK);
    assert_true(d.held);
    assert_int_equal(d.last_id, 17);
    assert_null(memmem(o.rs.out.data, o.rs.out.len, "M0-Last-Event-ID", 16));   /* not sent on */
    out_free(&o);
    done(&q);

    parse(&q, "GET /s HTTP/1.1\r\nHost: a\r\nLast-Event-ID: 41\r\n\r\n");
    out_init(&o, 200);
    assert_int_equal(m0_head_add(&o.h, "M0-Last-Event-ID", 16, "17", 2, &why), M0_OK);
    o.h.hold = M0_HOLD_STREAM;
    br = m0_commit_framing(&q.r, 0, 1);
    assert_int_equal(m0_commit_head(&d, &o.h, &o.b, &o.rs, &q.r, &br, -1, 1), M0_OK);
    assert_int_equal(d.last_id, 41);
    out_free(&o);
    done(&q);

    /* A GRIP hold's Last-Event-ID is the application's, whatever the view said. */
    parse(&q, "GET /s HTTP/1.1\r\nHost: a\r\n\r\n");
    out_init(&o, 200);
    assert_int_equal(m0_head_add(&o.h, "M0-Last-Event-ID", 16, "17", 2, &why), M0_OK);
    o.h.hold = M0_HOLD_STREAM;
    o.h.grip_hold = 1;
    br = m0_commit_framing(&q.r, 0, 1);
    assert_int_equal(m0_commit_head(&d, &o.h, &o.b, &o.rs, &q.r, &br, -1, 1), M0_OK);
    assert_int_equal(d.last_id, 0);
    out_free(&o);
    done(&q);
}

static void test_commit_without_hold_is_an_ordinary_answer(void **state)
{
    (void)state;
    struct rq q;
    struct out o;
    struct m0_commit d;
    parse(&q, "GET / HTTP/1.1\r\nHost: a\r\nLast-Event-ID: 41\r\n\r\n");
    out_init(&o, 200);
    struct m0_body_req br = m0_commit_framing(&q.r, 0, 1);
    assert_int_equal(m0_commit_head(&d, &o.h, &o.b, &o.rs, &q.r, &br, 5, 0), M0_OK);
    assert_false(d.held);
    assert_int_equal(d.last_id, 0);
    assert_false(o.rs.flags & M0_RESP_HOLD);
    assert_non_null(memmem(o.rs.out.data, o.rs.out.len, "Content-Length: 5\r\n", 19));
    out_free(&o);
    done(&q);
}

static void test_commit_a_grip_hold_starts_where_the_view_began(void **state)
{
    (void)state;
    struct rq q;
    struct out o;
    struct m0_commit d;
    parse(&q, "GET /s HTTP/1.1\r\nHost: a\r\nLast-Event-ID: 41\r\n\r\n");
    out_init(&o, 200);
    o.h.hold = M0_HOLD_STREAM;
    o.h.grip_hold = 1;
    struct m0_body_req br = m0_commit_framing(&q.r, 0, 1);
    assert_int_equal(m0_commit_head(&d, &o.h, &o.b, &o.rs, &q.r, &br, -1, 1), M0_OK);
    assert_true(d.held && d.grip);
    assert_int_equal(d.last_id, 0);       /* the application's storage answers Last-Event-ID */
    assert_true(o.rs.flags & M0_RESP_HOLD);
    out_free(&o);
    done(&q);
}

static void test_commit_refused_grip_instructions_are_a_502(void **state)
{
    (void)state;
    struct rq q;
    struct out o;
    struct m0_commit d;
    parse(&q, "GET /s HTTP/1.1\r\nHost: a\r\n\r\n");
    out_init(&o, 200);
    o.h.hold = M0_HOLD_STREAM;
    o.h.grip_err = "Grip-Hold without Grip-Channel";
    struct m0_body_req br = m0_commit_framing(&q.r, 0, 1);
    assert_int_equal(m0_commit_head(&d, &o.h, &o.b, &o.rs, &q.r, &br, -1, 1), M0_OK);
    assert_false(d.held);
    assert_false(o.rs.flags & M0_RESP_HOLD);
    assert_int_equal(o.rs.status, 502);
    assert_non_null(memmem(o.rs.out.data, o.rs.out.len, "HTTP/1.1 502 ", 13));
    assert_non_null(memmem(o.rs.out.data, o.rs.out.len, "Error while proxying to origin.\n", 32));
    assert_true(o.b.truncated);           /* what the view writes after is dropped */
    out_free(&o);
    done(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framing_keepalive_by_version_and_connection),
        cmocka_unit_test(test_framing_draining_or_unfinished_body_closes),
        cmocka_unit_test(test_may_hold_needs_the_mount_a_2xx_and_not_head),
        cmocka_unit_test(test_commit_a_hold_takes_its_last_event_id),
        cmocka_unit_test(test_commit_a_hold_starts_where_the_view_said_unless_reconnected),
        cmocka_unit_test(test_commit_without_hold_is_an_ordinary_answer),
        cmocka_unit_test(test_commit_a_grip_hold_starts_where_the_view_began),
        cmocka_unit_test(test_commit_refused_grip_instructions_are_a_502),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
