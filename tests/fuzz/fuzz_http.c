/*
 * fuzz_http.c — libFuzzer driver for the llhttp glue, m0_http_feed()
 * (include/m0/http.h), fed the way the loop feeds it.
 *
 * Input layout:
 *   byte 0     limits: max_target, max_header_bytes, max_headers, max_body
 *              (two bits each, small values to reach every limit);
 *   byte 1     body_mem (two bits: 0 spills every body byte to a temporary
 *              file) and how the bytes arrive (two bits: one byte per read,
 *              reads of 1..8, of 1..64 or of 1..1024 bytes);
 *   bytes 2-5  the seed of the read sizes;
 *   the rest   the bytes a client sends: one or more pipelined requests.
 *
 * Each input is parsed twice: in reads of the chosen sizes, and in one read.
 * After M0_OK the driver feeds again; after M0_DONE it reads the body back
 * with m0_req_body_read(), calls m0_http_next() and goes on with the bytes
 * left, as a keep-alive connection does.
 *
 * Asserted (abort() on failure, so libFuzzer keeps the input):
 *  - *used <= the bytes offered; M0_AGAIN consumed all of them;
 *  - at most one M0_OK per message, and M0_DONE only after it;
 *  - on M0_ERR: status in 400..599, a non-empty reason; the error is sticky
 *    (the next feed returns M0_ERR and consumes nothing);
 *  - at the head: header count <= max_headers, target <= max_target, head
 *    bytes <= max_header_bytes + max_target, HTTP/1.0 or 1.1, method, target,
 *    path and query NUL-terminated at their lengths, path "/..." (or "*" for
 *    asterisk-form), header names are tokens, values hold no CR/LF/NUL/CTL
 *    and no surrounding whitespace, one Host at most (exactly one in 1.1),
 *    never both Content-Length and chunked, Content-Length <= max_body,
 *    Transfer-Encoding only with chunked framing, HEAD flag iff HEAD,
 *    no keep-alive when a Connection list holds "close";
 *  - at message end: body_len <= max_body; a Content-Length body is exactly
 *    the bytes before the message end; no framing means no body; the body
 *    reads back in any piece sizes to the same bytes, then 0 at its end;
 *    body bytes kept in memory are min(body_len, body_mem);
 *  - an Origin header against the Host (origin.h): a parsed origin lies in
 *    the value with a sane host and port, is the own origin of its own
 *    "host:port", and no origin is the request's own on both schemes;
 *  - the outcome does not depend on how the bytes were split into reads:
 *    same messages (method, target, headers, flags, body, where each
 *    ended), and the same final state (input exhausted, or an error). The
 *    error status may differ when a head has two faults (see the end).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "m0/http.h"
#include "m0/origin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MSGS 64

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_http: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                          \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* What one parse saw, compared between the two ways of feeding. */
struct msg {
    char method[16];
    uint64_t target_hash, hdrs_hash, body_hash;
    uint32_t target_len;
    unsigned nhdrs, flags;
    int64_t content_length;
    uint64_t body_len;
    size_t end;                  /* input offset where the message ended */
};

struct transcript {
    struct msg msgs[MAX_MSGS];
    unsigned nmsgs;
    int final_rc;                /* M0_AGAIN (input ran out) or M0_ERR */
    int status;
    const char *reason;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint32_t next_rand(uint32_t *s)
{
    /* xorshift32; never seeded with 0 */
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int name_is(const struct m0_hdr *hd, const char *name)
{
    return hd->name_len == strlen(name) && strcasecmp(hd->name, name) == 0;
}

/* The Origin header against the Host (origin.h, RFC 6454), the grants'
 * same-origin check: a parsed origin lies inside the value, has a host
 * without '/', '@', '?' or white space and a port 1..65535; no origin is
 * the request's own on both schemes; "host:port" of a parsed origin is a
 * Host that origin is the own origin of. */
static void check_origin(const struct m0_req *r)
{
    const struct m0_hdr *o = m0_req_header(r, "origin"), *h = m0_req_header(r, "host");
    if (o == NULL)
        return;
    struct m0_origin a;
    if (m0_origin_parse(o->value, o->value_len, &a) == 0) {
        CHECK(a.host >= o->value && a.host_len > 0 && a.host + a.host_len <= o->value + o->value_len);
        CHECK(a.port >= 1 && a.port <= 65535 && (a.https == 0 || a.https == 1));
        for (size_t i = 0; i < a.host_len; i++)
            CHECK(strchr("/@?# \t", a.host[i]) == NULL && (unsigned char)a.host[i] > 0x20);
        char own[600];
        int n = snprintf(own, sizeof own, "%.*s:%u", (int)a.host_len, a.host, a.port);
        if (n > 0 && (size_t)n < sizeof own)
            CHECK(m0_origin_same(o->value, o->value_len, own, (size_t)n, a.https) == 1);
    }
    if (h != NULL) {
        int on_http = m0_origin_same(o->value, o->value_len, h->value, h->value_len, 0);
        int on_https = m0_origin_same(o->value, o->value_len, h->value, h->value_len, 1);
        CHECK((on_http == 0 || on_http == 1) && (on_https == 0 || on_https == 1) && !(on_http && on_https));
    }
}

/* Invariants of a request whose head just completed. */
static void check_head(const struct m0_req *r, const struct m0_limits *lim, size_t head_bytes)
{
    CHECK(r->nhdrs <= lim->max_headers);
    CHECK(head_bytes <= lim->max_header_bytes + lim->max_target);
    CHECK(r->http_major == 1 && r->http_minor <= 1);
    CHECK(r->method != NULL && r->method_len == strlen(r->method) && r->method_len > 0);
    CHECK(r->target != NULL && r->target_len == strlen(r->target));
    CHECK(r->target_len <= lim->max_target);
    CHECK(r->path != NULL && r->path_len == strlen(r->path));
    CHECK(r->query != NULL && r->query_len == strlen(r->query));
    if (r->flags & M0_REQ_ASTERISK)
        CHECK(strcmp(r->path, "*") == 0 && strcmp(r->method, "OPTIONS") == 0);
    else
        CHECK(r->path[0] == '/');
    CHECK(memchr(r->target, '#', r->target_len) == NULL);
    if (r->authority != NULL)
        CHECK(r->authority_len > 0 && r->authority_len == strlen(r->authority));
    CHECK(!!(r->flags & M0_REQ_HEAD) == (strcmp(r->method, "HEAD") == 0));
    CHECK(r->body_len == 0);

    unsigned hosts = 0, cls = 0, tes = 0, conn_close = 0;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *hd = &r->hdrs[i];
        CHECK(hd->name != NULL && hd->value != NULL);
        CHECK(hd->name_len > 0 && hd->name[hd->name_len] == '\0' && hd->value[hd->value_len] == '\0');
        for (uint32_t k = 0; k < hd->name_len; k++)
            CHECK(is_tchar((unsigned char)hd->name[k]));
        for (uint32_t k = 0; k < hd->value_len; k++) {
            unsigned char c = (unsigned char)hd->value[k];
            CHECK(c == '\t' || (c >= 0x20 && c != 0x7f));
        }
        if (hd->value_len > 0) {
            CHECK(hd->value[0] != ' ' && hd->value[0] != '\t');
            CHECK(hd->value[hd->value_len - 1] != ' ' && hd->value[hd->value_len - 1] != '\t');
        }
        hosts += name_is(hd, "host");
        cls += name_is(hd, "content-length");
        tes += name_is(hd, "transfer-encoding");
        if (name_is(hd, "connection"))
            conn_close |= m0_http_list_has(hd->value, hd->value_len, "close");
    }
    /* RFC 9112 §9.6: "close" in Connection ends the connection after the
     * response; llhttp's reading of the list and ours must agree. */
    if (conn_close)
        CHECK(!(r->flags & M0_REQ_KEEPALIVE));
    CHECK(hosts <= 1);
    if (r->http_minor == 1)
        CHECK(hosts == 1);
    CHECK(cls <= 1);
    /* Request smuggling: one framing, never two (RFC 9112 §6.3). */
    if (r->flags & M0_REQ_CHUNKED)
        CHECK(cls == 0 && r->content_length == -1 && tes >= 1 && r->http_minor == 1);
    if (tes > 0)
        CHECK(r->flags & M0_REQ_CHUNKED);
    if (r->content_length >= 0)
        CHECK(cls == 1 && (uint64_t)r->content_length <= lim->max_body);
    if (r->flags & M0_REQ_EXPECT100) {
        const struct m0_hdr *ex = m0_req_header(r, "expect");
        CHECK(r->http_minor == 1 && ex != NULL && strcasecmp(ex->value, "100-continue") == 0);
    }
    check_origin(r);
}

/* Read the body back in pieces whose sizes come from *rnd; returns its hash. */
static uint64_t read_body(const struct m0_req *r, uint32_t *rnd)
{
    static char buf[1024];
    uint64_t h = 1469598103934665603ull, off = 0;
    char probe;

    while (off < r->body_len) {
        size_t want = 1 + next_rand(rnd) % sizeof buf;
        ssize_t got = m0_req_body_read(r, off, buf, want);
        CHECK(got > 0 && (size_t)got <= want);
        CHECK((uint64_t)got == want || off + (uint64_t)got == r->body_len);
        h = fnv(h, buf, (size_t)got);
        off += (uint64_t)got;
    }
    CHECK(off == r->body_len);
    CHECK(m0_req_body_read(r, off, &probe, 1) == 0);
    CHECK(m0_req_body_read(r, off + 1000, &probe, 1) == 0);
    CHECK(m0_req_body_read(r, 0, &probe, 0) == 0);
    return h;
}

/* Invariants of a complete message; records it. */
static void check_done(const struct m0_req *r, const struct m0_limits *lim, const uint8_t *in, size_t end,
                       size_t msg_start, struct msg *m, uint32_t *rnd)
{
    CHECK(r->body_len <= lim->max_body);
    size_t in_mem = r->body_len < lim->body_mem ? (size_t)r->body_len : lim->body_mem;
    CHECK(r->body.len == in_mem);
    CHECK((r->body_fd != -1) == (r->body_len > lim->body_mem));
    if (!(r->flags & M0_REQ_CHUNKED)) {
        if (r->content_length >= 0) {
            CHECK(r->body_len == (uint64_t)r->content_length);
            CHECK(r->body_len <= end - msg_start);
            if (in_mem > 0)
                CHECK(memcmp(r->body.data, in + end - r->body_len, in_mem) == 0);
        } else {
            CHECK(r->body_len == 0);
        }
    }

    memset(m, 0, sizeof *m);
    snprintf(m->method, sizeof m->method, "%s", r->method);
    m->target_hash = fnv(1469598103934665603ull, r->target, r->target_len);
    m->target_len = r->target_len;
    m->nhdrs = r->nhdrs;
    uint64_t hh = 1469598103934665603ull;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        hh = fnv(hh, r->hdrs[i].name, r->hdrs[i].name_len + 1);
        hh = fnv(hh, r->hdrs[i].value, r->hdrs[i].value_len + 1);
    }
    m->hdrs_hash = hh;
    m->flags = r->flags;
    m->content_length = r->content_length;
    m->body_len = r->body_len;
    m->body_hash = read_body(r, rnd);
    if (!(r->flags & M0_REQ_CHUNKED) && r->content_length >= 0)
        CHECK(m->body_hash == fnv(1469598103934665603ull, in + end - r->body_len, (size_t)r->body_len));
    m->end = end;
}

/*
 * Parse in[0..n) as one connection. mode/seed choose the read sizes; mode
 * -1 offers everything in one read.
 */
static void run(const uint8_t *in, size_t n, const struct m0_limits *lim, int mode, uint32_t seed,
                struct transcript *t)
{
    static const size_t max_read[] = {1, 8, 64, 1024};
    struct m0_req r;
    struct m0_http h;
    uint32_t rnd = seed ? seed : 1;
    size_t off = 0, avail = 0, msg_start = 0;
    unsigned oks = 0;       /* M0_OK returns for the current message */
    unsigned idle = 0;      /* consecutive feeds that consumed nothing */

    memset(t, 0, sizeof *t);
    m0_req_init(&r);
    m0_http_init(&h, &r, lim);
    avail = mode < 0 ? n : 0;
    for (;;) {
        if (avail == off && avail < n) {
            /* The loop reads more only once everything read is consumed. */
            size_t k = mode < 0 ? n - avail : 1 + next_rand(&rnd) % max_read[mode];
            avail = avail + k < n ? avail + k : n;
        }
        size_t used = 12345;
        const char *p = (const char *)in + off;
        int rc = m0_http_feed(&h, p, avail - off, &used);
        CHECK(used <= avail - off);
        off += used;
        idle = used == 0 ? idle + 1 : 0;
        CHECK(idle < 4);                    /* no spinning without progress */

        if (rc == M0_AGAIN) {
            CHECK(off == avail);
            CHECK(h.status == 0);
            if (avail == n) {
                t->final_rc = M0_AGAIN;
                break;
            }
            continue;
        }
        if (rc == M0_OK) {
            CHECK(++oks == 1);
            CHECK(h.status == 0);
            check_head(&r, lim, off - msg_start);
            continue;
        }
        if (rc == M0_DONE) {
            CHECK(oks == 1);
            CHECK(h.status == 0);
            CHECK(t->nmsgs < MAX_MSGS);
            check_done(&r, lim, in, off, msg_start, &t->msgs[t->nmsgs++], &rnd);
            if (t->nmsgs == MAX_MSGS || off == n) {
                t->final_rc = M0_AGAIN;
                break;
            }
            m0_http_next(&h);
            msg_start = off;
            oks = 0;
            continue;
        }
        CHECK(rc == M0_ERR);
        CHECK(h.status >= 400 && h.status <= 599);
        CHECK(h.reason != NULL && h.reason[0] != '\0');
        /* Sticky: the connection is over. */
        size_t again = 999;
        CHECK(m0_http_feed(&h, (const char *)in + off, n - off, &again) == M0_ERR && again == 0);
        t->final_rc = M0_ERR;
        t->status = h.status;
        t->reason = h.reason;
        break;
    }
    m0_http_free(&h);
    m0_req_free(&r);
}

static void report(const char *what, const struct transcript *a, const struct transcript *b)
{
    fprintf(stderr, "fuzz_http: split-dependent outcome (%s)\n", what);
    for (int k = 0; k < 2; k++) {
        const struct transcript *t = k ? b : a;
        fprintf(stderr, "  %s: %u messages, final %d status %d (%s)\n", k ? "whole" : "split",
                t->nmsgs, t->final_rc, t->status, t->reason ? t->reason : "");
    }
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t targets[] = {4, 32, 256, 8192};
    static const size_t head_bytes[] = {16, 128, 1024, 16384};
    static const unsigned nhdrs[] = {0, 2, 8, 100};
    static const uint64_t bodies[] = {0, 7, 300, 1048576};
    static const size_t mems[] = {0, 5, 64, 1048576};
    static struct transcript split, whole;

    if (size < 6)
        return 0;
    struct m0_limits lim = {
        .max_target = targets[data[0] & 3],
        .max_header_bytes = head_bytes[(data[0] >> 2) & 3],
        .max_headers = nhdrs[(data[0] >> 4) & 3],
        .max_body = bodies[(data[0] >> 6) & 3],
        .body_mem = mems[data[1] & 3],
    };
    int mode = (data[1] >> 2) & 3;
    uint32_t seed = (uint32_t)data[2] | (uint32_t)data[3] << 8 | (uint32_t)data[4] << 16 |
                    (uint32_t)data[5] << 24;

    run(data + 6, size - 6, &lim, mode, seed, &split);
    run(data + 6, size - 6, &lim, -1, seed, &whole);

    if (split.nmsgs != whole.nmsgs)
        report("message count", &split, &whole);
    for (unsigned i = 0; i < split.nmsgs; i++) {
        const struct msg *a = &split.msgs[i], *b = &whole.msgs[i];
        if (strcmp(a->method, b->method) != 0 || a->target_hash != b->target_hash ||
            a->target_len != b->target_len || a->hdrs_hash != b->hdrs_hash || a->nhdrs != b->nhdrs ||
            a->flags != b->flags || a->content_length != b->content_length ||
            a->body_len != b->body_len || a->body_hash != b->body_hash || a->end != b->end)
            report("a message differs", &split, &whole);
    }
    /* Not the status: with two faults in one head, which is seen first can
     * depend on where a read ends (llhttp hands a span callback the part of
     * a target that ends a read, so "too long" can come before a bad byte
     * later in the same target). Both answers close the connection. */
    if (split.final_rc != whole.final_rc)
        report("final state", &split, &whole);
    return 0;
}
