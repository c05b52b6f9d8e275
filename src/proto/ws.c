/*
 * ws.c — RFC 6455 (see ws.h): the handshake check and accept value, the
 * client frame parser, the server frame encoder, and the handshake
 * snapshot an inbound message is delivered with.
 *
 * The parser is byte-driven and keeps no input of its own: a frame head
 * (at most 14 bytes) accumulates in the struct, payload bytes are unmasked
 * straight into the message being reassembled (or the 125-byte control
 * buffer), so a caller may hand it one byte at a time or a whole read.
 * Every limit is decided as early as the bytes allow: the message size at
 * the frame head, UTF-8 at the first bad byte (§8.1 lets an endpoint fail
 * fast, and it keeps a bad sender from making us buffer a megabyte first).
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "m0/base64.h"
#include "m0/response.h"
#include "m0/ws.h"

/* §1.3: the GUID every server appends to the client's key. */
static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* ------------------------------------------------------------ handshake */

/* Does any field line named name list token (case-insensitive, §4.2.1
 * items 3 and 4: "Upgrade ... including websocket", "Connection ...
 * including Upgrade")? */
static int any_lists(const struct m0_req *r, const char *name, const char *token)
{
    size_t n = strlen(name);
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (h->name_len == n && strncasecmp(h->name, name, n) == 0 &&
            m0_http_list_has(h->value, h->value_len, token))
            return 1;
    }
    return 0;
}

/* The only field line named name: NULL when there is none, and *dup set
 * when there are several. */
static const struct m0_hdr *only(const struct m0_req *r, const char *name, int *dup)
{
    size_t n = strlen(name);
    const struct m0_hdr *found = NULL;
    *dup = 0;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (h->name_len == n && strncasecmp(h->name, name, n) == 0) {
            if (found != NULL)
                *dup = 1;
            found = h;
        }
    }
    return found;
}

/* §4.2.1 item 5: "a base64-encoded value that, when decoded, is 16 bytes
 * in length": 22 significant characters, the last carrying only 2 bits,
 * and "==". */
static int key_is_16_bytes(const char *k, size_t n)
{
    if (n != 24 || k[22] != '=' || k[23] != '=')
        return 0;
    for (size_t i = 0; i < 22; i++) {
        if (m0_base64_value((unsigned char)k[i], 0) < 0)
            return 0;
    }
    return (m0_base64_value((unsigned char)k[21], 0) & 0x0f) == 0;
}

int m0_ws_handshake_check(const struct m0_req *r, struct m0_ws_handshake *hs, const char **why)
{
    int dup;
    *why = NULL;
    if (r->method == NULL || strcmp(r->method, "GET") != 0)
        return *why = "a WebSocket handshake is a GET request", 400;
    if (r->http_major < 1 || (r->http_major == 1 && r->http_minor < 1))
        return *why = "a WebSocket handshake needs HTTP/1.1", 400;
    if (m0_req_header(r, "host") == NULL)
        return *why = "the handshake has no Host", 400;
    if (!any_lists(r, "upgrade", "websocket"))
        return *why = "the handshake does not ask to upgrade to websocket", 400;
    if (!any_lists(r, "connection", "upgrade"))
        return *why = "the handshake's Connection field does not list Upgrade", 400;
    const struct m0_hdr *key = only(r, "sec-websocket-key", &dup);
    if (key == NULL || dup || !key_is_16_bytes(key->value, key->value_len))
        return *why = "Sec-WebSocket-Key is missing or not the base64 of 16 bytes", 400;
    const struct m0_hdr *ver = only(r, "sec-websocket-version", &dup);
    if (ver == NULL || dup || ver->value_len != 2 || memcmp(ver->value, "13", 2) != 0)
        return *why = "this server speaks WebSocket version 13", 426;
    hs->key = key->value;
    hs->key_len = key->value_len;
    return 0;
}

void m0_ws_accept(const char *key, size_t key_len, char out[M0_WS_ACCEPT_LEN + 1])
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha1(), NULL) != 1 ||
        EVP_DigestUpdate(ctx, key, key_len) != 1 || EVP_DigestUpdate(ctx, ws_guid, sizeof ws_guid - 1) != 1 ||
        EVP_DigestFinal_ex(ctx, digest, &dlen) != 1 || dlen != 20)
        abort();     /* libcrypto without SHA-1 cannot speak RFC 6455 at all */
    EVP_MD_CTX_free(ctx);
    /* 20 bytes → 28 characters and the NUL EVP_EncodeBlock writes. */
    EVP_EncodeBlock((unsigned char *)out, digest, 20);
}

int m0_ws_protocol_offered(const struct m0_req *r, const char *proto, size_t plen)
{
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (h->name_len != 22 || strncasecmp(h->name, "sec-websocket-protocol", 22) != 0)
            continue;
        const char *p = h->value, *item;
        size_t len;
        while (m0_http_list_next(&p, h->value + h->value_len, &item, &len)) {
            if (len == plen && memcmp(item, proto, plen) == 0)
                return 1;
        }
    }
    return 0;
}

void m0_ws_switching(struct m0_buf *out, const char *accept, const char *protocol, size_t plen,
                     const char *extra, size_t extra_len, int has_date, int has_server)
{
    m0_buf_puts(out, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Accept: ");
    m0_buf_puts(out, accept);
    m0_buf_puts(out, "\r\n");
    if (protocol != NULL) {
        m0_buf_puts(out, "Sec-WebSocket-Protocol: ");
        m0_buf_append(out, protocol, plen);
        m0_buf_puts(out, "\r\n");
    }
    if (extra_len > 0)
        m0_buf_append(out, extra, extra_len);
    m0_head_server_fields(out, has_date, has_server);
    m0_buf_puts(out, "\r\n");
}

void m0_ws_refusal(struct m0_buf *out, int status, const char *why)
{
    char body[256];
    int n = snprintf(body, sizeof body, "%d %s: %s\n", status, m0_status_reason(status),
                     why ? why : m0_status_reason(status));
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof body)
        n = sizeof body - 1;
    m0_buf_printf(out, "HTTP/1.1 %d %s\r\n", status, m0_status_reason(status));
    if (status == 426)
        m0_buf_puts(out, "Sec-WebSocket-Version: 13\r\n");   /* §4.4 */
    m0_head_server_fields(out, 0, 0);
    m0_buf_printf(out, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
                       "Connection: close\r\n\r\n", n);
    m0_buf_append(out, body, (size_t)n);
}

/* ---------------------------------------------------------------- UTF-8 */

/*
 * RFC 3629 §4 as a small state machine that survives being cut anywhere
 * (a fragment boundary may split a character, §5.6): need continuation
 * bytes are owed, the next in [lo, hi] (the first one's range is narrowed
 * to exclude overlongs, surrogates and code points past U+10FFFF).
 */
static int utf8_feed(uint8_t *need, uint8_t *lo, uint8_t *hi, const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (*need == 0) {
            /* ASCII runs, eight bytes at a time. */
            while (i + 8 <= n) {
                uint64_t v;
                memcpy(&v, s + i, 8);
                if (v & 0x8080808080808080ull)
                    break;
                i += 8;
            }
            if (i == n)
                break;
            uint8_t c = s[i++];
            if (c < 0x80)
                continue;
            *lo = 0x80;
            *hi = 0xbf;
            if (c >= 0xc2 && c <= 0xdf) {
                *need = 1;
            } else if (c >= 0xe0 && c <= 0xef) {
                *need = 2;
                if (c == 0xe0)
                    *lo = 0xa0;          /* overlong */
                else if (c == 0xed)
                    *hi = 0x9f;          /* surrogates */
            } else if (c >= 0xf0 && c <= 0xf4) {
                *need = 3;
                if (c == 0xf0)
                    *lo = 0x90;          /* overlong */
                else if (c == 0xf4)
                    *hi = 0x8f;          /* past U+10FFFF */
            } else {
                return 0;                /* 80..C1, F5..FF never start a character */
            }
            continue;
        }
        uint8_t c = s[i++];
        if (c < *lo || c > *hi)
            return 0;
        (*need)--;
        *lo = 0x80;
        *hi = 0xbf;
    }
    return 1;
}

int m0_ws_utf8_valid(const void *p, size_t n)
{
    uint8_t need = 0, lo = 0x80, hi = 0xbf;
    return utf8_feed(&need, &lo, &hi, p, n) && need == 0;
}

int m0_ws_close_code_valid(unsigned code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

/* --------------------------------------------------------------- parser */

void m0_ws_parser_init(struct m0_ws_parser *p, uint64_t max_message)
{
    memset(p, 0, sizeof *p);
    p->max_message = max_message;
}

void m0_ws_parser_free(struct m0_ws_parser *p)
{
    m0_buf_free(&p->msg);
    free(p->ctl);
    p->ctl = NULL;
}

void m0_ws_parser_take(struct m0_ws_parser *p, struct m0_buf *dst)
{
    m0_buf_free(dst);
    *dst = p->msg;
    memset(&p->msg, 0, sizeof p->msg);
}

/* dst[i] = src[i] ^ mask[(off + i) % 4], a word at a time (8 is a multiple
 * of the key's period, so the phase is the same at every word). */
static void unmask(char *dst, const uint8_t *src, size_t n, const uint8_t mask[4], uint64_t off)
{
    uint8_t m[8];
    for (int k = 0; k < 8; k++)
        m[k] = mask[(off + (uint64_t)k) & 3];
    uint64_t m64;
    memcpy(&m64, m, 8);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, src + i, 8);
        v ^= m64;
        memcpy(dst + i, &v, 8);
    }
    for (; i < n; i++)
        dst[i] = (char)(src[i] ^ m[i & 7]);
}

static enum m0_ws_event_type fail(struct m0_ws_parser *p, struct m0_ws_event *ev, uint16_t code, const char *why)
{
    p->done = 1;
    ev->type = M0_WS_EV_ERROR;
    ev->code = code;
    ev->why = why;
    ev->data = NULL;
    ev->len = 0;
    return M0_WS_EV_ERROR;
}

/* The first two head bytes: everything about the frame but its length's
 * extension and the key can be judged now. Returns 0, or fails the parse. */
static int judge_head(struct m0_ws_parser *p, struct m0_ws_event *ev)
{
    uint8_t b0 = p->head[0], b1 = p->head[1];
    uint8_t op = b0 & 0x0f, len7 = b1 & 0x7f;
    if (b0 & 0x70)
        return fail(p, ev, M0_WS_CLOSE_PROTOCOL, "reserved bits set (no extension was negotiated)"), -1;
    if (op != M0_WS_CONT && op != M0_WS_TEXT && op != M0_WS_BINARY && op != M0_WS_CLOSE && op != M0_WS_PING &&
        op != M0_WS_PONG)
        return fail(p, ev, M0_WS_CLOSE_PROTOCOL, "reserved opcode"), -1;
    if (!(b1 & 0x80))
        return fail(p, ev, M0_WS_CLOSE_PROTOCOL, "unmasked client frame"), -1;
    if (op & 0x8) {
        if (!(b0 & 0x80))
            return fail(p, ev, M0_WS_CLOSE_PROTOCOL, "fragmented control frame"), -1;
        if (len7 > M0_WS_CONTROL_MAX)
            return fail(p, ev, M0_WS_CLOSE_PROTOCOL, "control frame longer than 125 bytes"), -1;
    } else if (op == M0_WS_CONT && p->msg_opcode == 0) {
        return fail(p, ev, M0_WS_CLOSE_PROTOCOL, "continuation frame with no message open"), -1;
    } else if (op != M0_WS_CONT && p->msg_opcode != 0) {
        return fail(p, ev, M0_WS_CLOSE_PROTOCOL, "new message inside a fragmented one"), -1;
    }
    p->fin = (b0 & 0x80) != 0;
    p->opcode = op;
    return 0;
}

/* Head bytes a frame needs, known once its second byte is in. */
static unsigned head_size(const struct m0_ws_parser *p)
{
    uint8_t len7 = p->head[1] & 0x7f;
    return 2u + (len7 == 126 ? 2u : len7 == 127 ? 8u : 0u) + 4u;
}

/* The head is complete: its length (minimal form, §5.2) and key. */
static int finish_head(struct m0_ws_parser *p, struct m0_ws_event *ev)
{
    uint8_t len7 = p->head[1] & 0x7f;
    uint64_t len = len7;
    const uint8_t *k = p->head + 2;
    if (len7 == 126) {
        len = (uint64_t)p->head[2] << 8 | p->head[3];
        if (len < 126)
            return fail(p, ev, M0_WS_CLOSE_PROTOCOL, "frame length not in its minimal form"), -1;
        k = p->head + 4;
    } else if (len7 == 127) {
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | p->head[2 + i];
        if (len >> 63)
            return fail(p, ev, M0_WS_CLOSE_PROTOCOL, "frame length over 2^63"), -1;
        if (len <= 0xffff)
            return fail(p, ev, M0_WS_CLOSE_PROTOCOL, "frame length not in its minimal form"), -1;
        k = p->head + 10;
    }
    memcpy(p->mask, k, 4);
    if (!(p->opcode & 0x8)) {
        uint64_t have = p->opcode == M0_WS_CONT ? p->msg.len : 0;
        if (p->max_message != 0 && (len > p->max_message || have + len > p->max_message))
            return fail(p, ev, M0_WS_CLOSE_TOO_BIG, "message larger than --ws-max-message"), -1;
        if (p->opcode != M0_WS_CONT) {
            p->msg_opcode = p->opcode;
            p->utf8_need = 0;
            m0_buf_reset(&p->msg);
        }
    } else {
        p->ctl_len = 0;
        if (len > 0 && p->ctl == NULL)
            p->ctl = m0_xmalloc(M0_WS_CONTROL_MAX);
    }
    p->left = len;
    p->off = 0;
    p->in_payload = 1;
    p->head_len = 0;
    return 0;
}

/* A control frame is complete: report it (close frames are checked). */
static enum m0_ws_event_type control(struct m0_ws_parser *p, struct m0_ws_event *ev)
{
    ev->data = p->ctl ? p->ctl : "";
    ev->len = p->ctl_len;
    ev->code = 0;
    ev->why = NULL;
    if (p->opcode == M0_WS_PING)
        return ev->type = M0_WS_EV_PING;
    if (p->opcode == M0_WS_PONG)
        return ev->type = M0_WS_EV_PONG;
    /* Close (§5.5.1): nothing, or a 2-byte code and a UTF-8 reason. */
    if (p->ctl_len == 1)
        return fail(p, ev, M0_WS_CLOSE_PROTOCOL, "close frame with a 1-byte payload");
    if (p->ctl_len == 0) {
        ev->code = M0_WS_CLOSE_NO_STATUS;
    } else {
        unsigned code = (unsigned)(uint8_t)p->ctl[0] << 8 | (uint8_t)p->ctl[1];
        if (!m0_ws_close_code_valid(code))
            return fail(p, ev, M0_WS_CLOSE_PROTOCOL, "close code not allowed on the wire");
        if (!m0_ws_utf8_valid(p->ctl + 2, p->ctl_len - 2u))
            return fail(p, ev, M0_WS_CLOSE_INVALID, "close reason is not UTF-8");
        ev->code = (uint16_t)code;
        ev->data = p->ctl + 2;
        ev->len = p->ctl_len - 2u;
    }
    p->done = 1;
    return ev->type = M0_WS_EV_CLOSE;
}

enum m0_ws_event_type m0_ws_parse(struct m0_ws_parser *p, const void *data, size_t n, size_t *used,
                                  struct m0_ws_event *ev)
{
    const uint8_t *s = data;
    size_t i = 0;
    memset(ev, 0, sizeof *ev);
    if (p->done) {
        *used = n;
        return M0_WS_EV_NONE;
    }
    for (;;) {
        if (!p->in_payload) {
            if (i == n)
                break;
            p->head[p->head_len++] = s[i++];
            if (p->head_len == 2 && judge_head(p, ev) != 0)
                return *used = i, M0_WS_EV_ERROR;
            if (p->head_len < 2 || p->head_len < head_size(p))
                continue;
            if (finish_head(p, ev) != 0)
                return *used = i, M0_WS_EV_ERROR;
        }
        /* Payload, as much as is here (a zero-length frame completes now). */
        size_t take = n - i;
        if (take > p->left)
            take = (size_t)p->left;
        if (take > 0) {
            if (p->opcode & 0x8) {
                unmask(p->ctl + p->ctl_len, s + i, take, p->mask, p->off);
                p->ctl_len = (uint8_t)(p->ctl_len + take);
            } else {
                char *dst = m0_buf_reserve(&p->msg, take);
                unmask(dst, s + i, take, p->mask, p->off);
                p->msg.len += take;
                if (p->msg_opcode == M0_WS_TEXT &&
                    !utf8_feed(&p->utf8_need, &p->utf8_lo, &p->utf8_hi, (const uint8_t *)dst, take))
                    return *used = i + take, fail(p, ev, M0_WS_CLOSE_INVALID, "text message is not UTF-8");
            }
            i += take;
            p->left -= take;
            p->off += take;
        }
        if (p->left > 0)
            break;       /* all of the input went into this frame */
        p->in_payload = 0;
        if (p->opcode & 0x8) {
            *used = i;
            return control(p, ev);
        }
        if (!p->fin)
            continue;    /* a fragment: the message goes on in a continuation */
        if (p->msg_opcode == M0_WS_TEXT && p->utf8_need != 0)
            return *used = i, fail(p, ev, M0_WS_CLOSE_INVALID, "text message ends inside a character");
        ev->type = M0_WS_EV_MESSAGE;
        ev->opcode = p->msg_opcode;
        ev->data = p->msg.data ? p->msg.data : "";
        ev->len = p->msg.len;
        p->msg_opcode = 0;
        *used = i;
        return M0_WS_EV_MESSAGE;
    }
    *used = n;
    return M0_WS_EV_NONE;
}

/* -------------------------------------------------------------- encoder */

size_t m0_ws_frame_head(uint8_t out[M0_WS_FRAME_HEAD_MAX], int opcode, uint64_t len, int fin)
{
    out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
    if (len <= 125) {
        out[1] = (uint8_t)len;
        return 2;
    }
    if (len <= 0xffff) {
        out[1] = 126;
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        return 4;
    }
    out[1] = 127;
    for (int i = 0; i < 8; i++)
        out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
    return 10;
}

void m0_ws_frame(struct m0_buf *b, int opcode, const void *p, size_t n)
{
    uint8_t head[M0_WS_FRAME_HEAD_MAX];
    size_t h = m0_ws_frame_head(head, opcode, n, 1);
    char *dst = m0_buf_reserve(b, h + n);
    memcpy(dst, head, h);
    if (n > 0)
        memcpy(dst + h, p, n);
    b->len += h + n;
}

void m0_ws_close_frame(struct m0_buf *b, unsigned code, const char *reason, size_t len)
{
    char payload[M0_WS_CONTROL_MAX];
    if (code == 0) {
        m0_ws_frame(b, M0_WS_CLOSE, NULL, 0);
        return;
    }
    if (len > M0_WS_CONTROL_MAX - 2) {
        len = M0_WS_CONTROL_MAX - 2;
        while (len > 0 && ((unsigned char)reason[len] & 0xc0) == 0x80)
            len--;       /* never cut a character in two */
    }
    payload[0] = (char)(code >> 8);
    payload[1] = (char)code;
    if (len > 0)
        memcpy(payload + 2, reason, len);
    m0_ws_frame(b, M0_WS_CLOSE, payload, len + 2);
}

/* ------------------------------------------------------------- snapshot */

/* Strings laid out as (uint32 length, bytes) pairs: target, path, query,
 * authority (length NONE: absent), then name/value pairs. */
#define NONE 0xffffffffu

struct m0_ws_snapshot {
    uint32_t size;            /* bytes of data */
    uint32_t nhdrs;
    char data[];
};

static int named_in(const char *n, size_t len, const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (strlen(names[i]) == len && strncasecmp(n, names[i], len) == 0)
            return 1;
    }
    return 0;
}

/* Handshake fields that must not reappear on a message's request. Over
 * HTTP (Pushpin's WebSocket-over-HTTP, woh.h) the Sec-WebSocket-* fields
 * stay (the application chooses a subprotocol from them) but Extensions,
 * which the server negotiates itself, and the fields the protocol's
 * requests set (Accept, Content-Type, Connection-Id, Meta-*: a client's own
 * never reach the application, as Pushpin drops them). */
static int handshake_field(const char *n, size_t len, int over_http)
{
    static const char *const drop[] = {"upgrade", "connection", "content-length", "transfer-encoding",
                                       "expect", "keep-alive", "te", "trailer"};
    static const char *const woh_drop[] = {"sec-websocket-extensions", "accept", "content-type", "connection-id"};
    /* M0-Grant-* are the loop's own (grant_hold.c: a client's M0-* never
     * pass the parser); other M0-* fields are the message request's to set. */
    if (len >= 9 && strncasecmp(n, "m0-grant-", 9) == 0)
        return 0;
    if (len >= 3 && strncasecmp(n, "m0-", 3) == 0)
        return 1;
    if (over_http) {
        if ((len >= 5 && strncasecmp(n, "meta-", 5) == 0) || named_in(n, len, woh_drop, M0_ARRAY_LEN(woh_drop)))
            return 1;
    } else if (len >= 14 && strncasecmp(n, "sec-websocket-", 14) == 0) {
        return 1;
    }
    return named_in(n, len, drop, M0_ARRAY_LEN(drop));
}

static char *put(char *d, const char *s, uint32_t n)
{
    memcpy(d, &n, sizeof n);
    d += sizeof n;
    if (n != NONE && n > 0) {
        memcpy(d, s, n);
        d += n;
    }
    return d;
}

static const char *get(const char *d, const char **s, uint32_t *n)
{
    memcpy(n, d, sizeof *n);
    d += sizeof *n;
    *s = d;
    return *n == NONE ? d : d + *n;
}

struct m0_ws_snapshot *m0_ws_snapshot_new(const struct m0_req *r)
{
    return m0_ws_snapshot_for(r, 0);
}

struct m0_ws_snapshot *m0_ws_snapshot_for(const struct m0_req *r, int over_http)
{
    size_t size = 4 * sizeof(uint32_t) + r->target_len + r->path_len + r->query_len +
                  (r->authority ? r->authority_len : 0);
    uint32_t nh = 0;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (handshake_field(h->name, h->name_len, over_http))
            continue;
        size += 2 * sizeof(uint32_t) + h->name_len + h->value_len;
        nh++;
    }
    struct m0_ws_snapshot *snap = m0_xmalloc(sizeof *snap + size);
    snap->size = (uint32_t)size;
    snap->nhdrs = nh;
    char *d = snap->data;
    d = put(d, r->target, r->target_len);
    d = put(d, r->path, r->path_len);
    d = put(d, r->query, r->query_len);
    d = put(d, r->authority, r->authority ? r->authority_len : NONE);
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (handshake_field(h->name, h->name_len, over_http))
            continue;
        d = put(d, h->name, h->name_len);
        d = put(d, h->value, h->value_len);
    }
    return snap;
}

void m0_ws_snapshot_free(struct m0_ws_snapshot *snap)
{
    free(snap);
}

size_t m0_ws_snapshot_size(const struct m0_ws_snapshot *snap)
{
    return snap ? sizeof *snap + snap->size : 0;
}

static void add_header(struct m0_req *r, const char *name, const char *value, size_t vlen)
{
    struct m0_hdr *h = &r->hdrs[r->nhdrs++];
    h->name = name;
    h->name_len = (uint32_t)strlen(name);
    h->value = m0_arena_strndup(&r->arena, value, vlen);
    h->value_len = (uint32_t)vlen;
}

void m0_ws_request_add(struct m0_req *r, const char *name, size_t nlen, const char *value, size_t vlen)
{
    if (r->nhdrs >= r->hdrs_cap)
        return;
    struct m0_hdr *h = &r->hdrs[r->nhdrs++];
    h->name = m0_arena_strndup(&r->arena, name, nlen);
    h->name_len = (uint32_t)nlen;
    h->value = m0_arena_strndup(&r->arena, value, vlen);
    h->value_len = (uint32_t)vlen;
}

void m0_ws_request_body(struct m0_req *r, struct m0_buf *body)
{
    char num[24];
    int len = snprintf(num, sizeof num, "%zu", body->len - body->off);
    if (r->nhdrs < r->hdrs_cap)
        add_header(r, "Content-Length", num, (size_t)len);
    r->content_length = (int64_t)(body->len - body->off);
    /* The payload becomes the body, by moving its buffer. */
    m0_buf_compact(body);
    struct m0_buf old = r->body;
    r->body = *body;
    m0_buf_reset(&old);
    *body = old;
    r->body_len = r->body.len;
    r->body_fd = -1;
}

void m0_ws_snapshot_request(struct m0_req *r, const struct m0_ws_snapshot *snap, unsigned extra)
{
    const char *s, *d = snap->data;
    uint32_t n;
    m0_req_reset(r);
    r->method = "POST";
    r->method_len = 4;
    d = get(d, &s, &n);
    r->target = m0_arena_strndup(&r->arena, s, n);
    r->target_len = n;
    d = get(d, &s, &n);
    r->path = m0_arena_strndup(&r->arena, s, n);
    r->path_len = n;
    d = get(d, &s, &n);
    r->query = m0_arena_strndup(&r->arena, s, n);
    r->query_len = n;
    d = get(d, &s, &n);
    if (n != NONE) {
        r->authority = m0_arena_strndup(&r->arena, s, n);
        r->authority_len = n;
    }
    r->http_major = 1;
    r->http_minor = 1;
    r->flags = 0;
    r->hdrs_cap = snap->nhdrs + extra + 1;      /* + Content-Length (m0_ws_request_body) */
    r->hdrs = m0_arena_alloc(&r->arena, r->hdrs_cap * sizeof *r->hdrs);
    for (uint32_t i = 0; i < snap->nhdrs; i++) {
        struct m0_hdr *h = &r->hdrs[r->nhdrs++];
        d = get(d, &s, &n);
        h->name = m0_arena_strndup(&r->arena, s, n);
        h->name_len = n;
        d = get(d, &s, &n);
        h->value = m0_arena_strndup(&r->arena, s, n);
        h->value_len = n;
    }
}

void m0_ws_message_request(struct m0_req *r, const struct m0_ws_snapshot *snap, const char *channel,
                           size_t channel_len, uint32_t slot, int opcode, struct m0_buf *payload)
{
    m0_ws_snapshot_request(r, snap, 4);
    /* Names as static strings: the arena need not hold them. */
    char num[24];
    if (opcode == M0_WS_TEXT)
        add_header(r, "Content-Type", "text/plain; charset=utf-8", 25);
    else
        add_header(r, "Content-Type", "application/octet-stream", 24);
    add_header(r, "M0-Channel", channel, channel_len);
    int len = snprintf(num, sizeof num, "%u", slot);
    add_header(r, "M0-Slot", num, (size_t)len);
    add_header(r, "M0-Opcode", opcode == M0_WS_TEXT ? "text" : "binary", opcode == M0_WS_TEXT ? 4 : 6);
    m0_ws_request_body(r, payload);
}
