/*
 * test_log_text.c — client text in the error log (src/base/log_text.c,
 * issue 27 items 3 and 5): a target's token and access_token, a header's
 * credentials, and control bytes escaped so that no value starts a line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "m0/log_text.h"

static char buf[M0_LOG_TEXT_MAX];

static const char *target(const char *t)
{
    return m0_log_target(buf, sizeof buf, t, strlen(t));
}

static const char *text(const char *s, size_t n)
{
    return m0_log_text(buf, sizeof buf, s, n);
}

static const char *header(const char *name, const char *v)
{
    return m0_log_header(buf, sizeof buf, name, strlen(name), v, strlen(v));
}

static void test_target_redacts_tokens(void **state)
{
    (void)state;
    assert_string_equal(target("/rt/sse?token=eyJh.eyJz.c2ln"), "/rt/sse?token=REDACTED");
    assert_string_equal(target("/x?a=1&access_token=abc&b=2"), "/x?a=1&access_token=REDACTED&b=2");
    assert_string_equal(target("/x?token=a&token=b"), "/x?token=REDACTED&token=REDACTED");
    assert_string_equal(target("/x?token=&token"), "/x?token=REDACTED&token");
    assert_string_equal(target("/x?xtoken=1&token2=2&Token=3"), "/x?xtoken=1&token2=2&Token=3");
    assert_string_equal(target("/x?%74oken=1&%74%6f%6B%65%6E=2&access%5ftoken=3"),
                        "/x?%74oken=REDACTED&%74%6f%6B%65%6E=REDACTED&access%5ftoken=REDACTED");
    assert_string_equal(target("/token=abc"), "/token=abc");               /* a path, not a query */
    assert_string_equal(target("/p"), "/p");
    assert_string_equal(target("/p?"), "/p?");
    assert_string_equal(m0_log_target(buf, sizeof buf, NULL, 0), "-");
    assert_string_equal(m0_log_request(buf, sizeof buf, "GET", 3, "/rt/ws?token=abc&x=\n", 20),
                        "GET /rt/ws?token=REDACTED&x=\\n");
    assert_string_equal(m0_log_request(buf, sizeof buf, NULL, 0, NULL, 0), "- -");
    /* The length bounds it: no NUL needed, and the query's secret ends there. */
    assert_string_equal(m0_log_target(buf, sizeof buf, "/x?token=abcdef", 11), "/x?token=REDACTED");
}

static void test_query_secret_spans(void **state)
{
    (void)state;
    const char q[] = "a=1&token=xy&b&access_token=z";
    size_t s0, s1;
    assert_int_equal(m0_log_query_secret(q, sizeof q - 1, 0, &s0, &s1), 1);
    assert_int_equal(s0, 10);
    assert_int_equal(s1, 12);
    assert_int_equal(m0_log_query_secret(q, sizeof q - 1, s1, &s0, &s1), 1);
    assert_memory_equal(q + s0, "z", s1 - s0);
    assert_int_equal(m0_log_query_secret(q, sizeof q - 1, s1, &s0, &s1), 0);
    assert_int_equal(m0_log_query_secret("", 0, 0, &s0, &s1), 0);
}

static void test_control_bytes_escaped(void **state)
{
    (void)state;
    /* A sub holding a newline cannot forge the next line. */
    const char sub[] = "alice\n[2026-12-05 00:00:00 +0000] [1] [ERROR] forged";
    const char *e = text(sub, sizeof sub - 1);
    assert_null(strchr(e, '\n'));
    assert_string_equal(e, "alice\\n[2026-12-05 00:00:00 +0000] [1] [ERROR] forged");
    assert_string_equal(text("a\rb\tc\x01\x1f\x7f\\d", 10), "a\\rb\\tc\\x01\\x1f\\x7f\\\\d");
    assert_string_equal(text("caf\xc3\xa9", 5), "caf\xc3\xa9");          /* UTF-8 kept */
    char nul[3] = {'a', 0, 'b'};
    assert_string_equal(text(nul, 3), "a\\x00b");
    assert_string_equal(text(NULL, 0), "-");
    assert_string_equal(target("/a\nb?token=x\ny&c=\x1b"), "/a\\nb?token=REDACTED&c=\\x1b");
    for (int c = 0; c < 256; c++) {
        char in = (char)c;
        const char *o = text(&in, 1);
        for (const char *p = o; *p; p++)
            assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
    }
}

static void test_cut_never_splits_an_escape(void **state)
{
    (void)state;
    char small[12];
    assert_string_equal(m0_log_text(small, sizeof small, "abcdefghijklmnop", 16), "abcdefgh...");
    assert_string_equal(m0_log_text(small, sizeof small, "abcdefg\nhij", 11), "abcdefg...");
    assert_string_equal(m0_log_text(small, sizeof small, "abcdefgh", 8), "abcdefgh");
    assert_string_equal(m0_log_target(small, sizeof small, "/?token=abcdef", 14), "/?token=...");
    char tiny[4];
    assert_string_equal(m0_log_text(tiny, sizeof tiny, "abcdef", 6), "...");
    /* A long target is cut, and its token never shows, cut or not. */
    char long_target[2000];
    memset(long_target, 'a', sizeof long_target);
    long_target[0] = '/';
    memcpy(long_target + 400, "?x=1&token=SECRET&", 18);
    const char *o = m0_log_target(buf, sizeof buf, long_target, sizeof long_target);
    assert_int_equal(strlen(o), sizeof buf - 1);
    assert_string_equal(o + strlen(o) - 3, "...");
    assert_non_null(strstr(o, "&token=REDACTED"));
    assert_null(strstr(o, "SECRET"));
    memcpy(long_target + 400, "aaaaaaaaaaaaaaaaaa", 18);
    memcpy(long_target + 1900, "?token=SECRET", 13);
    o = m0_log_target(buf, sizeof buf, long_target, sizeof long_target);
    assert_null(strstr(o, "SECRET"));
    assert_null(strstr(o, "token"));
}

static void test_header_credentials(void **state)
{
    (void)state;
    assert_string_equal(header("Authorization", "Bearer eyJh.eyJz.c2ln"), "Bearer REDACTED");
    assert_string_equal(header("authorization", "Basic Ym9iOnNlY3JldA=="), "Basic REDACTED");
    assert_string_equal(header("Proxy-Authorization", "Digest a=1, b=2"), "Digest REDACTED");
    assert_string_equal(header("Authorization", "rawapikey"), "REDACTED");
    assert_string_equal(header("User-Agent", "curl/8\n"), "curl/8\\n");
    m0_log_secret_cookie(NULL);
    assert_string_equal(header("Cookie", "m0g=abc; x=1"), "m0g=abc; x=1");
    m0_log_secret_cookie("m0g");
    assert_string_equal(header("Cookie", "m0g=abc; x=1"), "m0g=REDACTED; x=1");
    assert_string_equal(header("cookie", "a=1;m0g=abc;m0g=def"), "a=1;m0g=REDACTED;m0g=REDACTED");
    assert_string_equal(header("Cookie", "xm0g=abc; m0gx=1; m0g="), "xm0g=abc; m0gx=1; m0g=REDACTED");
    assert_string_equal(header("Set-Cookie", "m0g=abc; Path=/; Max-Age=60"), "m0g=REDACTED; Path=/; Max-Age=60");
    assert_string_equal(header("Set-Cookie", "other=abc; m0g=1"), "other=abc; m0g=1");   /* an attribute */
    assert_string_equal(header("X-Cookie", "m0g=abc"), "m0g=abc");
    m0_log_secret_cookie(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_target_redacts_tokens),
        cmocka_unit_test(test_query_secret_spans),
        cmocka_unit_test(test_control_bytes_escaped),
        cmocka_unit_test(test_cut_never_splits_an_escape),
        cmocka_unit_test(test_header_credentials),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
