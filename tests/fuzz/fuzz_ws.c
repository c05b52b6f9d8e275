/*
 * fuzz_ws.c — libFuzzer driver for the WebSocket codec (include/m0/ws.h):
 * the client frame parser, the server frame encoder, the UTF-8 check, and
 * the SSE → WebSocket data extraction (m0_sse_event_data).
 *
 * Input layout:
 *   byte 0     the parser's max_message: 0 (no limit) when 0, else
 *              byte * 37 bytes (so limits fall inside, between and across
 *              frames of the inputs libFuzzer builds);
 *   byte 1     the feeding pattern's seed (piece sizes 1..16);
 *   the rest   client bytes, as they would arrive on a socket.
 *
 * Checked:
 *   1. Chunking does not matter. The bytes go to one parser whole and to a
 *      second in pieces; both report the same events (type, opcode, code,
 *      payload), and each call honours its contract: *used ≤ what was
 *      given, NONE only when every byte was consumed, nothing after CLOSE
 *      or ERROR.
 *   2. What a reported event promises holds: a message is no longer than
 *      max_message, a text message is UTF-8 (by a reference decoder written
 *      here, not the parser's own state machine), a control payload is at
 *      most 125 bytes, a close code is one the wire allows (or 1005), an
 *      error's code is 1002, 1007 or 1009 with a reason.
 *   3. Round trip. Every message and ping reported is encoded again as a
 *      client would send it (masked, split into the fragments the input
 *      chose), parsed by a fresh parser and must come back identical; the
 *      server encoder's head (m0_ws_frame) decodes to the same length.
 *   4. m0_ws_utf8_valid agrees with the reference decoder on the input.
 *   5. m0_sse_event_data never reads past the input nor appends more bytes
 *      than the input holds, and consumes 0 or up to a line break.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/buf.h"
#include "m0/sse.h"
#include "m0/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "fuzz_ws: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                    \
        }                                                                               \
    } while (0)

#define MAX_EVENTS 64

struct rec {
    enum m0_ws_event_type type;
    int opcode;
    unsigned code;
    size_t len;
    char *data;
};

/* RFC 3629 by decoding code points, the slow and obvious way. */
static int ref_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k;
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            cp = c & 0x1f;
            k = 1;
        } else if ((c & 0xf0) == 0xe0) {
            cp = c & 0x0f;
            k = 2;
        } else if ((c & 0xf8) == 0xf0) {
            cp = c & 0x07;
            k = 3;
        } else {
            return 0;
        }
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        static const uint32_t min[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < min[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += k + 1;
    }
    return 1;
}

static void rec_free(struct rec *r, int n)
{
    for (int i = 0; i < n; i++)
        free(r[i].data);
}

/* Parse all of in, in pieces chosen by seed (0: whole). Returns the events. */
static int run(const uint8_t *in, size_t n, uint64_t max, unsigned seed, struct rec *out)
{
    struct m0_ws_parser p;
    m0_ws_parser_init(&p, max);
    int nev = 0, ended = 0;
    size_t off = 0;
    unsigned state = seed * 2654435761u + 1;
    while (off < n) {
        size_t avail = n - off;
        if (seed != 0) {
            state = state * 1103515245u + 12345u;
            size_t piece = 1 + (state >> 16) % 16;
            if (avail > piece)
                avail = piece;
        }
        size_t used = 12345;
        struct m0_ws_event ev;
        enum m0_ws_event_type t = m0_ws_parse(&p, in + off, avail, &used, &ev);
        CHECK(used <= avail);
        off += used;
        if (t == M0_WS_EV_NONE) {
            CHECK(used == avail);
            continue;
        }
        if (nev == MAX_EVENTS)
            break;                     /* enough: the rest is not compared */
        struct rec *r = &out[nev++];
        r->type = t;
        r->opcode = ev.opcode;
        r->code = ev.code;
        r->len = ev.len;
        r->data = malloc(ev.len + 1);
        if (ev.len)
            memcpy(r->data, ev.data, ev.len);
        switch (t) {
        case M0_WS_EV_MESSAGE:
            CHECK(ev.opcode == M0_WS_TEXT || ev.opcode == M0_WS_BINARY);
            CHECK(max == 0 || ev.len <= max);
            if (ev.opcode == M0_WS_TEXT)
                CHECK(ref_utf8((const uint8_t *)ev.data, ev.len));
            if (nev % 2) {
                struct m0_buf taken = {0};
                m0_ws_parser_take(&p, &taken);
                CHECK(taken.len == ev.len);
                m0_buf_free(&taken);
            }
            break;
        case M0_WS_EV_PING:
        case M0_WS_EV_PONG:
            CHECK(ev.len <= M0_WS_CONTROL_MAX);
            break;
        case M0_WS_EV_CLOSE:
            CHECK(ev.code == M0_WS_CLOSE_NO_STATUS || m0_ws_close_code_valid(ev.code));
            CHECK(ev.len <= M0_WS_CONTROL_MAX - 2);
            CHECK(ref_utf8((const uint8_t *)ev.data, ev.len));
            ended = 1;
            break;
        case M0_WS_EV_ERROR:
            CHECK(ev.code == 1002 || ev.code == 1007 || ev.code == 1009);
            CHECK(ev.why != NULL);
            ended = 1;
            break;
        default:
            CHECK(0);
        }
        if (ended) {
            /* Nothing more is reported, whatever follows. */
            size_t u;
            struct m0_ws_event e2;
            CHECK(m0_ws_parse(&p, in, n, &u, &e2) == M0_WS_EV_NONE && u == n);
            break;
        }
    }
    m0_ws_parser_free(&p);
    return nev;
}

/* A client frame, masked with key. */
static void client_frame(struct m0_buf *b, int fin, int opcode, const char *p, size_t n, const uint8_t key[4])
{
    uint8_t head[M0_WS_FRAME_HEAD_MAX];
    size_t h = m0_ws_frame_head(head, opcode, n, fin);
    head[1] |= 0x80;
    m0_buf_append(b, head, h);
    m0_buf_append(b, key, 4);
    char *dst = m0_buf_reserve(b, n);
    for (size_t i = 0; i < n; i++)
        dst[i] = (char)((uint8_t)p[i] ^ key[i & 3]);
    b->len += n;
}

static void round_trip(const struct rec *r, int n, const uint8_t *in, size_t size, uint64_t max)
{
    uint8_t key[4] = {0xa5, 0x5a, 0x0f, 0xf0};
    if (size >= 4)
        memcpy(key, in, 4);
    struct m0_buf b = {0};
    int want = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].type == M0_WS_EV_MESSAGE) {
            /* Split into up to three fragments at input-chosen points. */
            size_t cut1 = size ? in[i % size] % (r[i].len + 1) : 0;
            size_t cut2 = cut1 + (size ? in[(i + 1) % size] % (r[i].len - cut1 + 1) : 0);
            client_frame(&b, 0, r[i].opcode, r[i].data, cut1, key);
            client_frame(&b, 0, M0_WS_CONT, r[i].data + cut1, cut2 - cut1, key);
            client_frame(&b, 1, M0_WS_CONT, r[i].data + cut2, r[i].len - cut2, key);
            want++;
        } else if (r[i].type == M0_WS_EV_PING) {
            client_frame(&b, 1, M0_WS_PING, r[i].data, r[i].len, key);
            want++;
        }
    }
    struct rec *back = calloc(MAX_EVENTS, sizeof *back);
    int got = run((const uint8_t *)b.data, b.len, max, 0, back);
    CHECK(got == want);
    int j = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].type != M0_WS_EV_MESSAGE && r[i].type != M0_WS_EV_PING)
            continue;
        CHECK(back[j].type == r[i].type && back[j].opcode == r[i].opcode && back[j].len == r[i].len);
        CHECK(r[i].len == 0 || memcmp(back[j].data, r[i].data, r[i].len) == 0);
        j++;
    }
    rec_free(back, got);
    free(back);
    m0_buf_free(&b);
}

static void check_encoder(size_t len)
{
    uint8_t head[M0_WS_FRAME_HEAD_MAX];
    size_t h = m0_ws_frame_head(head, M0_WS_BINARY, len, 1);
    uint64_t got = head[1] & 0x7f;
    CHECK(!(head[1] & 0x80));
    if (got == 126) {
        CHECK(h == 4);
        got = (uint64_t)head[2] << 8 | head[3];
        CHECK(got >= 126);
    } else if (got == 127) {
        CHECK(h == 10);
        got = 0;
        for (int i = 0; i < 8; i++)
            got = got << 8 | head[2 + i];
        CHECK(got > 0xffff);
    } else {
        CHECK(h == 2);
    }
    CHECK(got == len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint64_t max = (uint64_t)data[0] * 37;
    unsigned seed = data[1] | 1u;
    const uint8_t *in = data + 2;
    size_t n = size - 2;

    struct rec *whole = calloc(MAX_EVENTS, sizeof *whole);
    struct rec *pieces = calloc(MAX_EVENTS, sizeof *pieces);
    int a = run(in, n, max, 0, whole);
    int b = run(in, n, max, seed, pieces);
    CHECK(a == b);
    for (int i = 0; i < a; i++) {
        CHECK(whole[i].type == pieces[i].type && whole[i].opcode == pieces[i].opcode &&
              whole[i].code == pieces[i].code && whole[i].len == pieces[i].len);
        CHECK(whole[i].len == 0 || memcmp(whole[i].data, pieces[i].data, whole[i].len) == 0);
    }
    round_trip(whole, a, in, n, max);
    rec_free(whole, a);
    rec_free(pieces, b);
    free(whole);
    free(pieces);

    CHECK(m0_ws_utf8_valid(in, n) == ref_utf8(in, n));
    check_encoder(n);
    check_encoder(n * 257);
    if (n > 0)
        check_encoder((size_t)in[0] << (n % 40));

    struct m0_buf d = {0};
    int fire;
    const char *ev;
    size_t evl;
    size_t took = m0_sse_event_data((const char *)in, n, &d, &fire, &ev, &evl);
    CHECK(took <= n);
    CHECK(d.len <= n);
    CHECK(took == 0 ? d.len == 0 && !fire : (in[took - 1] == '\n' || in[took - 1] == '\r'));
    CHECK(!fire || took > 0);
    m0_buf_free(&d);
    return 0;
}
