/*
 * test_static.c — static files without a socket: the shared traversal
 * table (tests/cases/static.tsv) through the resolver and the whole
 * m0_static_respond, with both resolvers; Range, conditional requests,
 * Accept-Encoding, HTTP dates, MIME types, HEAD, 405, the index option.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <cmocka.h>

#include "m0/http.h"
#include "m0/static.h"

static const struct m0_limits lim = {
    .max_target = 8192, .max_header_bytes = 16384, .max_headers = 100,
    .max_body = 1048576, .body_mem = 1024 * 1024,
};

static char tmp[256];      /* the fixture's parent directory */
static char root[300];     /* the static root */

/* ------------------------------------------------------ the shared table */

struct scase {
    char name[64];
    char status[64];
    char path[512];
    char body[256];
};

static struct scase cases[256];
static int ncases;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Read static.tsv: build its fixture under root, keep its cases. */
static void load_table(void)
{
    FILE *f = fopen("../cases/static.tsv", "r");
    assert_non_null(f);
    char line[2048];
    ncases = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *field[4] = {0};
        int nf = 0;
        char *p = line;
        while (nf < 4) {
            field[nf++] = p;
            char *tab = strchr(p, '\t');
            if (tab == NULL)
                break;
            *tab = '\0';
            p = tab + 1;
        }
        char full[1024];
        if (line[0] == '@') {
            snprintf(full, sizeof full, "%s/%s", strcmp(field[0], "@outside") == 0 ? tmp : root, field[1]);
            if (strcmp(field[0], "@dir") == 0)
                assert_int_equal(mkdir(full, 0755), 0);
            else if (strcmp(field[0], "@file") == 0 || strcmp(field[0], "@outside") == 0)
                write_file(full, field[2]);
            else if (strcmp(field[0], "@symlink") == 0)
                assert_int_equal(symlink(field[2], full), 0);
            else if (strcmp(field[0], "@fifo") == 0)
                assert_int_equal(mkfifo(full, 0644), 0);
            else
                fail_msg("unknown fixture line %s", field[0]);
            continue;
        }
        assert_int_equal(nf, 4);
        assert_true(ncases < (int)(sizeof cases / sizeof cases[0]));
        struct scase *c = &cases[ncases++];
        snprintf(c->name, sizeof c->name, "%s", field[0]);
        snprintf(c->status, sizeof c->status, "%s", field[1]);
        snprintf(c->path, sizeof c->path, "%s", strcmp(field[2], "-") == 0 ? "" : field[2]);
        snprintf(c->body, sizeof c->body, "%s", field[3]);
    }
    fclose(f);
}

/* The expected status of c under resolver r. */
static int expected(const struct scase *c, enum m0_static_resolver r)
{
    const char *want = r == M0_RESOLVE_OPENAT2 ? "openat2=" : "walk=";
    const char *p = strstr(c->status, want);
    return p != NULL ? atoi(p + strlen(want)) : atoi(c->status);
}

/* ------------------------------------------------------------- requests */

struct answer {
    int status;
    char head[4096];
    char body[1 << 17];
    size_t body_len;
    int file;            /* the body came as a file range */
};

static struct m0_req req;
static struct m0_http http;

static void parse(const char *raw)
{
    m0_req_init(&req);
    m0_http_init(&http, &req, &lim);
    size_t n = strlen(raw), used = 0, off = 0;
    for (int guard = 0; guard < 10; guard++) {
        int rc = m0_http_feed(&http, raw + off, n - off, &used);
        off += used;
        if (rc == M0_DONE)
            return;
        assert_true(rc == M0_OK || rc == M0_AGAIN);
    }
    fail_msg("request not parsed: %s", raw);
}

static void done(void)
{
    m0_http_free(&http);
    m0_req_free(&req);
}

/* Answer "METHOD /static<path>" with extra header lines from st. */
static void ask(const struct m0_static *st, const char *method, const char *path, const char *headers,
                struct answer *a)
{
    char raw[8192];
    snprintf(raw, sizeof raw, "%s /static%s HTTP/1.1\r\nHost: t\r\n%s\r\n", method, path, headers ? headers : "");
    parse(raw);
    struct m0_head h;
    struct m0_body b;
    struct m0_buf out = {0};
    memset(&h, 0, sizeof h);
    m0_head_reset(&h);
    struct m0_body_req br = {.http_minor = 1, .keepalive = 1, .head = (req.flags & M0_REQ_HEAD) != 0};
    struct m0_static_out o;
    m0_static_respond(st, &req, 7, &br, &h, &b, &out, &o);
    a->status = o.status;
    const char *end = memmem(out.data, out.len, "\r\n\r\n", 4);
    assert_non_null(end);
    size_t hl = (size_t)(end + 4 - out.data);
    assert_true(hl < sizeof a->head);
    memcpy(a->head, out.data, hl);
    a->head[hl] = '\0';
    a->body_len = out.len - hl;
    memcpy(a->body, out.data + hl, a->body_len);
    a->file = o.fd != -1;
    if (o.fd != -1) {
        assert_true(a->body_len == 0 && o.len <= sizeof a->body);
        ssize_t got = pread(o.fd, a->body, o.len, o.off);
        assert_int_equal(got, (ssize_t)o.len);
        a->body_len = o.len;
        close(o.fd);
    }
    a->body[a->body_len] = '\0';
    m0_buf_free(&out);
    m0_head_free(&h);
    done();
}

/* The value of header name in a's head ("" when absent). */
static const char *hval(const struct answer *a, const char *name)
{
    static char v[512];
    char pat[128];
    snprintf(pat, sizeof pat, "\r\n%s: ", name);
    const char *p = strstr(a->head, pat);
    if (p == NULL)
        return "";
    p += strlen(pat);
    size_t n = strcspn(p, "\r");
    snprintf(v, sizeof v, "%.*s", (int)n, p);
    return v;
}

/* ---------------------------------------------------------------- tests */

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/m0static.XXXXXX");
    assert_non_null(mkdtemp(tmp));
    snprintf(root, sizeof root, "%s/root", tmp);
    assert_int_equal(mkdir(root, 0755), 0);
    load_table();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static void run_table(enum m0_static_resolver r)
{
    char err[256];
    struct m0_static *st = m0_static_open(root, -1, 0, r, err, sizeof err);
    assert_non_null(st);
    int failures = 0;
    static struct answer a;
    for (int i = 0; i < ncases; i++) {
        const struct scase *c = &cases[i];
        int want = expected(c, r);
        ask(st, "GET", c->path, NULL, &a);
        int bad = a.status != want || (want == 200 && strcmp(a.body, c->body) != 0);
        /* A refusal never leaks a byte of what lies beyond the root. */
        bad |= strstr(a.body, "TOP-SECRET") != NULL || strstr(a.body, "root:") != NULL;
        if (bad) {
            fprintf(stderr, "case %s (%s) %s: got %d %s, want %d %s\n", c->name, m0_static_resolver_name(r),
                    c->path, a.status, a.body, want, c->body);
            failures++;
        }
        /* The pure rule agrees with the whole answer on what it refuses. */
        char rel[M0_STATIC_PATH_MAX];
        size_t rl;
        int slash;
        const char *why;
        const char *q = strchr(c->path, '?');
        size_t pl = q ? (size_t)(q - c->path) : strlen(c->path);
        int rule = m0_static_path(c->path, pl, rel, sizeof rel, &rl, &slash, &why);
        if (rule != 0 && rule != want) {
            fprintf(stderr, "case %s: m0_static_path says %d, want %d\n", c->name, rule, want);
            failures++;
        }
    }
    assert_true(ncases >= 40);
    assert_int_equal(failures, 0);
    m0_static_close(st);
}

static void test_table_walk(void **state)
{
    (void)state;
    run_table(M0_RESOLVE_WALK);
}

static void test_table_openat2(void **state)
{
    (void)state;
    if (m0_static_probe() != M0_RESOLVE_OPENAT2)
        skip();
    run_table(M0_RESOLVE_OPENAT2);
}

static void test_path_rules(void **state)
{
    (void)state;
    char out[32];
    size_t n;
    int slash;
    const char *why;
    assert_int_equal(m0_static_path("/a/b/", 5, out, sizeof out, &n, &slash, &why), 0);
    assert_string_equal(out, "a/b/");
    assert_int_equal(slash, 1);
    assert_int_equal(m0_static_path("/caf%C3%A9.txt", 14, out, sizeof out, &n, &slash, &why), 0);
    assert_string_equal(out, "caf\xc3\xa9.txt");
    assert_int_equal(slash, 0);
    assert_int_equal(m0_static_path("", 0, out, sizeof out, &n, &slash, &why), 0);
    assert_int_equal(n, 0);
    assert_int_equal(slash, 0);
    /* Longer than the buffer: refused, never truncated into another name. */
    assert_int_equal(m0_static_path("/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 41, out, sizeof out, &n, &slash, &why),
                     404);
    assert_int_equal(m0_static_path("/a\\b", 4, out, sizeof out, &n, &slash, &why), 404);
    assert_int_equal(m0_static_path("a.txt", 5, out, sizeof out, &n, &slash, &why), 404);
}

static void test_range_parse(void **state)
{
    (void)state;
    static const struct {
        const char *v;
        uint64_t len;
        enum m0_range_verdict want;
        uint64_t first, last;
    } t[] = {
        {"bytes=0-99", 1000, M0_RANGE_ONE, 0, 99},
        {"bytes=100-", 1000, M0_RANGE_ONE, 100, 999},
        {"bytes=-100", 1000, M0_RANGE_ONE, 900, 999},
        {"bytes=-5000", 1000, M0_RANGE_ONE, 0, 999},      /* a suffix longer than the file: all of it */
        {"bytes=990-5000", 1000, M0_RANGE_ONE, 990, 999}, /* last-pos past the end: clamped */
        {"BYTES = 5-5", 1000, M0_RANGE_WHOLE, 0, 0},      /* no BWS before '=' in the grammar */
        {"Bytes=5-5", 1000, M0_RANGE_ONE, 5, 5},          /* the unit is case-insensitive */
        {"bytes= 5-6 ,", 1000, M0_RANGE_ONE, 5, 6},       /* OWS and empty list elements */
        {"bytes=1000-", 1000, M0_RANGE_UNSATISFIABLE, 0, 0},
        {"bytes=2000-3000", 1000, M0_RANGE_UNSATISFIABLE, 0, 0},
        {"bytes=-0", 1000, M0_RANGE_UNSATISFIABLE, 0, 0},
        {"bytes=0-0", 0, M0_RANGE_UNSATISFIABLE, 0, 0},   /* nothing in an empty file */
        {"bytes=-5", 0, M0_RANGE_WHOLE, 0, 0},
        {"bytes=5-1", 1000, M0_RANGE_WHOLE, 0, 0},        /* invalid: ignored */
        {"bytes=0-1,5-6", 1000, M0_RANGE_WHOLE, 0, 0},    /* several: the whole file */
        {"bytes=", 1000, M0_RANGE_WHOLE, 0, 0},
        {"bytes=a-b", 1000, M0_RANGE_WHOLE, 0, 0},
        {"bytes=1-2x", 1000, M0_RANGE_WHOLE, 0, 0},
        {"items=0-1", 1000, M0_RANGE_WHOLE, 0, 0},
        {"bytes=99999999999999999999-", 1000, M0_RANGE_WHOLE, 0, 0},
        {"bytes=0-18446744073709551615", 1000, M0_RANGE_WHOLE, 0, 0},  /* 20 digits: refused */
        {"bytes=0-9223372036854775807", 1000, M0_RANGE_ONE, 0, 999},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct m0_range r = {0, 0};
        enum m0_range_verdict v = m0_range_parse(t[i].v, strlen(t[i].v), t[i].len, &r);
        if (v != t[i].want || (v == M0_RANGE_ONE && (r.first != t[i].first || r.last != t[i].last)))
            fail_msg("%s (len %llu): got %d %llu-%llu", t[i].v, (unsigned long long)t[i].len, v,
                     (unsigned long long)r.first, (unsigned long long)r.last);
    }
}

static void test_etag_match(void **state)
{
    (void)state;
    const char *e = "\"1a-2b-3c\"";
    size_t el = strlen(e);
#define M(v, weak) m0_etag_match(v, strlen(v), e, el, weak)
    assert_true(M("\"1a-2b-3c\"", 1));
    assert_true(M("W/\"1a-2b-3c\"", 1));       /* weak comparison ignores W/ */
    assert_false(M("W/\"1a-2b-3c\"", 0));      /* strong comparison does not */
    assert_true(M("\"x\", \"1a-2b-3c\"", 1));
    assert_true(M(" \"x\" ,W/\"1a-2b-3c\" ", 1));
    assert_true(M("*", 0));
    assert_false(M("\"1a-2b-3\"", 1));
    assert_false(M("1a-2b-3c", 1));            /* unquoted: malformed */
    assert_false(M("\"x\" junk, \"1a-2b-3c\"", 1));
    assert_false(M("", 1));
#undef M
}

static void test_http_dates(void **state)
{
    (void)state;
    time_t t;
    const time_t want = 784111777;   /* Sun, 06 Nov 1994 08:49:37 GMT */
    assert_int_equal(m0_http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT", 29, &t), M0_OK);
    assert_int_equal(t, want);
    const char *rfc850 = "Sunday, 06-Nov-94 08:49:37 GMT";
    assert_int_equal(m0_http_date_parse(rfc850, strlen(rfc850), &t), M0_OK);
    assert_int_equal(t, want);
    assert_int_equal(m0_http_date_parse("Sun Nov  6 08:49:37 1994", 24, &t), M0_OK);
    assert_int_equal(t, want);
    static const char *const bad[] = {
        "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT",
        "yesterday", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(m0_http_date_parse(bad[i], strlen(bad[i]), &t), M0_ERR);
    char out[40];
    m0_http_date_format(want, out, sizeof out);
    assert_string_equal(out, "Sun, 06 Nov 1994 08:49:37 GMT");
}

static size_t codings(const char *headers, enum m0_coding order[3])
{
    char raw[1024];
    snprintf(raw, sizeof raw, "GET / HTTP/1.1\r\nHost: t\r\n%s\r\n", headers);
    parse(raw);
    size_t n = m0_accept_encoding(&req, order);
    done();
    return n;
}

static void test_accept_encoding(void **state)
{
    (void)state;
    enum m0_coding o[3];
    assert_int_equal(codings("", o), 1);
    assert_int_equal(o[0], M0_CODING_IDENTITY);
    assert_int_equal(codings("Accept-Encoding: gzip, deflate, br\r\n", o), 3);
    assert_int_equal(o[0], M0_CODING_BR);          /* equal q: br first */
    assert_int_equal(o[1], M0_CODING_GZIP);
    assert_int_equal(o[2], M0_CODING_IDENTITY);
    assert_int_equal(codings("Accept-Encoding: br;q=0.5, gzip;q=0.8\r\n", o), 3);
    assert_int_equal(o[0], M0_CODING_GZIP);        /* q-values decide */
    assert_int_equal(o[1], M0_CODING_BR);
    assert_int_equal(o[2], M0_CODING_IDENTITY);    /* not named: acceptable, preferred least */
    assert_int_equal(codings("Accept-Encoding: br;q=0.5, identity\r\n", o), 2);
    assert_int_equal(o[0], M0_CODING_IDENTITY);    /* named at q=1: it wins */
    assert_int_equal(o[1], M0_CODING_BR);
    assert_int_equal(codings("Accept-Encoding: br;q=0, gzip\r\n", o), 2);
    assert_int_equal(o[0], M0_CODING_GZIP);
    assert_int_equal(o[1], M0_CODING_IDENTITY);
    assert_int_equal(codings("Accept-Encoding: *\r\n", o), 3);
    assert_int_equal(o[0], M0_CODING_BR);
    assert_int_equal(codings("Accept-Encoding: identity\r\n", o), 1);
    assert_int_equal(codings("Accept-Encoding: x-gzip;Q=0.9, identity;q=0.1\r\n", o), 2);
    assert_int_equal(o[0], M0_CODING_GZIP);
    assert_int_equal(codings("Accept-Encoding: gzip;q=2, br;q=0.x\r\n", o), 1);   /* malformed weights: ignored */
    assert_int_equal(codings("Accept-Encoding: gzip\r\nAccept-Encoding: br;q=0.1\r\n", o), 3);
    assert_int_equal(o[0], M0_CODING_GZIP);        /* list lines combine (RFC 9110 §5.3) */
    assert_int_equal(o[1], M0_CODING_BR);
    assert_int_equal(o[2], M0_CODING_IDENTITY);
    assert_int_equal(codings("Accept-Encoding: *;q=0\r\n", o), 1);    /* nothing acceptable: identity anyway */
    assert_int_equal(o[0], M0_CODING_IDENTITY);
}

static void test_mime_types(void **state)
{
    (void)state;
    assert_string_equal(m0_mime_type("a/x.css", 7), "text/css; charset=utf-8");   /* built-in */
    assert_string_equal(m0_mime_type("noext", 5), "application/octet-stream");
    assert_string_equal(m0_mime_type("dir.d/noext", 11), "application/octet-stream");
    char path[400];
    snprintf(path, sizeof path, "%s/mime.types", tmp);
    write_file(path, "# comment\ntext/x-test\ttst T2\napplication/x-thing  thing # trailing\n"
                     "image/png png\n\n");
    assert_int_equal(m0_mime_load(path), M0_OK);
    assert_string_equal(m0_mime_type("x.TST", 5), "text/x-test; charset=utf-8");
    assert_string_equal(m0_mime_type("x.t2", 4), "text/x-test; charset=utf-8");
    assert_string_equal(m0_mime_type("x.thing", 7), "application/x-thing");
    assert_string_equal(m0_mime_type("x.png", 5), "image/png");
    assert_string_equal(m0_mime_type("x.woff2", 7), "font/woff2");              /* falls back to built-in */
    assert_int_equal(m0_mime_load("/nonexistent/mime.types"), M0_ERR);
    assert_string_equal(m0_mime_type("x.tst", 5), "text/x-test; charset=utf-8"); /* kept */
    if (access("/etc/mime.types", R_OK) == 0) {
        assert_int_equal(m0_mime_load("/etc/mime.types"), M0_OK);
        assert_string_equal(m0_mime_type("app.js", 6), "text/javascript; charset=utf-8");
        assert_string_equal(m0_mime_type("a.wasm", 6), "application/wasm");
    }
}

/* A 100 KB file of a known pattern, its .gz sibling (not really gzip: the
 * server never looks inside) and its .br sibling, older than the file. */
static struct m0_static *big_fixture(char *pattern, size_t n)
{
    char path[400];
    for (size_t i = 0; i < n; i++)
        pattern[i] = (char)('a' + i % 26);
    snprintf(path, sizeof path, "%s/big.txt", root);
    FILE *f = fopen(path, "w");
    fwrite(pattern, 1, n, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/big.txt.gz", root);
    write_file(path, "GZ-BYTES");
    snprintf(path, sizeof path, "%s/big.txt.br", root);
    write_file(path, "BR-BYTES");
    /* Older than the file: still served (a checkout sets mtimes in any order). */
    struct timeval old[2] = {{1000000000, 0}, {1000000000, 0}};
    assert_int_equal(utimes(path, old), 0);
    char err[256];
    struct m0_static *st = m0_static_open(root, 3600, 0, m0_static_probe(), err, sizeof err);
    assert_non_null(st);
    return st;
}

static void test_ranges_and_validators(void **state)
{
    (void)state;
    static char pattern[100 * 1024];
    struct m0_static *st = big_fixture(pattern, sizeof pattern);
    static struct answer a;

    ask(st, "GET", "/big.txt", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_true(a.file);                                  /* big: a sendfile range */
    assert_int_equal(a.body_len, sizeof pattern);
    assert_memory_equal(a.body, pattern, sizeof pattern);
    assert_string_equal(hval(&a, "Content-Length"), "102400");
    assert_string_equal(hval(&a, "Content-Type"), "text/plain; charset=utf-8");
    assert_string_equal(hval(&a, "Cache-Control"), "public, max-age=3600");
    assert_string_equal(hval(&a, "Accept-Ranges"), "bytes");
    assert_string_equal(hval(&a, "Vary"), "Accept-Encoding");
    char etag[64], lm[64];
    snprintf(etag, sizeof etag, "%s", hval(&a, "ETag"));
    snprintf(lm, sizeof lm, "%s", hval(&a, "Last-Modified"));
    assert_true(etag[0] == '"' && strlen(lm) == 29);

    char hdr[256];
    snprintf(hdr, sizeof hdr, "If-None-Match: \"nope\", W/%s\r\n", etag);
    ask(st, "GET", "/big.txt", hdr, &a);
    assert_int_equal(a.status, 304);
    assert_int_equal(a.body_len, 0);
    assert_string_equal(hval(&a, "ETag"), etag);
    assert_null(strstr(a.head, "Content-Length"));
    snprintf(hdr, sizeof hdr, "If-Modified-Since: %s\r\n", lm);
    ask(st, "HEAD", "/big.txt", hdr, &a);
    assert_int_equal(a.status, 304);
    /* If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2). */
    snprintf(hdr, sizeof hdr, "If-None-Match: \"other\"\r\nIf-Modified-Since: %s\r\n", lm);
    ask(st, "GET", "/big.txt", hdr, &a);
    assert_int_equal(a.status, 200);
    ask(st, "GET", "/big.txt", "If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n", &a);
    assert_int_equal(a.status, 200);
    ask(st, "GET", "/big.txt", "If-Modified-Since: garbage\r\n", &a);
    assert_int_equal(a.status, 200);
    ask(st, "GET", "/big.txt", "If-Match: \"other\"\r\n", &a);
    assert_int_equal(a.status, 412);
    snprintf(hdr, sizeof hdr, "If-Match: %s\r\n", etag);
    ask(st, "GET", "/big.txt", hdr, &a);
    assert_int_equal(a.status, 200);
    ask(st, "GET", "/big.txt", "If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n", &a);
    assert_int_equal(a.status, 412);

    ask(st, "GET", "/big.txt", "Range: bytes=26-51\r\n", &a);
    assert_int_equal(a.status, 206);
    assert_string_equal(a.body, "abcdefghijklmnopqrstuvwxyz");
    assert_string_equal(hval(&a, "Content-Range"), "bytes 26-51/102400");
    assert_string_equal(hval(&a, "Content-Length"), "26");
    ask(st, "GET", "/big.txt", "Range: bytes=-30000\r\n", &a);
    assert_int_equal(a.status, 206);
    assert_true(a.file);
    assert_int_equal(a.body_len, 30000);
    assert_memory_equal(a.body, pattern + sizeof pattern - 30000, 30000);
    ask(st, "GET", "/big.txt", "Range: bytes=200000-\r\n", &a);
    assert_int_equal(a.status, 416);
    assert_string_equal(hval(&a, "Content-Range"), "bytes */102400");
    ask(st, "GET", "/big.txt", "Range: bytes=0-1,5-6\r\n", &a);
    assert_int_equal(a.status, 200);                      /* several ranges: the whole file */
    assert_int_equal(a.body_len, sizeof pattern);
    ask(st, "HEAD", "/big.txt", "Range: bytes=0-1\r\n", &a);
    assert_int_equal(a.status, 200);                      /* Range is for GET only */
    assert_int_equal(a.body_len, 0);
    assert_string_equal(hval(&a, "Content-Length"), "102400");
    snprintf(hdr, sizeof hdr, "Range: bytes=0-1\r\nIf-Range: %s\r\n", etag);
    ask(st, "GET", "/big.txt", hdr, &a);
    assert_int_equal(a.status, 206);
    ask(st, "GET", "/big.txt", "Range: bytes=0-1\r\nIf-Range: \"old\"\r\n", &a);
    assert_int_equal(a.status, 200);                      /* changed since: the whole file */
    snprintf(hdr, sizeof hdr, "Range: bytes=0-1\r\nIf-Range: %s\r\n", lm);
    ask(st, "GET", "/big.txt", hdr, &a);
    assert_int_equal(a.status, 206);
    snprintf(hdr, sizeof hdr, "Range: bytes=0-1\r\nIf-Range: W/%s\r\n", etag);
    ask(st, "GET", "/big.txt", hdr, &a);
    assert_int_equal(a.status, 200);                      /* a weak tag never matches If-Range */

    /* Precompressed siblings, by the client's preference. */
    ask(st, "GET", "/big.txt", "Accept-Encoding: br, gzip\r\n", &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.body, "BR-BYTES");
    assert_string_equal(hval(&a, "Content-Encoding"), "br");
    ask(st, "GET", "/big.txt", "Accept-Encoding: br;q=0.9, gzip\r\n", &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.body, "GZ-BYTES");
    assert_string_equal(hval(&a, "Content-Encoding"), "gzip");
    assert_string_equal(hval(&a, "Content-Type"), "text/plain; charset=utf-8");
    assert_string_equal(hval(&a, "Vary"), "Accept-Encoding");
    assert_true(strcmp(hval(&a, "ETag"), etag) != 0);     /* another representation, another tag */
    ask(st, "GET", "/big.txt", "Accept-Encoding: gzip;q=0.5, identity\r\n", &a);
    assert_int_equal(a.body_len, sizeof pattern);         /* identity preferred */
    assert_string_equal(hval(&a, "Content-Encoding"), "");
    ask(st, "GET", "/a.txt", "Accept-Encoding: br, gzip\r\n", &a);
    assert_string_equal(a.body, "alpha");                 /* no sibling: identity */
    assert_string_equal(hval(&a, "Content-Encoding"), "");
    ask(st, "GET", "/big.txt.gz", "Accept-Encoding: gzip\r\n", &a);
    assert_string_equal(hval(&a, "Content-Type"), "application/gzip");   /* asked by name: no coding */
    assert_string_equal(hval(&a, "Content-Encoding"), "");

    ask(st, "POST", "/big.txt", NULL, &a);
    assert_int_equal(a.status, 405);
    assert_string_equal(hval(&a, "Allow"), "GET, HEAD");
    ask(st, "HEAD", "/a.txt", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_int_equal(a.body_len, 0);
    assert_string_equal(hval(&a, "Content-Length"), "5");
    m0_static_close(st);
}

static void test_index_option(void **state)
{
    (void)state;
    char path[400], err[256];
    snprintf(path, sizeof path, "%s/dir_only/index.html", root);
    write_file(path, "<p>index</p>");
    struct m0_static *off = m0_static_open(root, -1, 0, m0_static_probe(), err, sizeof err);
    struct m0_static *on = m0_static_open(root, -1, 1, m0_static_probe(), err, sizeof err);
    static struct answer a;
    ask(off, "GET", "/dir_only/", NULL, &a);
    assert_int_equal(a.status, 404);
    ask(on, "GET", "/dir_only/", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.body, "<p>index</p>");
    assert_string_equal(hval(&a, "Content-Type"), "text/html; charset=utf-8");
    ask(on, "GET", "/dir_only?x=1", NULL, &a);
    assert_int_equal(a.status, 301);
    assert_string_equal(hval(&a, "Location"), "/static/dir_only/?x=1");
    ask(on, "GET", "/sub/", NULL, &a);
    assert_int_equal(a.status, 404);                      /* no index.html there */
    unlink(path);
    m0_static_close(off);
    m0_static_close(on);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_walk),
        cmocka_unit_test(test_table_openat2),
        cmocka_unit_test(test_path_rules),
        cmocka_unit_test(test_range_parse),
        cmocka_unit_test(test_etag_match),
        cmocka_unit_test(test_http_dates),
        cmocka_unit_test(test_accept_encoding),
        cmocka_unit_test(test_mime_types),
        cmocka_unit_test(test_ranges_and_validators),
        cmocka_unit_test(test_index_option),
    };
    return cmocka_run_group_tests_name("static", tests, setup, teardown);
}
