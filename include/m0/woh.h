/*
 * woh.h — Pushpin's WebSocket-over-HTTP protocol (pushpin.org/docs,
 * "WebSocket-Over-HTTP Protocol"), the codec: a held WebSocket's events go
 * to the application as ordinary POST requests with Content-Type
 * application/websocket-events, and its answers, in the same encoding, come
 * back as frames and GRIP control messages.
 *
 * The encoding is a list of events, each its name, then (with content) a
 * space and the content's size in hexadecimal, CRLF, the content and CRLF:
 *
 *   OPEN\r\n
 *   TEXT 5\r\nhello\r\n
 *   CLOSE 2\r\n\x03\xe8\r\n
 *
 * Events: OPEN (the socket asks to open / the application accepts),
 * TEXT and BINARY (messages), PING and PONG, CLOSE (a 16-bit close code,
 * big-endian, then the reason), DISCONNECT (the socket ended without a
 * close handshake, or the application drops it).
 *
 * With GRIP (the OPEN answer's Sec-WebSocket-Extensions: grip), a TEXT the
 * application sends that starts with "c:" is a control message, JSON:
 * {"type": "subscribe"|"unsubscribe", "channel": C}, {"type": "detach"},
 * {"type": "keep-alive", "content"|"content-bin": ..., "message-type":
 * "text"|"binary"|"ping"|"pong", "timeout": S, "mode": "idle"|"interval"},
 * and Pushpin's others (set-meta, session, send-delayed, flush-delayed),
 * which are read and reported as such; every other message must start with
 * the extension's message-prefix (default "m:"), which is removed.
 *
 * Pure: no sockets, no Python. JSON by jansson.
 */
#ifndef M0_WOH_H
#define M0_WOH_H

#include "m0/types.h"
#include "m0/buf.h"

#define M0_WOH_CONTENT_TYPE "application/websocket-events"
#define M0_WOH_PREFIX_MAX 32          /* bytes of a message-prefix */
#define M0_WOH_CID_LEN 32             /* a Connection-Id: 16 random bytes, hex */
#define M0_WOH_KEEPALIVE_MIN 20       /* Keep-Alive-Interval below this is raised to it (Pushpin's) */
#define M0_WOH_KEEPALIVE_DEFAULT 55   /* a keep-alive control message without timeout (seconds) */

enum m0_woh_type {
    M0_WOH_OTHER,          /* a name this protocol does not define: ignored */
    M0_WOH_OPEN,
    M0_WOH_TEXT,
    M0_WOH_BINARY,
    M0_WOH_PING,
    M0_WOH_PONG,
    M0_WOH_CLOSE,
    M0_WOH_DISCONNECT,
};

/* One decoded event: content points into the body decoded. */
struct m0_woh_event {
    enum m0_woh_type type;
    const char *content;
    size_t len;
    uint8_t has_content;   /* the event had a size (possibly 0) */
};

/* The event's name ("TEXT", ...; "" for M0_WOH_OTHER). */
const char *m0_woh_name(enum m0_woh_type t);

/* Append one event of type t (not M0_WOH_OTHER): with content (p, n bytes)
 * when p is not NULL, else without. */
void m0_woh_put(struct m0_buf *b, enum m0_woh_type t, const void *p, size_t n);

/*
 * The event at *off of body (n bytes) into *ev; *off moves past it.
 * Returns 1 for an event, 0 at the end, M0_ERR when the body is not this
 * encoding from *off on: a name line without CRLF, a name that is not an
 * upper-case token, a size that is not hexadecimal (at most 8 digits), or
 * content that is cut short or not followed by CRLF.
 */
int m0_woh_next(const char *body, size_t n, size_t *off, struct m0_woh_event *ev);

/* A control message's type (the "type" member). */
enum m0_woh_ctl_type {
    M0_WOH_CTL_SUBSCRIBE,
    M0_WOH_CTL_UNSUBSCRIBE,
    M0_WOH_CTL_DETACH,
    M0_WOH_CTL_KEEP_ALIVE,
    M0_WOH_CTL_SET_META,
    M0_WOH_CTL_SESSION,
    M0_WOH_CTL_SEND_DELAYED,
    M0_WOH_CTL_FLUSH_DELAYED,
};

struct m0_woh_ctl {
    enum m0_woh_ctl_type type;
    struct m0_buf channel;         /* subscribe / unsubscribe: the channel (non-empty) */
    /* keep-alive: with content, the message to send (RFC 6455 opcode: text,
     * binary, ping or pong) every timeout_s (mode interval) or after
     * timeout_s without a write (idle); without content, none. */
    uint8_t has_content;
    uint8_t opcode;
    uint8_t interval;
    int timeout_s;
    struct m0_buf content;
};

/*
 * Parse the JSON of a control message (the text after "c:", n bytes) into
 * *ctl (its buffers are reset first and reused; m0_woh_ctl_free releases
 * them). Pushpin's rules (handler/wscontrolmessage.cpp): an object with a
 * string "type" it knows; subscribe and unsubscribe need a non-empty
 * string "channel"; keep-alive takes "content" (a string) or "content-bin"
 * (base64, which wins), "message-type" (default: text, binary for
 * content-bin), an integer "timeout" >= 0 (0 or absent: the default 55) and
 * "mode". Returns M0_OK, or M0_ERR with *why a static reason.
 */
int m0_woh_control(const char *json, size_t n, struct m0_woh_ctl *ctl, const char **why);
void m0_woh_ctl_free(struct m0_woh_ctl *ctl);

/*
 * A Sec-WebSocket-Extensions value (n bytes, a list: RFC 6455 §9.1) from
 * the application's OPEN answer: does it list "grip"? When it does, its
 * message-prefix parameter (a token or a quoted string; absent: "m:") is
 * copied to prefix (at most M0_WOH_PREFIX_MAX bytes, *plen its length).
 * Returns 1 (grip), 0 (no grip), M0_ERR (grip with a prefix too long or
 * malformed).
 */
int m0_woh_grip_extension(const char *v, size_t n, char *prefix, size_t *plen);

/* Is the Content-Type value v (n bytes) application/websocket-events
 * (case-insensitive, parameters allowed)? */
int m0_woh_is_content_type(const char *v, size_t n);

#endif
