/*
 * test_response.c — response framing (RFC 9112 §6.3), error pages, chunk
 * framing, the Date format, and the byte buffer and arena they rely on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "m0/buf.h"
#include "m0/response.h"

static char *finish(struct m0_head_info hi, enum m0_framing *f, int *keep)
{
    static struct m0_buf b;
    m0_buf_reset(&b);
    *f = m0_head_finish(&b, &hi, keep);
    m0_buf_append(&b, "", 1);
    return b.data;
}

static const struct m0_head_info base = {
    .status = 200, .http_minor = 1, .keepalive = 1, .content_length = -1, .body_len = -1,
};

static void test_known_length_gets_content_length(void **state)
{
    (void)state;
    struct m0_head_info hi = base;
    enum m0_framing f;
    int keep;
    hi.body_len = 13;
    char *s = finish(hi, &f, &keep);
    assert_int_equal(f, M0_FRAME_LENGTH);
    assert_true(keep);
    assert_non_null(strstr(s, "Content-Length: 13\r\n"));
    assert_non_null(strstr(s, "Server: m0serve\r\n"));
    assert_non_null(strstr(s, "Date: "));
    assert_null(strstr(s, "Connection"));
    assert_string_equal(s + strlen(s) - 4, "\r\n\r\n");
}

static void test_unknown_length_is_chunked_on_11_and_close_on_10(void **state)
{
    (void)state;
    struct m0_head_info hi = base;
    enum m0_framing f;
    int keep;
    char *s = finish(hi, &f, &keep);
    assert_int_equal(f, M0_FRAME_CHUNKED);
    assert_non_null(strstr(s, "Transfer-Encoding: chunked\r\n"));
    assert_true(keep);
    hi.http_minor = 0;
    s = finish(hi, &f, &keep);
    assert_int_equal(f, M0_FRAME_CLOSE);
    assert_false(keep);
    assert_non_null(strstr(s, "Connection: close\r\n"));
    assert_null(strstr(s, "Transfer-Encoding"));
}

static void test_http10_keepalive_is_announced(void **state)
{
    (void)state;
    struct m0_head_info hi = base;
    enum m0_framing f;
    int keep;
    hi.http_minor = 0;
    hi.body_len = 2;
    char *s = finish(hi, &f, &keep);
    assert_true(keep);
    assert_non_null(strstr(s, "Connection: keep-alive\r\n"));
}

static void test_bodiless_statuses_and_head(void **state)
{
    (void)state;
    struct m0_head_info hi = base;
    enum m0_framing f;
    int keep;
    hi.status = 204;
    char *s = finish(hi, &f, &keep);
    assert_int_equal(f, M0_FRAME_NONE);
    assert_null(strstr(s, "Content-Length"));
    assert_null(strstr(s, "Transfer-Encoding"));
    hi.status = 200;
    hi.head = 1;
    hi.content_length = 42;
    s = finish(hi, &f, &keep);
    assert_int_equal(f, M0_FRAME_NONE);
    assert_non_null(strstr(s, "Content-Length: 42\r\n"));
    /* HEAD with the body GET would send: its length. */
    hi.content_length = -1;
    hi.body_len = 81;
    s = finish(hi, &f, &keep);
    assert_int_equal(f, M0_FRAME_NONE);
    assert_non_null(strstr(s, "Content-Length: 81\r\n"));
    /* HEAD with an empty body (the framework dropped it): no length at all,
     * never a false 0 (RFC 9110 §8.6). */
    hi.body_len = 0;
    s = finish(hi, &f, &keep);
    assert_int_equal(f, M0_FRAME_NONE);
    assert_null(strstr(s, "Content-Length"));
    assert_null(strstr(s, "Transfer-Encoding"));
}

static void test_app_close_and_supplied_headers(void **state)
{
    (void)state;
    struct m0_head_info hi = base;
    enum m0_framing f;
    int keep;
    hi.app_close = 1;
    hi.has_date = hi.has_server = 1;
    hi.content_length = 0;
    char *s = finish(hi, &f, &keep);
    assert_false(keep);
    assert_non_null(strstr(s, "Connection: close\r\n"));
    assert_null(strstr(s, "Date:"));
    assert_null(strstr(s, "Server:"));
}

static void test_error_response_is_complete(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    m0_error_response(&b, 431, "Too many", 1, 0);
    m0_buf_append(&b, "", 1);
    assert_memory_equal(b.data, "HTTP/1.1 431 Request Header Fields Too Large\r\n", 46);
    assert_non_null(strstr(b.data, "Connection: close\r\n"));
    char *body = strstr(b.data, "\r\n\r\n") + 4;
    char want[48];
    snprintf(want, sizeof want, "Content-Length: %zu\r\n", strlen(body));
    assert_non_null(strstr(b.data, want));
    m0_buf_free(&b);
}

/* Item 10: the registry's phrases, never "Unknown"; an unregistered code
 * gets an empty phrase and keeps the SP before it (RFC 9112 §4). */
static void test_reason_phrases_are_the_registrys(void **state)
{
    (void)state;
    static const struct {
        int status;
        const char *reason;
    } want[] = {
        {103, "Early Hints"}, {203, "Non-Authoritative Information"}, {205, "Reset Content"},
        {207, "Multi-Status"}, {208, "Already Reported"}, {226, "IM Used"},
        {300, "Multiple Choices"}, {305, "Use Proxy"}, {308, "Permanent Redirect"},
        {402, "Payment Required"}, {406, "Not Acceptable"}, {407, "Proxy Authentication Required"},
        {410, "Gone"}, {412, "Precondition Failed"}, {413, "Content Too Large"},
        {415, "Unsupported Media Type"}, {421, "Misdirected Request"}, {422, "Unprocessable Content"},
        {423, "Locked"}, {424, "Failed Dependency"}, {425, "Too Early"}, {428, "Precondition Required"},
        {429, "Too Many Requests"}, {431, "Request Header Fields Too Large"},
        {451, "Unavailable For Legal Reasons"}, {506, "Variant Also Negotiates"},
        {507, "Insufficient Storage"}, {508, "Loop Detected"}, {510, "Not Extended"},
        {511, "Network Authentication Required"},
        /* unregistered, or registered as "(Unused)": no phrase */
        {209, ""}, {306, ""}, {418, ""}, {420, ""}, {499, ""}, {509, ""}, {599, ""},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_string_equal(m0_status_reason(want[i].status), want[i].reason);
    for (int st = 100; st < 600; st++)
        assert_null(strstr(m0_status_reason(st), "Unknown"));

    struct m0_buf b = {0};
    m0_error_response(&b, 599, NULL, 1, 1);
    m0_buf_append(&b, "", 1);
    assert_memory_equal(b.data, "HTTP/1.1 599 \r\n", 14);
    m0_buf_reset(&b);
    m0_error_response(&b, 412, NULL, 0, 1);
    m0_buf_append(&b, "", 1);
    assert_memory_equal(b.data, "HTTP/1.1 412 Precondition Failed\r\n", 34);
    m0_buf_free(&b);
}

static void test_date_is_imf_fixdate(void **state)
{
    (void)state;
    const char *d = m0_http_date();
    assert_int_equal(strlen(d), 29);
    assert_string_equal(d + 25, " GMT");
    assert_int_equal(d[3], ',');
}

static void test_chunk_framing(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    m0_buf_append_chunk(&b, "hello world, this is 26 b!", 26);
    assert_int_equal(b.len, 2 + 2 + 26 + 2);
    assert_memory_equal(b.data, "1a\r\nhello", 9);
    assert_memory_equal(b.data + b.len - 2, "\r\n", 2);
    m0_buf_free(&b);
}

static void test_buf_consume_compact_and_arena(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    m0_buf_printf(&b, "%s-%d", "abc", 42);
    assert_int_equal(m0_buf_unread(&b), 6);
    m0_buf_consume(&b, 4);
    assert_memory_equal(b.data + b.off, "42", 2);
    m0_buf_compact(&b);
    assert_int_equal(b.off, 0);
    assert_memory_equal(b.data, "42", 2);
    m0_buf_consume(&b, 2);
    assert_int_equal(b.len, 0);
    m0_buf_free(&b);
    assert_null(b.data);

    struct m0_arena a = {0};
    char *s = m0_arena_strndup(&a, "hello", 5);
    void *big = m0_arena_alloc(&a, 100000);
    assert_string_equal(s, "hello");
    assert_non_null(big);
    m0_arena_reset(&a);
    assert_int_equal(a.used, 0);
    m0_arena_free(&a);
    assert_null(a.head);
}

/* The decimal writer that replaced printf for lengths and statuses. */
static void test_decimal_lengths_and_statuses(void **state)
{
    (void)state;
    static const uint64_t vals[] = {0, 7, 10, 99, 100, 12345, 4294967296ull, UINT64_MAX};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char got[21], want[32];
        snprintf(want, sizeof want, "%llu", (unsigned long long)vals[i]);
        assert_int_equal(m0_u64_dec(got, vals[i]), strlen(want));
        assert_string_equal(got, want);
    }
    struct m0_head_info hi = base;
    enum m0_framing f;
    int keep;
    hi.content_length = 1234567890123ll;
    assert_non_null(strstr(finish(hi, &f, &keep), "\r\nContent-Length: 1234567890123\r\n"));
    hi = base;
    hi.body_len = 0;
    assert_non_null(strstr(finish(hi, &f, &keep), "\r\nContent-Length: 0\r\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decimal_lengths_and_statuses),
        cmocka_unit_test(test_known_length_gets_content_length),
        cmocka_unit_test(test_unknown_length_is_chunked_on_11_and_close_on_10),
        cmocka_unit_test(test_http10_keepalive_is_announced),
        cmocka_unit_test(test_bodiless_statuses_and_head),
        cmocka_unit_test(test_app_close_and_supplied_headers),
        cmocka_unit_test(test_error_response_is_complete),
        cmocka_unit_test(test_reason_phrases_are_the_registrys),
        cmocka_unit_test(test_date_is_imf_fixdate),
        cmocka_unit_test(test_chunk_framing),
        cmocka_unit_test(test_buf_consume_compact_and_arena),
    };
    return cmocka_run_group_tests_name("response", tests, NULL, NULL);
}
