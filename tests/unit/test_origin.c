/*
 * test_origin.c — origins of RFC 6454 (src/proto/origin.c): the grants'
 * same-origin check compares scheme, host and port, the port defaulted by
 * the scheme, and knows only http and https (issue 27 item 2).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "m0/origin.h"
#include "m0/types.h"

static int same(const char *origin, const char *host, int https)
{
    return m0_origin_same(origin, strlen(origin), host, strlen(host), https);
}

static void test_scheme_host_port(void **state)
{
    (void)state;
    assert_int_equal(same("http://example.com", "example.com", 0), 1);
    assert_int_equal(same("http://Example.COM", "example.com", 0), 1);     /* hosts: ASCII case-insensitive */
    assert_int_equal(same("HTTP://example.com", "example.com", 0), 1);
    assert_int_equal(same("http://127.0.0.1:8000", "127.0.0.1:8000", 0), 1);
    assert_int_equal(same("https://example.com", "example.com", 1), 1);
    /* The scheme the request arrived on decides (the cases). */
    assert_int_equal(same("https://127.0.0.1:8000", "127.0.0.1:8000", 0), 0);
    assert_int_equal(same("http://example.com", "example.com", 1), 0);
    assert_int_equal(same("evil://127.0.0.1:8000", "127.0.0.1:8000", 0), 0);
    assert_int_equal(same("x-scheme://127.0.0.1:8000", "127.0.0.1:8000", 0), 0);
    assert_int_equal(same("ws://127.0.0.1:8000", "127.0.0.1:8000", 0), 0);
    assert_int_equal(same("file://127.0.0.1:8000", "127.0.0.1:8000", 0), 0);
    /* Ports: the scheme's default when absent, on either side. */
    assert_int_equal(same("http://example.com:80", "example.com", 0), 1);
    assert_int_equal(same("http://example.com", "example.com:80", 0), 1);
    assert_int_equal(same("https://example.com:443", "example.com", 1), 1);
    assert_int_equal(same("https://example.com", "example.com:443", 1), 1);
    assert_int_equal(same("http://example.com:443", "example.com", 1), 0);
    assert_int_equal(same("http://example.com:8080", "example.com:8081", 0), 0);
    assert_int_equal(same("http://example.com:8080", "example.com", 0), 0);
    assert_int_equal(same("http://example.com", "example.com:", 0), 1);     /* Host: an empty port is the default */
    assert_int_equal(same("http://a.example.com", "example.com", 0), 0);
    assert_int_equal(same("http://example.co", "example.com", 0), 0);
    assert_int_equal(same("http://[::1]:8000", "[::1]:8000", 0), 1);
    assert_int_equal(same("http://[::1]", "[::1]:80", 0), 1);
    assert_int_equal(same("http://[::1]:8000", "[::2]:8000", 0), 0);
}

static void test_not_serialized_origins(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "null", "", "http://", "https://", "http:/example.com", "http//example.com", "//example.com",
        "http://example.com/", "http://example.com/x", "http://example.com?x", "http://example.com#x",
        "http://user@example.com", "http://user:pw@example.com", "http://example.com:", "http://example.com:0",
        "http://example.com:65536", "http://example.com:99999999999", "http://example.com:8a",
        "http://example.com:-1", "http://exa mple.com", "http://example.com ", " http://example.com",
        "http://example.com\r\nx", "http://[::1", "http://[]", "http://[::1]x", "http://:80",
        "http://example.com:80:80",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct m0_origin o;
        if (m0_origin_parse(bad[i], strlen(bad[i]), &o) != M0_ERR)
            fail_msg("parsed '%s'", bad[i]);
        assert_int_equal(same(bad[i], "example.com", 0), 0);
    }
}

static void test_parse_fields(void **state)
{
    (void)state;
    struct m0_origin o;
    assert_int_equal(m0_origin_parse("https://h.example:8443", 22, &o), M0_OK);
    assert_int_equal(o.https, 1);
    assert_int_equal(o.host_len, 9);
    assert_memory_equal(o.host, "h.example", 9);
    assert_int_equal(o.port, 8443);
    assert_int_equal(m0_origin_parse("http://h", 8, &o), M0_OK);
    assert_int_equal(o.https, 0);
    assert_int_equal(o.port, 80);
    assert_int_equal(m0_origin_parse("http://example.com:65535", 24, &o), M0_OK);
    assert_int_equal(o.port, 65535);
    /* The length bounds the parse: no NUL needed. */
    assert_int_equal(m0_origin_parse("http://hostXYZ", 11, &o), M0_OK);
    assert_int_equal(o.host_len, 4);
    assert_int_equal(m0_origin_of_host("h:8000", 6, 1, &o), M0_OK);
    assert_int_equal(o.https, 1);
    assert_int_equal(o.port, 8000);
    assert_int_equal(m0_origin_of_host("", 0, 0, &o), M0_ERR);
    assert_int_equal(m0_origin_of_host("h/x", 3, 0, &o), M0_ERR);
    assert_int_equal(m0_origin_of_host("u@h", 3, 0, &o), M0_ERR);
    assert_int_equal(m0_origin_same(NULL, 0, "h", 1, 0), 0);
    assert_int_equal(m0_origin_same("http://h", 8, NULL, 0, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scheme_host_port),
        cmocka_unit_test(test_not_serialized_origins),
        cmocka_unit_test(test_parse_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
