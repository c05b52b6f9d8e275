/*
 * grip_item.h — a published GRIP item as it crosses the bus (one frame of
 * the registry's, beside the SSE frames m0pub.publish makes), and the two
 * tokens GRIP authenticates with: the Grip-Sig a proxy adds to every
 * request it forwards, and the control port's Bearer credential.
 *
 * A GRIP frame starts with the two bytes "\0G", which no SSE frame can
 * (SSE frames begin with their "id:" line, gap notices with "event:"), so
 * a hold tells the two apart by the first byte and each kind skips the
 * other's. Layout after the magic (little-endian: with --broker a frame
 * crosses hosts, binary in the Redis log):
 *   u8 flags (M0_GRIP_IT_*), u32 stream filters,
 *   u16+bytes id, u16+bytes prev-id, u32+bytes stream content,
 *   u16 code, u16+bytes reason, u16 nheaders, (u16+name, u16+value)...,
 *   u32+bytes body, u8 nmeta, (u16+key, u16+value)...,
 *   u8 ws opcode (RFC 6455 §5.2; 0: no ws-message), u32+bytes ws content,
 *   u16+bytes channel
 *   (a hold on several channels checks prev-id against that channel's id)
 * The layout is this build's: frames are never kept past a run, but with
 * --broker every host must run the same build.
 *
 * Pure: no sockets, no Python.
 */
#ifndef M0_GRIP_ITEM_H
#define M0_GRIP_ITEM_H

#include "m0/types.h"
#include "m0/buf.h"

struct m0_epcp_item;

#define M0_GRIP_IT_STREAM        0x01u   /* an http-stream format, action send */
#define M0_GRIP_IT_STREAM_CLOSE  0x02u   /* an http-stream format, action close */
#define M0_GRIP_IT_RESPONSE      0x04u   /* an http-response format */
#define M0_GRIP_IT_ID            0x08u   /* the item has an id */
#define M0_GRIP_IT_PREV_ID       0x10u   /* the item has a prev-id */
#define M0_GRIP_IT_FILTERS       0x20u   /* the stream format named its content-filters */
#define M0_GRIP_IT_WS            0x40u   /* a ws-message format, action send (for WebSocket holds) */

#define M0_GRIP_ITEM_HEADERS_MAX 64
#define M0_GRIP_ITEM_META_MAX    16

struct m0_grip_view {
    const char *p;
    size_t n;
};

/* A decoded frame: views into the frame's bytes. */
struct m0_grip_item {
    unsigned flags;
    uint32_t filters;                 /* the stream's content-filters (M0_GRIP_F_*) */
    struct m0_grip_view id, prev_id, content;
    int code;
    struct m0_grip_view reason, body;
    unsigned nheaders;
    struct m0_grip_view hname[M0_GRIP_ITEM_HEADERS_MAX], hvalue[M0_GRIP_ITEM_HEADERS_MAX];
    unsigned nmeta;
    struct m0_grip_view mkey[M0_GRIP_ITEM_META_MAX], mvalue[M0_GRIP_ITEM_META_MAX];
    int ws_opcode;                    /* M0_GRIP_IT_WS: text, binary, ping or pong (RFC 6455 opcodes) */
    struct m0_grip_view ws_content;   /*   its payload (text: UTF-8, epcp.c checked) */
    struct m0_grip_view channel;      /* the channel it was published on */
};

/* Is frame (n bytes) a GRIP item (rather than an SSE frame)? */
static inline int m0_grip_is_item(const char *frame, size_t n)
{
    return n >= 2 && frame[0] == '\0' && frame[1] == 'G';
}

/* Encode the parts of it a hold uses (http-stream, http-response,
 * ws-message send, id, prev-id, meta; a ws-message close, hint or refresh
 * is not carried) into out, replacing its contents. Each kind of hold
 * takes only its own format: GRIP holds http-stream / http-response,
 * WebSocket holds ws-message. Returns M0_OK, or M0_ERR when it has no
 * format to carry (nothing is written). */
int m0_grip_item_encode(struct m0_buf *out, const struct m0_epcp_item *it);

/* Decode frame (n bytes) into it. M0_OK, or M0_ERR when it is not a
 * whole GRIP frame, or its http-response's code is not a final status
 * (200..599). */
int m0_grip_item_decode(const char *frame, size_t n, struct m0_grip_item *it);

#define M0_GRIP_SIG_ISS   "pushpin"   /* Pushpin's default sig_iss: what GRIP_URL's verify-iss= names */
#define M0_GRIP_SIG_TTL   3600        /* seconds: Pushpin's exp = now + 3600 */
#define M0_GRIP_SIG_MAX   256         /* bytes of a Grip-Sig token, NUL included */

/* The Grip-Sig token a proxy adds to a forwarded request: an HS256 JWT
 * {"iss": M0_GRIP_SIG_ISS, "exp": now_s + M0_GRIP_SIG_TTL} signed with key
 * (keylen bytes), written NUL-terminated to out (cap bytes, at least
 * M0_GRIP_SIG_MAX). Returns its length, or M0_ERR. */
ssize_t m0_grip_sig(char *out, size_t cap, const unsigned char *key, size_t keylen, int64_t now_s);

/* The same token from this thread's cache: signed again when less than
 * half of its lifetime is left or for another key, so a request costs
 * one HMAC per half hour per thread, not one each. *len gets its length;
 * NULL when it cannot be signed. Valid until this thread's next call. */
const char *m0_grip_sig_cached(const unsigned char *key, size_t keylen, int64_t now_s, size_t *len);

/* Does the Authorization field value v (n bytes) carry the control port's
 * credential: "Bearer T" where T is an HS256 JWT signed with key and not
 * expired at now_s (gripcontrol's GRIP_URL ?iss=&key=), or T is the key
 * itself (?key= without iss; compared in constant time)? 1 or 0. */
int m0_grip_bearer_ok(const char *v, size_t n, const unsigned char *key, size_t keylen, int64_t now_s);

#endif
