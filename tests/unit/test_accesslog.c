/*
 * test_accesslog.c — --access-log-format (src/proto/accesslog.c): gunicorn's
 * atoms, the default line, JSON, escaping, refusals, and log times in UTC
 * whatever TZ the process has (src/base/log.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "m0/accesslog.h"
#include "m0/http.h"
#include "m0/log.h"
#include "m0/log_text.h"

static struct m0_req req;
static struct m0_hdr hdrs[8];

static void add(const char *name, const char *value)
{
    hdrs[req.nhdrs] = (struct m0_hdr){name, value, (uint32_t)strlen(name), (uint32_t)strlen(value)};
    req.nhdrs++;
}

static struct m0_access sample(void)
{
    memset(&req, 0, sizeof req);
    req.method = "GET";
    req.method_len = 3;
    req.target = "/a/b?x=1";
    req.target_len = 8;
    req.path = "/a/b";
    req.path_len = 4;
    req.query = "x=1";
    req.query_len = 3;
    req.http_major = 1;
    req.http_minor = 1;
    req.hdrs = hdrs;
    add("User-Agent", "curl/8 \"quoted\"");
    add("Referer", "http://r/");
    add("Authorization", "Basic Ym9iOnNlY3JldA==");   /* bob:secret */
    add("X-Request-Id", "abc123");
    static const char head[] = "Content-Type: text/plain\r\nX-Cache: HIT\r\n";
    return (struct m0_access){.addr = "192.0.2.1", .req = &req, .resp_head = head,
                              .resp_head_len = sizeof head - 1, .status = 200, .bytes = 13,
                              .duration_us = 1234567};
}

static const char *render(const char *fmt, const struct m0_access *a)
{
    static char line[2048];
    char err[200];
    assert_int_equal(m0_access_compile(fmt, err, sizeof err), M0_OK);
    size_t n = m0_access_render(line, sizeof line, a);
    assert_true(n > 0 && line[n - 1] == '\n');
    line[n - 1] = '\0';
    return line;
}

static void test_atoms(void **state)
{
    (void)state;
    struct m0_access a = sample();
    assert_string_equal(render("%(h)s %(l)s %(u)s \"%(r)s\" %(s)s %(b)s", &a),
                        "192.0.2.1 - bob \"GET /a/b?x=1 HTTP/1.1\" 200 13");
    assert_string_equal(render("%(m)s %(U)s %(q)s %(H)s %(B)s", &a), "GET /a/b x=1 HTTP/1.1 13");
    assert_string_equal(render("%(T)s %(M)s %(D)s %(L)s", &a), "1 1234 1234567 1.234567");
    assert_string_equal(render("\"%(f)s\" \"%(a)s\"", &a), "\"http://r/\" \"curl/8 \\x22quoted\\x22\"");
    assert_string_equal(render("%({x-request-id}i)s %({X-Missing}i)s %({x-cache}o)s 100%%", &a), "abc123 - HIT 100%");
    const char *t = render("%(t)s", &a);
    assert_int_equal(strlen(t), strlen("[29/Nov/2026:13:20:00 +0000]"));
    assert_non_null(strstr(t, " +0000]"));
    char pid[32];
    snprintf(pid, sizeof pid, "<%d>", (int)getpid());
    assert_string_equal(render("%(p)s", &a), pid);
    a.bytes = 0;
    assert_string_equal(render("%(b)s %(B)s", &a), "- 0");
}

static void test_default_line(void **state)
{
    (void)state;
    struct m0_access a = sample();
    const char *l = render(NULL, &a);
    assert_true(strncmp(l, "192.0.2.1 - - [", 15) == 0);
    assert_non_null(strstr(l, "] \"GET /a/b?x=1 HTTP/1.1\" 200 13 \"http://r/\" \"curl/8 \\x22quoted\\x22\" 1.234567"));
    /* An error before the request line: dashes, no crash. */
    struct m0_req empty = {0};
    struct m0_access e = {.addr = "", .req = &empty, .status = 400};
    l = render("", &e);
    assert_non_null(strstr(l, "- - - ["));
    assert_non_null(strstr(l, "] \"-\" 400 0 \"-\" \"-\" 0.000000"));
    /* Issue 23 item 11: the version is the one received; a request rejected
     * before its version was read has none (not "HTTP/1.0"). */
    struct m0_access v = sample();
    req.http_minor = 0;
    assert_string_equal(render("%(r)s %(H)s", &v), "GET /a/b?x=1 HTTP/1.0 HTTP/1.0");
    req.http_major = 0;
    assert_string_equal(render("%(r)s %(H)s", &v), "GET /a/b?x=1 -");
    assert_non_null(strstr(render("json", &v), "\"protocol\":null"));
}

static void test_json(void **state)
{
    (void)state;
    struct m0_access a = sample();
    hdrs[0].value = "ua\x01\xe9";
    hdrs[0].value_len = 4;
    const char *l = render("json", &a);
    assert_true(l[0] == '{' && l[strlen(l) - 1] == '}');
    assert_non_null(strstr(l, "\"remote_addr\":\"192.0.2.1\""));
    assert_non_null(strstr(l, "\"method\":\"GET\",\"path\":\"/a/b\",\"query\":\"x=1\",\"protocol\":\"HTTP/1.1\""));
    assert_non_null(strstr(l, "\"status\":200,\"bytes\":13"));
    assert_non_null(strstr(l, "\"user_agent\":\"ua\\u0001\\u00e9\""));
    assert_non_null(strstr(l, "\"duration_us\":1234567"));
    assert_non_null(strstr(l, "Z\""));          /* ISO 8601 UTC */
}

static void test_client_cannot_forge_a_line(void **state)
{
    (void)state;
    struct m0_access a = sample();
    req.target = "/x\r\n127.0.0.1 - - [fake]";
    req.target_len = (uint32_t)strlen(req.target);
    const char *l = render("%(r)s", &a);
    assert_null(strchr(l, '\n'));
    assert_null(strchr(l, '\r'));
    assert_non_null(strstr(l, "\\x0d\\x0a"));
}

/* Issue 18: a grant travels as ?token=...: its value never reaches the
 * log, in the request line, %(q)s or the JSON query; RFC 6750's
 * access_token neither. Other parameters are kept as they were. */
static void test_token_in_query_redacted(void **state)
{
    (void)state;
    struct m0_access a = sample();
    req.target = "/rt/sse?a=1&token=eyJh.eyJz.c2ln&xtoken=keep&access_token=sekret";
    req.target_len = (uint32_t)strlen(req.target);
    req.query = strchr(req.target, '?') + 1;
    req.query_len = (uint32_t)strlen(req.query);
    static const char want[] = "a=1&token=REDACTED&xtoken=keep&access_token=REDACTED";
    const char *l = render("%(r)s|%(q)s", &a);
    assert_null(strstr(l, "eyJ"));
    assert_null(strstr(l, "sekret"));
    char expect[256];
    snprintf(expect, sizeof expect, "GET /rt/sse?%s HTTP/1.1|%s", want, want);
    assert_string_equal(l, expect);
    l = render(NULL, &a);
    assert_null(strstr(l, "eyJ"));
    assert_non_null(strstr(l, "\"GET /rt/sse?a=1&token=REDACTED&"));
    l = render("json", &a);
    assert_null(strstr(l, "eyJ"));
    assert_non_null(strstr(l, "\"query\":\"a=1&token=REDACTED&xtoken=keep&access_token=REDACTED\""));
    /* The first parameter, a bare name, an empty value, no query. */
    req.target = "/s?token=abc";
    req.target_len = (uint32_t)strlen(req.target);
    assert_string_equal(render("%(r)s", &a), "GET /s?token=REDACTED HTTP/1.1");
    req.target = "/s?token&token=";
    req.target_len = (uint32_t)strlen(req.target);
    assert_string_equal(render("%(r)s", &a), "GET /s?token&token=REDACTED HTTP/1.1");
    req.target = "/token=abc";
    req.target_len = (uint32_t)strlen(req.target);
    assert_string_equal(render("%(r)s", &a), "GET /token=abc HTTP/1.1");     /* a path, not a query */
    /* Escaping still applies around a redaction. */
    req.query = "x=\"&token=t\r\n";
    req.query_len = (uint32_t)strlen(req.query);
    assert_string_equal(render("%(q)s", &a), "x=\\x22&token=REDACTED");
}

/* Issue 27: the credentials of a header atom (Authorization's, the grant
 * cookie's in Cookie and Set-Cookie) and a percent-encoded token name are
 * redacted by the error log's rule (log_text.h). */
static void test_credentials_redacted(void **state)
{
    (void)state;
    struct m0_access a = sample();
    m0_log_secret_cookie("m0grant");
    add("Cookie", "theme=dark; m0grant=eyJh.eyJz.c2ln; lang=en");
    static const char head[] = "Set-Cookie: m0grant=eyJh.eyJz.c2ln; Path=/; HttpOnly\r\nX-Cache: HIT\r\n";
    a.resp_head = head;
    a.resp_head_len = sizeof head - 1;
    const char *l = render("%({authorization}i)s|%({Cookie}i)s|%({set-cookie}o)s|%(u)s", &a);
    assert_string_equal(l, "Basic REDACTED|theme=dark; m0grant=REDACTED; lang=en|m0grant=REDACTED; Path=/; HttpOnly|bob");
    hdrs[2].value = "Bearer eyJh.eyJz.c2ln";
    hdrs[2].value_len = (uint32_t)strlen(hdrs[2].value);
    assert_string_equal(render("%({Authorization}i)s", &a), "Bearer REDACTED");
    m0_log_secret_cookie(NULL);
    assert_string_equal(render("%({Cookie}i)s", &a), "theme=dark; m0grant=eyJh.eyJz.c2ln; lang=en");
    req.target = "/s?%74oken=abc&access%5Ftoken=def&tok%65n2=keep";
    req.target_len = (uint32_t)strlen(req.target);
    assert_string_equal(render("%(r)s", &a), "GET /s?%74oken=REDACTED&access%5Ftoken=REDACTED&tok%65n2=keep HTTP/1.1");
}

static void test_refusals(void **state)
{
    (void)state;
    char err[200];
    static const char *const bad[] = {"%(zz)s", "%(h)d", "%(h", "%h", "%({}i)s", "%({x}e)s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(m0_access_compile(bad[i], err, sizeof err), M0_ERR);
        assert_non_null(strstr(err, "--access-log-format"));
        assert_null(strchr(err, '\n'));
    }
}

static void test_stamp_ignores_tz(void **state)
{
    (void)state;
    /* Django sets TZ in a worker: the log must not follow it. */
    char a[40], b[40];
    setenv("TZ", "America/Chicago", 1);
    tzset();
    m0_log_stamp(a, sizeof a, 0);
    setenv("TZ", "Asia/Tokyo", 1);
    tzset();
    m0_log_stamp(b, sizeof b, 0);
    assert_non_null(strstr(a, "+0000"));
    assert_non_null(strstr(b, "+0000"));
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char want[16];
    strftime(want, sizeof want, "%Y-%m-%d %H", &tm);
    assert_true(strncmp(b, want, strlen(want)) == 0 || tm.tm_min == 0);   /* same UTC hour (or it just turned) */
}

/* A held connection's line (issue 27 item 15): what m0_access_keep kept
 * renders as the request did, once the request's memory is gone; only the
 * fields the format reads are kept. */
static void test_a_kept_line_renders_as_the_request_did(void **state)
{
    (void)state;
    static const char *const fmts[] = {
        "", "json", "%(h)s %(u)s \"%(r)s\" %(m)s %(U)s %(q)s %(H)s \"%(f)s\" \"%(a)s\" %({x-request-id}i)s "
        "%({x-cache}o)s %({Content-Type}o)s %(s)s %(B)s %(D)s"};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        struct m0_access a = sample();
        char want[2048];
        snprintf(want, sizeof want, "%s", render(fmts[i], &a));
        struct m0_access_kept *k = m0_access_keep(&a);
        /* The request and its head are gone (reused): the kept copy stands. */
        char addr[] = "192.0.2.1";
        a.addr = addr;
        struct m0_access b = {.status = a.status, .bytes = a.bytes, .duration_us = a.duration_us};
        memset(&req, 0x5a, sizeof req);
        memset(hdrs, 0x5a, sizeof hdrs);
        memset(addr, 'x', sizeof addr - 1);
        m0_access_kept_view(k, &b);
        if (i == 0)
            assert_string_equal(strstr(render(fmts[i], &b), "] "), strstr(want, "] "));    /* after the time */
        else if (i == 2)
            assert_string_equal(render(fmts[i], &b), want);
        else
            assert_string_equal(strstr(render(fmts[i], &b), "\"remote_addr\""), strstr(want, "\"remote_addr\""));
        m0_access_kept_free(k);
    }
    /* The response fields: replaced by keep_head (the hold's head), none
     * for a format that reads none. */
    struct m0_access a = sample();
    struct m0_access_kept *k = m0_access_keep(&(struct m0_access){.addr = a.addr, .req = a.req});
    m0_access_keep_head(k, a.resp_head, a.resp_head_len);
    struct m0_access b = {0};
    m0_access_kept_view(k, &b);
    assert_string_equal(render("%({x-cache}o)s %({x-request-id}i)s %({referer}i)s", &b), "HIT abc123 http://r/");
    m0_access_keep_head(k, NULL, 0);
    b = (struct m0_access){0};
    m0_access_kept_view(k, &b);
    assert_null(b.resp_head);
    m0_access_kept_free(k);
    /* A request rejected before its method: "-" as before. */
    k = m0_access_keep(&(struct m0_access){0});
    b = (struct m0_access){.status = 400};
    m0_access_kept_view(k, &b);
    assert_string_equal(render("%(h)s \"%(r)s\" %(s)s", &b), "- \"-\" 400");
    m0_access_kept_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atoms),
        cmocka_unit_test(test_default_line),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_client_cannot_forge_a_line),
        cmocka_unit_test(test_token_in_query_redacted),
        cmocka_unit_test(test_credentials_redacted),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_stamp_ignores_tz),
        cmocka_unit_test(test_a_kept_line_renders_as_the_request_did),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
