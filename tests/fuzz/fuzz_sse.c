/*
 * fuzz_sse.c — libFuzzer driver for the SSE wire format (include/m0/sse.h):
 * m0_sse_frame() and m0_sse_parse_last_id().
 *
 * 1. Framing. The input is a list of events, each
 *      flags (1 byte: bit 0 an id follows, bit 1 an event name follows)
 *      id (8 bytes, little-endian)          when bit 0
 *      name length (1 byte) and name        when bit 1 (CR, LF and NUL in it
 *                                           become '_': callers refuse them)
 *      data length (2 bytes) and data       arbitrary bytes
 *    framed one after another into one buffer, which a small reference
 *    parser written here from the WHATWG "Parsing an event stream" steps
 *    (lines end in CRLF, LF or CR; "field: value" with one leading space
 *    dropped; a blank line dispatches) reads back. Asserted: one event
 *    dispatched per frame, nothing left over; its data equals the input
 *    data with CRLF and CR turned into LF; its type is the name (or
 *    "message"); its last event ID is the decimal id (an id of 0 writes no
 *    id line and leaves the previous one), which m0_sse_parse_last_id()
 *    turns back into the same number.
 * 2. Last-Event-ID. The whole input, and its first bytes mapped onto
 *    decimal digits, go to m0_sse_parse_last_id(), which must agree with a
 *    128-bit reference: "" is 0; anything that is not all digits, or longer
 *    than the 20 digits of the largest id the server can issue, is
 *    UINT64_MAX; a value above UINT64_MAX saturates to UINT64_MAX (it never
 *    wraps).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/buf.h"
#include "m0/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "fuzz_sse: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                         \
            abort();                                                                \
        }                                                                           \
    } while (0)

#define MAX_EVENTS 8

/* ------------------------------------------------------------ Last-Event-ID */

static uint64_t ref_last_id(const uint8_t *v, size_t len)
{
    unsigned __int128 x = 0;
    if (len == 0)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return UINT64_MAX;
    }
    if (len > 20)
        return UINT64_MAX;
    for (size_t i = 0; i < len; i++)
        x = x * 10 + (unsigned)(v[i] - '0');     /* 20 digits fit in 128 bits */
    return x > UINT64_MAX ? UINT64_MAX : (uint64_t)x;
}

static void check_last_id(const uint8_t *data, size_t size)
{
    uint8_t digits[24];
    size_t nd = size < sizeof digits ? size : sizeof digits;

    CHECK(m0_sse_parse_last_id((const char *)data, size) == ref_last_id(data, size));
    for (size_t i = 0; i < nd; i++)
        digits[i] = (uint8_t)('0' + data[i] % 10);
    for (size_t k = 0; k <= nd; k++)
        CHECK(m0_sse_parse_last_id((const char *)digits, k) == ref_last_id(digits, k));
}

/* ------------------------------------------------------------------ framing */

struct event {
    uint64_t id;
    int has_event;
    char name[256];
    const uint8_t *data;
    size_t len;
};

/* What the reference parser dispatched. */
struct parsed {
    char type[256];
    struct m0_buf data;
    char last_id[32];
};

struct parser {
    struct m0_buf line;           /* the current line */
    struct m0_buf data;           /* the data buffer */
    char type[256];
    char last_id[32];             /* the last event ID buffer */
    struct parsed out[MAX_EVENTS];
    unsigned nout;
};

static void field(struct parser *ps, const char *name, size_t nlen, const char *val, size_t vlen)
{
    if (nlen == 5 && memcmp(name, "event", 5) == 0) {
        CHECK(vlen < sizeof ps->type);
        memcpy(ps->type, val, vlen);
        ps->type[vlen] = '\0';
    } else if (nlen == 4 && memcmp(name, "data", 4) == 0) {
        m0_buf_append(&ps->data, val, vlen);
        m0_buf_append(&ps->data, "\n", 1);
    } else if (nlen == 2 && memcmp(name, "id", 2) == 0) {
        if (memchr(val, '\0', vlen) == NULL) {
            CHECK(vlen < sizeof ps->last_id);
            memcpy(ps->last_id, val, vlen);
            ps->last_id[vlen] = '\0';
        }
    } else {
        CHECK(0);                 /* the framer writes no other field */
    }
}

static void dispatch(struct parser *ps)
{
    if (ps->data.len == 0) {
        ps->type[0] = '\0';
        return;
    }
    CHECK(ps->nout < MAX_EVENTS);
    struct parsed *e = &ps->out[ps->nout++];
    snprintf(e->type, sizeof e->type, "%s", ps->type[0] ? ps->type : "message");
    memset(&e->data, 0, sizeof e->data);
    m0_buf_append(&e->data, ps->data.data, ps->data.len - 1);   /* without the last LF */
    snprintf(e->last_id, sizeof e->last_id, "%s", ps->last_id);
    m0_buf_reset(&ps->data);
    ps->type[0] = '\0';
}

static void process_line(struct parser *ps)
{
    const char *l = ps->line.data ? ps->line.data : "";
    size_t n = ps->line.len;
    if (n == 0) {
        dispatch(ps);
        return;
    }
    if (l[0] == ':')
        return;                   /* comment */
    const char *colon = memchr(l, ':', n);
    if (colon == NULL) {
        field(ps, l, n, "", 0);
        return;
    }
    const char *v = colon + 1;
    size_t vn = n - (size_t)(v - l);
    if (vn > 0 && v[0] == ' ') {
        v++;
        vn--;
    }
    field(ps, l, (size_t)(colon - l), v, vn);
}

/* Feed the whole stream; returns 1 when it ended on a line boundary with
 * no event half-built. */
static int parse_stream(struct parser *ps, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\r' || p[i] == '\n') {
            process_line(ps);
            m0_buf_reset(&ps->line);
            if (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n')
                i++;
            continue;
        }
        m0_buf_append(&ps->line, p + i, 1);
    }
    return ps->line.len == 0 && ps->data.len == 0 && ps->type[0] == '\0';
}

/* The data as the parser must return it: CRLF and CR become LF. */
static void normalize(struct m0_buf *b, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\r') {
            m0_buf_append(b, "\n", 1);
            if (i + 1 < n && p[i + 1] == '\n')
                i++;
        } else {
            m0_buf_append(b, p + i, 1);
        }
    }
}

static size_t take_events(const uint8_t *p, size_t n, struct event *ev)
{
    size_t k = 0, i = 0;
    while (i < n && k < MAX_EVENTS) {
        struct event *e = &ev[k];
        uint8_t flags = p[i++];
        memset(e, 0, sizeof *e);
        if (flags & 1) {
            if (n - i < 8)
                break;
            for (int b = 7; b >= 0; b--)
                e->id = e->id << 8 | p[i + (size_t)b];
            i += 8;
        }
        if (flags & 2) {
            if (i >= n)
                break;
            size_t nl = p[i++];
            if (nl > n - i)
                nl = n - i;
            for (size_t j = 0; j < nl; j++) {
                char c = (char)p[i + j];
                e->name[j] = c == '\r' || c == '\n' || c == '\0' ? '_' : c;
            }
            e->name[nl] = '\0';
            e->has_event = 1;
            i += nl;
        }
        size_t dl = 0;
        if (n - i >= 2) {
            dl = (size_t)p[i] | (size_t)p[i + 1] << 8;
            i += 2;
        } else {
            i = n;
        }
        if (dl > n - i)
            dl = n - i;
        e->data = p + i;
        e->len = dl;
        i += dl;
        k++;
    }
    return k;
}

static void check_framing(const uint8_t *data, size_t size)
{
    static struct event ev[MAX_EVENTS];
    static struct parser ps;
    struct m0_buf stream = {0}, want = {0};

    size_t nev = take_events(data, size, ev);
    for (size_t i = 0; i < nev; i++)
        m0_sse_frame(&stream, ev[i].id, ev[i].has_event ? ev[i].name : NULL, (const char *)ev[i].data,
                     ev[i].len);

    m0_buf_reset(&ps.line);
    m0_buf_reset(&ps.data);
    ps.type[0] = ps.last_id[0] = '\0';
    ps.nout = 0;
    CHECK(parse_stream(&ps, stream.data ? stream.data : "", stream.len));
    CHECK(ps.nout == nev);

    char last[32] = "";
    for (size_t i = 0; i < nev; i++) {
        const struct parsed *got = &ps.out[i];
        m0_buf_reset(&want);
        normalize(&want, ev[i].data, ev[i].len);
        CHECK(got->data.len == want.len && (want.len == 0 || memcmp(got->data.data, want.data, want.len) == 0));
        const char *type = ev[i].has_event && ev[i].name[0] ? ev[i].name : "message";
        CHECK(strcmp(got->type, type) == 0);
        if (ev[i].id != 0) {
            snprintf(last, sizeof last, "%llu", (unsigned long long)ev[i].id);
            CHECK(m0_sse_parse_last_id(got->last_id, strlen(got->last_id)) == ev[i].id);
        }
        CHECK(strcmp(got->last_id, last) == 0);
    }
    for (size_t i = 0; i < ps.nout; i++)
        m0_buf_free(&ps.out[i].data);
    m0_buf_free(&stream);
    m0_buf_free(&want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_last_id(data, size);
    check_framing(data, size);
    return 0;
}
