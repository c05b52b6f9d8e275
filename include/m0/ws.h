/*
 * ws.h — the WebSocket protocol (RFC 6455) as pure functions: the opening
 * handshake checked against a parsed request (§4.2.1), the
 * Sec-WebSocket-Accept value (§1.3, §4.2.2), an incremental parser for
 * client frames (§5: masking, fragmentation, control frames, limits, UTF-8
 * for text, close codes of §7.4) and the encoder for server frames.
 *
 * No sockets, no Python, no locks: one parser per connection, fed by
 * whoever reads that connection (the loop, see hold.h), and fuzzable on its
 * own (tests/fuzz/fuzz_ws.c). The one dependency is libcrypto's SHA-1.
 *
 * Also here, because they are what a WebSocket hold needs of a request:
 * the compact snapshot of the handshake request a held socket keeps, and
 * the ordinary POST an inbound message becomes (runner.h, "message").
 */
#ifndef M0_WS_H
#define M0_WS_H

#include "m0/types.h"
#include "m0/buf.h"
#include "m0/http.h"

/* Opcodes (RFC 6455 §5.2). */
enum m0_ws_opcode {
    M0_WS_CONT = 0x0,
    M0_WS_TEXT = 0x1,
    M0_WS_BINARY = 0x2,
    M0_WS_CLOSE = 0x8,
    M0_WS_PING = 0x9,
    M0_WS_PONG = 0xA,
};

/* Close codes this server sends (RFC 6455 §7.4.1). */
#define M0_WS_CLOSE_NORMAL      1000
#define M0_WS_CLOSE_GOING_AWAY  1001
#define M0_WS_CLOSE_PROTOCOL    1002
#define M0_WS_CLOSE_NO_STATUS   1005   /* reported for a close frame without a code; never sent */
#define M0_WS_CLOSE_INVALID     1007   /* text that is not UTF-8 */
#define M0_WS_CLOSE_POLICY      1008   /* policy violation (a granted socket only listens) */
#define M0_WS_CLOSE_TOO_BIG     1009
#define M0_WS_CLOSE_INTERNAL    1011
/* A granted socket's grant lapsed (--grant-expire close): a code of the
 * private-use range (RFC 6455 §7.4.2, 4000-4999, "by prior agreement":
 * docs/realtime.md is the agreement), 4000 + HTTP's 401, so a page can
 * tell "fetch a fresh grant" from a policy refusal (1008) or a drain (1001). */
#define M0_WS_CLOSE_GRANT_EXPIRED 4001

#define M0_WS_CONTROL_MAX 125          /* payload bytes of a control frame (§5.5) */
#define M0_WS_ACCEPT_LEN 28            /* base64 of a SHA-1 digest */
#define M0_WS_FRAME_HEAD_MAX 10        /* a server frame's head: 2, 4 or 10 bytes */

/* ------------------------------------------------------------ handshake */

/* What the handshake carries, pointing into the request (valid as long as
 * it is). */
struct m0_ws_handshake {
    const char *key;            /* Sec-WebSocket-Key, as sent (24 base64 characters) */
    size_t key_len;
};

/*
 * Check r as a WebSocket opening handshake (RFC 6455 §4.2.1): GET,
 * HTTP/1.1 or later, a Host, "Upgrade: websocket", a Connection field
 * listing "upgrade", a Sec-WebSocket-Key that is the base64 of 16 bytes,
 * and Sec-WebSocket-Version 13. Returns 0 and fills *hs when it is one;
 * else the status to answer with a static reason in *why: 426 when only the
 * version is missing or different (§4.4: the answer names the version we
 * speak, see m0_ws_refusal), 400 otherwise.
 */
int m0_ws_handshake_check(const struct m0_req *r, struct m0_ws_handshake *hs, const char **why);

/* Sec-WebSocket-Accept for key (§4.2.2 item 5.4): base64(SHA-1(key ||
 * "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")), written to out as
 * M0_WS_ACCEPT_LEN characters and a NUL. */
void m0_ws_accept(const char *key, size_t key_len, char out[M0_WS_ACCEPT_LEN + 1]);

/* Did the client offer subprotocol proto (plen bytes) in any of its
 * Sec-WebSocket-Protocol fields (§4.2.2 item 5.4: the server selects "one
 * of the values"; tokens compare exactly, §11.5)? */
int m0_ws_protocol_offered(const struct m0_req *r, const char *proto, size_t plen);

/*
 * Append the 101 Switching Protocols head (§4.2.2 item 5): Upgrade,
 * Connection, Sec-WebSocket-Accept, Sec-WebSocket-Protocol when protocol is
 * not NULL, then extra (extra_len bytes of "Name: value\r\n" lines the
 * application set, e.g. Set-Cookie), Date and Server unless extra has them
 * (has_date/has_server), and the blank line.
 */
void m0_ws_switching(struct m0_buf *out, const char *accept, const char *protocol, size_t plen,
                     const char *extra, size_t extra_len, int has_date, int has_server);

/* Append a complete refusal of a handshake: status (400 or 426; any other
 * code is written as given) with Sec-WebSocket-Version: 13 on a 426, a
 * one-line text body naming why, and Connection: close. */
void m0_ws_refusal(struct m0_buf *out, int status, const char *why);

/* ---------------------------------------------------------------- frames */

/* What m0_ws_parse reports. */
enum m0_ws_event_type {
    M0_WS_EV_NONE,       /* every byte given was consumed; nothing complete yet */
    M0_WS_EV_MESSAGE,    /* a whole data message (reassembled, unmasked, UTF-8 checked) */
    M0_WS_EV_PING,
    M0_WS_EV_PONG,
    M0_WS_EV_CLOSE,      /* the peer's close frame: code (1005 when it has none) and reason */
    M0_WS_EV_ERROR,      /* the connection must be failed with code (§7.1.7) */
};

struct m0_ws_event {
    enum m0_ws_event_type type;
    int opcode;          /* MESSAGE: M0_WS_TEXT or M0_WS_BINARY */
    const char *data;    /* payload (MESSAGE: the message; PING/PONG: theirs; CLOSE: the reason) */
    size_t len;          /* valid until the next m0_ws_parse or m0_ws_parser_take */
    uint16_t code;       /* CLOSE: the peer's code; ERROR: the code to close with */
    const char *why;     /* ERROR: a static reason (for the log and the close frame) */
};

/*
 * One connection's parser state. Between frames it costs the struct (no
 * allocation); a message being reassembled costs its bytes, never more
 * than max_message.
 */
struct m0_ws_parser {
    uint64_t max_message;        /* bytes of a whole (reassembled) message; over → 1009 */
    /* the frame being read */
    uint8_t head[14];            /* its head bytes so far */
    uint8_t head_len;
    uint8_t in_payload;          /* the head is complete: reading payload */
    uint8_t fin, opcode;         /* of the current frame */
    uint8_t mask[4];
    uint64_t left;               /* payload bytes of the current frame still to read */
    uint64_t off;                /* payload bytes read (the masking key's phase) */
    /* the message being reassembled */
    uint8_t msg_opcode;          /* M0_WS_TEXT / M0_WS_BINARY while one is open, else 0 */
    uint8_t utf8_need;           /* continuation bytes still owed by the current code point */
    uint8_t utf8_lo, utf8_hi;    /* the range the next continuation byte must fall in */
    struct m0_buf msg;
    /* a control frame's payload (never fragmented, ≤ 125 bytes): allocated
     * the first time one has a payload (an idle socket that only answers
     * our empty pings never needs it) */
    uint8_t ctl_len;
    char *ctl;
    uint8_t done;                /* a close frame or an error was reported: input is ignored */
};

/* Set up p for a new connection; max_message bounds a message's bytes. */
void m0_ws_parser_init(struct m0_ws_parser *p, uint64_t max_message);
/* Release what a half-assembled message holds. */
void m0_ws_parser_free(struct m0_ws_parser *p);

/*
 * Parse client frames from data (n bytes). *used receives the bytes
 * consumed. Returns M0_WS_EV_NONE when all n were consumed without
 * completing anything, or the first event completed, in *ev (the bytes
 * after *used are not consumed: call again with them).
 *
 * Failures (ERROR, with the close code §7.4.1 prescribes): an unmasked
 * frame (§5.1), reserved bits or opcodes (§5.2), a fragmented or oversized
 * control frame (§5.5), a continuation with no message open or a new
 * message inside a fragmented one (§5.4), a length not in its minimal form
 * or over 2^63 (§5.2) → 1002; a message over max_message → 1009 (decided at
 * the head, before its payload is read); text that is not UTF-8, in the
 * message or in a close reason → 1007 (§8.1: as soon as a byte shows it);
 * a close frame with a 1-byte payload or a code not allowed on the wire
 * (§7.4.1-2) → 1002. After CLOSE or ERROR the parser reports NONE and
 * consumes everything.
 */
enum m0_ws_event_type m0_ws_parse(struct m0_ws_parser *p, const void *data, size_t n, size_t *used,
                                  struct m0_ws_event *ev);

/* Move the message just reported (M0_WS_EV_MESSAGE) into dst (dst's own
 * bytes are released): no copy. The event's data pointer is then invalid. */
void m0_ws_parser_take(struct m0_ws_parser *p, struct m0_buf *dst);

/* Is [p, p+n) well-formed UTF-8 (RFC 3629: no overlongs, surrogates or
 * code points past U+10FFFF)? */
int m0_ws_utf8_valid(const void *p, size_t n);

/* May a close frame carry this code (§7.4.1, §7.4.2, and the IANA registry's
 * 1012-1014)? 1000-1003, 1007-1014 and 3000-4999. */
int m0_ws_close_code_valid(unsigned code);

/*
 * The head of a server frame (§5.2: FIN as given, no mask, the length in
 * its minimal form: 7 bits up to 125, 16 bits up to 65535, else 64 bits).
 * Returns the head's length (2, 4 or 10 bytes) written to out.
 */
size_t m0_ws_frame_head(uint8_t out[M0_WS_FRAME_HEAD_MAX], int opcode, uint64_t len, int fin);

/* Append one whole (FIN) server frame of n payload bytes. */
void m0_ws_frame(struct m0_buf *b, int opcode, const void *p, size_t n);

/* Append a close frame: code (0: no payload at all) and a reason, cut to
 * the 123 bytes a control frame leaves it, at a UTF-8 boundary. */
void m0_ws_close_frame(struct m0_buf *b, unsigned code, const char *reason, size_t len);

/* ------------------------------------- the handshake request, kept */

/*
 * What a held socket keeps of its handshake request, so that each inbound
 * message can be delivered as a request to the same application: the
 * target and the header fields, without those that described the
 * handshake itself (Upgrade, Connection, Sec-WebSocket-*, Content-Length,
 * Transfer-Encoding, Expect) and without M0-* (the server's own). One
 * allocation, a few hundred bytes for a browser's request.
 */
struct m0_ws_snapshot;

/* Snapshot r (NULL-safe to free). Never NULL. */
struct m0_ws_snapshot *m0_ws_snapshot_new(const struct m0_req *r);
/* The same for a socket whose events go over HTTP (woh.h): the
 * Sec-WebSocket-* fields are kept but Extensions, and Accept, Content-Type,
 * Connection-Id and every Meta-* field are dropped too (the protocol's
 * requests set their own; a client's never reach the application). */
struct m0_ws_snapshot *m0_ws_snapshot_for(const struct m0_req *r, int over_http);
void m0_ws_snapshot_free(struct m0_ws_snapshot *snap);
/* Bytes the snapshot holds (for the memory figures). */
size_t m0_ws_snapshot_size(const struct m0_ws_snapshot *snap);

/*
 * Fill r (reset first; its arena and body buffer are reused) as the POST
 * an inbound message becomes (issue 10, DESIGN capability 6): method POST,
 * the handshake's target and headers (from snap), then
 *   Content-Type: text/plain; charset=utf-8 (text) or application/octet-stream,
 *   Content-Length, M0-Channel: channel, M0-Slot: slot,
 *   M0-Opcode: text | binary;
 * the body is payload, moved in (payload is left empty; no copy). HTTP/1.1,
 * not keep-alive (nothing follows it). A client's own M0-* fields never get
 * this far (the parser drops them, http.c), so these cannot be forged.
 */
void m0_ws_message_request(struct m0_req *r, const struct m0_ws_snapshot *snap, const char *channel,
                           size_t channel_len, uint32_t slot, int opcode, struct m0_buf *payload);

/*
 * The parts of such a request, for other requests a held socket makes
 * (woh.h's events):
 * m0_ws_snapshot_request: reset r as a POST to the snapshot's target with
 * its headers, with room for extra more fields (and Content-Length);
 * m0_ws_request_add: one more field (name and value copied; ignored past
 * the room asked for); m0_ws_request_body: Content-Length and the body,
 * moved in from body (left empty; no copy). HTTP/1.1, not keep-alive.
 */
void m0_ws_snapshot_request(struct m0_req *r, const struct m0_ws_snapshot *snap, unsigned extra);
void m0_ws_request_add(struct m0_req *r, const char *name, size_t nlen, const char *value, size_t vlen);
void m0_ws_request_body(struct m0_req *r, struct m0_buf *body);

#endif
