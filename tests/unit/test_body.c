/*
 * test_body.c — the response head as bytes (m0_head_*) and the body
 * encoder (m0_body_*): one head per response, the framing RFC 9112 §6.3
 * chooses, never a byte past a promised length, the chunked terminator,
 * the short-body verdict, the held stream's head.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "m0/body.h"

static const struct m0_body_req http11 = {.http_minor = 1, .keepalive = 1, .head = 0};

/* out as a NUL-terminated string (tests only put text in it). */
static const char *str(struct m0_buf *b)
{
    m0_buf_append(b, "", 1);
    b->len--;
    return b->data;
}

static void head_200(struct m0_head *h)
{
    const char *why;
    m0_head_reset(h);
    m0_head_status(h, 200, NULL, 0);
    assert_int_equal(m0_head_add(h, "Content-Type", 12, "text/plain", 10, &why), M0_OK);
}

static void test_head_records_what_the_server_owns(void **state)
{
    (void)state;
    struct m0_head h = {0};
    const char *why;
    m0_head_reset(&h);
    m0_head_status(&h, 404, NULL, 0);
    assert_int_equal(m0_head_add(&h, "X-A", 3, "1", 1, &why), M0_OK);
    assert_int_equal(m0_head_add(&h, "Content-Length", 14, "12", 2, &why), M0_OK);
    assert_int_equal(m0_head_add(&h, "Connection", 10, "keep-alive, Close", 17, &why), M0_OK);
    assert_int_equal(m0_head_add(&h, "Transfer-Encoding", 17, "chunked", 7, &why), M0_OK);
    assert_int_equal(m0_head_add(&h, "Date", 4, "today", 5, &why), M0_OK);
    assert_int_equal(m0_head_add(&h, "M0-Hold", 7, "stream", 6, &why), M0_OK);
    assert_int_equal(m0_head_add(&h, "M0-Channel", 10, "news", 4, &why), M0_OK);
    const char *lines = str(&h.lines);
    assert_string_equal(lines, "HTTP/1.1 404 Not Found\r\nX-A: 1\r\nDate: today\r\n");
    assert_int_equal(h.content_length, 12);
    assert_true(h.app_close && h.has_date && !h.has_server);
    assert_int_equal(h.hold, M0_HOLD_STREAM);
    assert_string_equal(h.channel, "news");
    /* Refused: a Content-Length that is not a number, two different ones,
     * a reserved or empty channel name. */
    assert_int_equal(m0_head_add(&h, "Content-Length", 14, "12x", 3, &why), M0_ERR);
    assert_non_null(why);
    assert_int_equal(m0_head_add(&h, "content-length", 14, "13", 2, &why), M0_ERR);
    assert_int_equal(m0_head_add(&h, "content-length", 14, "12", 2, &why), M0_OK);   /* the same again */
    assert_int_equal(m0_head_add(&h, "M0-Channel", 10, "m0.x", 4, &why), M0_ERR);
    assert_int_equal(m0_head_add(&h, "M0-Channel", 10, "", 0, &why), M0_ERR);
    struct m0_head r = {0};                     /* a reason phrase of the app's own */
    m0_head_reset(&r);
    m0_head_status(&r, 200, "Fine", 4);
    assert_string_equal(str(&r.lines), "HTTP/1.1 200 Fine\r\n");
    m0_head_free(&r);
    m0_head_free(&h);
}

static void test_one_head_per_response(void **state)
{
    (void)state;
    struct m0_head h = {0};
    struct m0_body b;
    struct m0_buf out = {0};
    head_200(&h);
    m0_body_reset(&b);
    assert_int_equal(m0_body_commit(&b, &out, &h, &http11, 5, 0), M0_OK);
    size_t len = out.len;
    assert_int_equal(m0_body_commit(&b, &out, &h, &http11, 5, 0), M0_ERR);
    assert_int_equal(out.len, len);             /* nothing written the second time */
    assert_int_equal(m0_body_commit(&b, &out, &h, &http11, -1, 1), M0_ERR);
    assert_int_equal(out.len, len);
    m0_buf_free(&out);
    m0_head_free(&h);
}

static void test_framing_choices(void **state)
{
    (void)state;
    struct m0_head h = {0};
    struct m0_body b;
    struct m0_buf out = {0};
    head_200(&h);

    m0_body_reset(&b);                          /* known length */
    m0_body_commit(&b, &out, &h, &http11, 5, 0);
    assert_int_equal(b.framing, M0_FRAME_LENGTH);
    assert_non_null(strstr(str(&out), "Content-Length: 5\r\n"));
    assert_true(b.keep);

    m0_buf_reset(&out);                         /* unknown, HTTP/1.1: chunked */
    m0_body_reset(&b);
    m0_body_commit(&b, &out, &h, &http11, -1, 0);
    assert_int_equal(b.framing, M0_FRAME_CHUNKED);
    assert_non_null(strstr(str(&out), "Transfer-Encoding: chunked\r\n"));
    m0_body_emit(&b, &out, "abc", 3);
    assert_int_equal(m0_body_finish(&b, &out), M0_OK);
    assert_non_null(strstr(str(&out), "\r\n\r\n3\r\nabc\r\n0\r\n\r\n"));

    m0_buf_reset(&out);                         /* unknown, HTTP/1.0: close-delimited */
    m0_body_reset(&b);
    struct m0_body_req http10 = {.http_minor = 0, .keepalive = 1};
    m0_body_commit(&b, &out, &h, &http10, -1, 0);
    assert_int_equal(b.framing, M0_FRAME_CLOSE);
    assert_false(b.keep);
    assert_non_null(strstr(str(&out), "Connection: close\r\n"));

    m0_buf_reset(&out);                         /* HEAD: no body, the length kept */
    m0_body_reset(&b);
    struct m0_body_req head = {.http_minor = 1, .keepalive = 1, .head = 1};
    m0_body_commit(&b, &out, &h, &head, 7, 0);
    assert_int_equal(b.framing, M0_FRAME_NONE);
    assert_true(m0_body_enough(&b));
    size_t len = out.len;
    assert_int_equal(m0_body_emit(&b, &out, "1234567", 7), 7);   /* taken, not sent */
    assert_int_equal(out.len, len);
    assert_non_null(strstr(str(&out), "Content-Length: 7\r\n"));

    m0_buf_reset(&out);                         /* 204: no content whatever the length */
    m0_body_reset(&b);
    m0_head_reset(&h);
    m0_head_status(&h, 204, NULL, 0);
    m0_body_commit(&b, &out, &h, &http11, 3, 0);
    assert_int_equal(b.framing, M0_FRAME_NONE);
    assert_null(strstr(str(&out), "Content-Length"));
    m0_buf_free(&out);
    m0_head_free(&h);
}

static void test_never_past_a_promised_length(void **state)
{
    (void)state;
    struct m0_head h = {0};
    struct m0_body b;
    struct m0_buf out = {0};
    const char *why;
    head_200(&h);
    m0_head_add(&h, "Content-Length", 14, "4", 1, &why);
    m0_body_reset(&b);
    m0_body_commit(&b, &out, &h, &http11, -1, 0);
    size_t start = out.len;
    assert_int_equal(m0_body_emit(&b, &out, "ab", 2), 2);
    assert_false(m0_body_enough(&b));
    assert_int_equal(m0_body_emit(&b, &out, "cdef", 4), 2);    /* "ef" would start the next response */
    assert_true(b.truncated);
    assert_true(m0_body_enough(&b));
    assert_int_equal(out.len - start, 4);
    assert_int_equal(m0_body_finish(&b, &out), M0_OK);

    m0_buf_reset(&out);                         /* short of the promise: the verdict is M0_ERR */
    m0_body_reset(&b);
    m0_body_commit(&b, &out, &h, &http11, -1, 0);
    m0_body_emit(&b, &out, "ab", 2);
    assert_int_equal(m0_body_finish(&b, &out), M0_ERR);
    m0_buf_free(&out);
    m0_head_free(&h);
}

static void test_held_stream_head(void **state)
{
    (void)state;
    struct m0_head h = {0};
    struct m0_body b;
    struct m0_buf out = {0};
    const char *why;
    m0_head_reset(&h);
    m0_head_status(&h, 200, NULL, 0);
    m0_head_add(&h, "Content-Type", 12, "text/html", 9, &why);
    m0_head_add(&h, "X-Frame-Options", 15, "DENY", 4, &why);
    m0_head_add(&h, "Cache-Control", 13, "max-age=60", 10, &why);
    m0_body_reset(&b);
    assert_int_equal(m0_body_commit(&b, &out, &h, &http11, 10, 1), M0_OK);
    const char *s = str(&out);
    assert_non_null(strstr(s, "X-Frame-Options: DENY\r\n"));
    assert_null(strstr(s, "text/html"));
    assert_null(strstr(s, "max-age"));
    assert_non_null(strstr(s, "Content-Type: text/event-stream\r\n"));
    assert_non_null(strstr(s, "X-Accel-Buffering: no\r\n"));
    assert_non_null(strstr(s, "Connection: close\r\n"));
    assert_null(strstr(s, "Content-Length"));
    assert_null(strstr(s, "chunked"));
    assert_int_equal(b.framing, M0_FRAME_CLOSE);
    assert_false(b.keep);
    assert_true(b.hold);
    m0_buf_free(&out);
    m0_head_free(&h);
}

/* Item 10: an application's own reason phrase goes out as given (PEP 3333:
 * the status string is the application's); without one the registry's
 * phrase, and for an unregistered code an empty one after the SP. */
static void test_status_line_reason(void **state)
{
    (void)state;
    struct m0_head h = {0};
    m0_head_reset(&h);
    m0_head_status(&h, 422, "Whatever", 8);
    assert_string_equal(str(&h.lines), "HTTP/1.1 422 Whatever\r\n");
    m0_head_reset(&h);
    m0_head_status(&h, 422, NULL, 0);
    assert_string_equal(str(&h.lines), "HTTP/1.1 422 Unprocessable Content\r\n");
    m0_head_reset(&h);
    m0_head_status(&h, 599, NULL, 0);
    assert_string_equal(str(&h.lines), "HTTP/1.1 599 \r\n");
    m0_head_free(&h);
}

/* M0-Channel as a list (issue 18): OWS trimmed, empty elements and repeats
 * dropped, names joined by '\n'; a list longer than channel[] kept on the
 * heap (freed by reset); a bad name or a 33rd channel refused. */
static void test_channel_list(void **state)
{
    (void)state;
    struct m0_head h;
    memset(&h, 0, sizeof h);
    m0_head_reset(&h);
    const char *why = NULL;
    assert_int_equal(m0_head_add(&h, "M0-Channel", 10, "a, b ,a,,\tc", 11, &why), M0_OK);
    assert_string_equal(m0_head_channel(&h), "a\nb\nc");
    assert_int_equal(h.channel_len, 5);
    char list[32 * 21 + 8], want[32 * 21 + 8];
    size_t n = 0, w = 0;
    for (int i = 0; i < 32; i++) {
        n += (size_t)sprintf(list + n, "%schannel-number-%05d", i ? "," : "", i);
        w += (size_t)sprintf(want + w, "%schannel-number-%05d", i ? "\n" : "", i);
    }
    assert_int_equal(m0_head_add(&h, "M0-Channel", 10, list, n, &why), M0_OK);
    assert_string_equal(m0_head_channel(&h), want);
    assert_int_equal(h.channel_len, w);
    m0_head_reset(&h);
    assert_int_equal(h.channel_len, 0);
    n += (size_t)sprintf(list + n, ",x");
    why = NULL;
    assert_int_equal(m0_head_add(&h, "M0-Channel", 10, list, n, &why), M0_ERR);
    assert_non_null(why);
    assert_int_equal(m0_head_add(&h, "M0-Channel", 10, "ok, m0.reserved", 15, &why), M0_ERR);
    assert_int_equal(m0_head_add(&h, "M0-Channel", 10, " , ", 3, &why), M0_ERR);
    m0_head_free(&h);
}

/* Issue 32: M0-Presence (whom a hold counts for) and M0-Last-Event-ID
 * (where a view's stream starts) are read, bounded, and never sent on. */
static void test_presence_and_start_fields(void **state)
{
    (void)state;
    struct m0_head h;
    memset(&h, 0, sizeof h);
    m0_head_reset(&h);
    m0_head_status(&h, 200, NULL, 0);
    const char *why = NULL;
    assert_int_equal(m0_head_add(&h, "M0-Presence", 11, "alice", 5, &why), M0_OK);
    assert_string_equal(h.presence, "alice");
    assert_int_equal(h.presence_len, 5);
    assert_int_equal(m0_head_add(&h, "m0-last-event-id", 16, "42", 2, &why), M0_OK);
    assert_int_equal(h.resume_from, 42);
    assert_null(memmem(h.lines.data, h.lines.len, "M0-", 3));       /* never sent on */
    char sub[M0_HEAD_PRESENCE_MAX + 1];
    memset(sub, 'a', sizeof sub);
    assert_int_equal(m0_head_add(&h, "M0-Presence", 11, sub, M0_HEAD_PRESENCE_MAX, &why), M0_OK);
    assert_int_equal(h.presence_len, M0_HEAD_PRESENCE_MAX);
    why = NULL;
    assert_int_equal(m0_head_add(&h, "M0-Presence", 11, sub, M0_HEAD_PRESENCE_MAX + 1, &why), M0_ERR);
    assert_non_null(why);
    assert_int_equal(m0_head_add(&h, "M0-Last-Event-ID", 16, "x1", 2, &why), M0_ERR);
    assert_int_equal(m0_head_add(&h, "M0-Last-Event-ID", 16, "", 0, &why), M0_ERR);
    assert_int_equal(m0_head_add(&h, "M0-Last-Event-ID", 16, "99999999999999999999999", 23, &why), M0_ERR);
    m0_head_reset(&h);
    assert_int_equal(h.presence_len, 0);
    assert_int_equal(h.resume_from, 0);
    m0_head_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presence_and_start_fields),
        cmocka_unit_test(test_head_records_what_the_server_owns),
        cmocka_unit_test(test_channel_list),
        cmocka_unit_test(test_one_head_per_response),
        cmocka_unit_test(test_framing_choices),
        cmocka_unit_test(test_never_past_a_promised_length),
        cmocka_unit_test(test_held_stream_head),
        cmocka_unit_test(test_status_line_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
