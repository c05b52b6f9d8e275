/*
 * grip_item.c — a GRIP item on the bus, Grip-Sig and the control port's
 * Bearer check (see grip_item.h).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "m0/epcp.h"
#include "m0/grip_item.h"
#include "m0/jwt.h"

static void put(struct m0_buf *out, const void *p, size_t n)
{
    m0_buf_append(out, p, n);
}

/* Little-endian, whatever the host's order: with --broker a frame is read
 * by other hosts. */
static void put16(struct m0_buf *out, size_t v)
{
    unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    put(out, x, sizeof x);
}

static void put32(struct m0_buf *out, size_t v)
{
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(out, x, sizeof x);
}

static void bytes16(struct m0_buf *out, const char *p, size_t n)
{
    if (n > 0xffff)
        n = 0xffff;          /* names, ids and reasons are bounded far below by epcp.c */
    put16(out, n);
    put(out, p, n);
}

static void bytes32(struct m0_buf *out, const char *p, size_t n)
{
    put32(out, n);
    put(out, p, n);
}

int m0_grip_item_encode(struct m0_buf *out, const struct m0_epcp_item *it)
{
    const struct m0_epcp_stream *st = &it->stream;
    const struct m0_epcp_response *rs = &it->response;
    int stream = st->present && st->action == M0_EPCP_SEND;
    int close = st->present && st->action == M0_EPCP_CLOSE;
    int response = rs->present && rs->action == M0_EPCP_SEND;
    int ws = it->ws.present && it->ws.action == M0_EPCP_SEND;
    if (!stream && !close && !response && !ws)
        return M0_ERR;
    m0_buf_reset(out);
    uint8_t flags = (uint8_t)((stream ? M0_GRIP_IT_STREAM : 0) | (close ? M0_GRIP_IT_STREAM_CLOSE : 0) |
                              (response ? M0_GRIP_IT_RESPONSE : 0) | (it->has_id ? M0_GRIP_IT_ID : 0) |
                              (it->has_prev_id ? M0_GRIP_IT_PREV_ID : 0) |
                              (st->present && st->has_filters ? M0_GRIP_IT_FILTERS : 0) |
                              (ws ? M0_GRIP_IT_WS : 0));
    put(out, "\0G", 2);
    put(out, &flags, 1);
    put32(out, st->present ? st->filters : 0);
    bytes16(out, it->id.p, it->has_id ? it->id.len : 0);
    bytes16(out, it->prev_id.p, it->has_prev_id ? it->prev_id.len : 0);
    bytes32(out, st->content.p, stream ? st->content.len : 0);
    put16(out, response ? (size_t)rs->code : 0);
    bytes16(out, rs->reason.p, response ? rs->reason.len : 0);
    unsigned nh = response ? rs->nheaders : 0;
    if (nh > M0_GRIP_ITEM_HEADERS_MAX)
        nh = M0_GRIP_ITEM_HEADERS_MAX;
    put16(out, nh);
    for (unsigned i = 0; i < nh; i++) {
        bytes16(out, rs->headers[i].name.p, rs->headers[i].name.len);
        bytes16(out, rs->headers[i].value.p, rs->headers[i].value.len);
    }
    bytes32(out, rs->body.p, response ? rs->body.len : 0);
    unsigned nm = it->nmeta > M0_GRIP_ITEM_META_MAX ? M0_GRIP_ITEM_META_MAX : it->nmeta;
    uint8_t nm8 = (uint8_t)nm;
    put(out, &nm8, 1);
    for (unsigned i = 0; i < nm; i++) {
        bytes16(out, it->meta[i].name.p, it->meta[i].name.len);
        bytes16(out, it->meta[i].value.p, it->meta[i].value.len);
    }
    uint8_t op = (uint8_t)(ws ? it->ws.type : 0);
    put(out, &op, 1);
    bytes32(out, it->ws.content.p, ws ? it->ws.content.len : 0);
    bytes16(out, it->channel.p, it->channel.len);
    return M0_OK;
}

/* A cursor over a frame; any read past its end sets bad. */
struct rd {
    const char *p, *end;
    int bad;
};

static uint32_t get_n(struct rd *r, size_t w)
{
    if (r->bad || (size_t)(r->end - r->p) < w) {
        r->bad = 1;
        return 0;
    }
    const unsigned char *u = (const unsigned char *)r->p;
    uint32_t v = 0;
    for (size_t i = w; i-- > 0;)
        v = v << 8 | u[i];       /* little-endian (put16, put32) */
    r->p += w;
    return v;
}

static struct m0_grip_view get_bytes(struct rd *r, size_t w)
{
    size_t n = get_n(r, w);
    struct m0_grip_view v = {"", 0};
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = 1;
        return v;
    }
    v.p = r->p;
    v.n = n;
    r->p += n;
    return v;
}

int m0_grip_item_decode(const char *frame, size_t n, struct m0_grip_item *it)
{
    memset(it, 0, sizeof *it);
    if (!m0_grip_is_item(frame, n))
        return M0_ERR;
    struct rd r = {frame + 2, frame + n, 0};
    it->flags = get_n(&r, 1);
    it->filters = get_n(&r, 4);
    it->id = get_bytes(&r, 2);
    it->prev_id = get_bytes(&r, 2);
    it->content = get_bytes(&r, 4);
    it->code = (int)get_n(&r, 2);
    it->reason = get_bytes(&r, 2);
    it->nheaders = get_n(&r, 2);
    if (it->nheaders > M0_GRIP_ITEM_HEADERS_MAX)
        return M0_ERR;
    for (unsigned i = 0; i < it->nheaders; i++) {
        it->hname[i] = get_bytes(&r, 2);
        it->hvalue[i] = get_bytes(&r, 2);
    }
    it->body = get_bytes(&r, 4);
    it->nmeta = get_n(&r, 1);
    if (it->nmeta > M0_GRIP_ITEM_META_MAX)
        return M0_ERR;
    for (unsigned i = 0; i < it->nmeta; i++) {
        it->mkey[i] = get_bytes(&r, 2);
        it->mvalue[i] = get_bytes(&r, 2);
    }
    it->ws_opcode = (int)get_n(&r, 1);
    it->ws_content = get_bytes(&r, 4);
    /* A ws-message is text, binary, ping or pong (epcp.h; a control
     * frame's payload at most 125 bytes, RFC 6455 §5.5), and only there
     * when the flag says so. */
    int op = it->ws_opcode;
    int data = op == M0_EPCP_WS_TEXT || op == M0_EPCP_WS_BINARY;
    int control = op == M0_EPCP_WS_PING || op == M0_EPCP_WS_PONG;
    if ((it->flags & M0_GRIP_IT_WS) ? !(data || (control && it->ws_content.n <= 125))
                                    : (op != 0 || it->ws_content.n != 0))
        return M0_ERR;
    it->channel = get_bytes(&r, 2);
    /* An http-response answers a held request: a final status (RFC 9110
     * §15; epcp.c takes no other), never a 1xx, which is not an answer. */
    if ((it->flags & M0_GRIP_IT_RESPONSE) && (it->code < 200 || it->code > 599))
        return M0_ERR;
    return r.bad || r.p != r.end ? M0_ERR : M0_OK;
}

ssize_t m0_grip_sig(char *out, size_t cap, const unsigned char *key, size_t keylen, int64_t now_s)
{
    char payload[96];
    int n = snprintf(payload, sizeof payload, "{\"iss\":\"%s\",\"exp\":%lld}", M0_GRIP_SIG_ISS,
                     (long long)(now_s + M0_GRIP_SIG_TTL));
    return m0_jwt_sign_hs256(NULL, payload, (size_t)n, key, keylen, out, cap);
}

const char *m0_grip_sig_cached(const unsigned char *key, size_t keylen, int64_t now_s, size_t *len)
{
    /* Per thread (the handler pool's and the executors' threads build the
     * requests), like bus.c's frame buffers: nothing is shared. */
    static __thread char tok[M0_GRIP_SIG_MAX];
    static __thread size_t tok_len;
    static __thread int64_t signed_at;
    static __thread const unsigned char *signed_key;
    if (tok_len == 0 || signed_key != key || now_s - signed_at >= M0_GRIP_SIG_TTL / 2 || now_s < signed_at) {
        ssize_t n = m0_grip_sig(tok, sizeof tok, key, keylen, now_s);
        if (n <= 0) {
            tok_len = 0;
            return NULL;
        }
        tok_len = (size_t)n;
        signed_at = now_s;
        signed_key = key;
    }
    *len = tok_len;
    return tok;
}

int m0_grip_bearer_ok(const char *v, size_t n, const unsigned char *key, size_t keylen, int64_t now_s)
{
    /* RFC 6750 §2.1: "Bearer" (case-insensitive, RFC 9110 §11.1) SP token. */
    if (n < 7 || strncasecmp(v, "bearer ", 7) != 0)
        return 0;
    v += 7;
    n -= 7;
    while (n > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n == 0)
        return 0;
    if (n == keylen && CRYPTO_memcmp(v, key, n) == 0)
        return 1;                   /* pubcontrol's ?key= without iss: the key itself */
    struct m0_jwt_key k = {.kid = NULL, .secret = key, .len = keylen};
    struct m0_jwt_keys ks = {.v = &k, .n = 1};
    struct m0_jwt t = {0};
    int rc = m0_jwt_verify(v, n, &ks, now_s, M0_JWT_LEEWAY, &t);
    m0_jwt_clear(&t);
    return rc == M0_JWT_OK;
}
