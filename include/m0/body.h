/*
 * body.h — the response head a runner describes, and the body encoder that
 * turns it and the body's bytes into HTTP/1.1 wire bytes (RFC 9112 §6;
 * RFC 9110 §6.4.1, §15; WHATWG SSE §9.2 for held streams).
 *
 * A runner (WSGI now, ASGI and static files next) fills a struct m0_head
 * once the application has named its status and headers, and drives one
 * struct m0_body per response:
 *
 *   m0_body_commit()  serializes the head exactly once and chooses the
 *                     framing: nothing (1xx/204/304/HEAD), Content-Length
 *                     (declared by the app, or the whole body is known),
 *                     chunked (HTTP/1.1, unknown length), or close-delimited
 *                     (HTTP/1.0, unknown length);
 *   m0_body_emit()    frames body bytes, never past a promised length
 *                     (PEP 3333: "the server should stop iterating ... when
 *                     enough data has been sent");
 *   m0_body_finish()  the chunked terminator, or M0_ERR when a promised
 *                     length was not met (the connection must then abort).
 *
 * Invariant: a response has one head. A second commit is refused (M0_ERR)
 * and writes nothing, whatever the caller does. A held stream's head is
 * close-delimited and never chunked.
 *
 * Pure: no sockets, no Python, no locks. One thread at a time (the job's
 * owner).
 */
#ifndef M0_BODY_H
#define M0_BODY_H

#include "m0/types.h"
#include "m0/buf.h"
#include "m0/response.h"
#include "m0/sse.h"

struct m0_grip;

/* M0-Hold instructions (the GRIP-shaped headers; README "Realtime"):
 * "stream" holds an SSE stream, "websocket" approves a WebSocket upgrade
 * (the loop answers 101 after checking the handshake, hold.h). */
enum m0_hold_kind { M0_HOLD_NONE, M0_HOLD_STREAM, M0_HOLD_UNKNOWN, M0_HOLD_WEBSOCKET };

#define M0_WS_PROTOCOL_MAX 64   /* bytes of the subprotocol a view may choose */
#define M0_HEAD_PRESENCE_MAX 128  /* bytes of an M0-Presence sub (= M0_PRESENCE_SUB_MAX) */

/*
 * The application's head, validated, as bytes: the status line and its
 * header lines ("Name: value\r\n", latin-1) in lines, without the fields the
 * server owns (hop-by-hop fields, Content-Length) and without M0-* fields,
 * which instruct this server and never reach the client.
 */
struct m0_head {
    int status;                 /* 200..599 */
    struct m0_buf lines;        /* "HTTP/1.1 200 OK\r\n" + "Name: value\r\n"... */
    int64_t content_length;     /* the app's Content-Length, or -1 */
    unsigned has_date : 1, has_server : 1, app_close : 1;
    enum m0_hold_kind hold;     /* M0-Hold */
    /* M0-Channel: one channel, or a list (names joined by '\n'), each
     * validated (m0_sse_channel_error); read it with m0_head_channel (a
     * list longer than channel[] is on the heap). */
    uint16_t channel_len;
    char channel[M0_CHANNEL_MAX + 1];
    /* M0-WebSocket-Protocol: the subprotocol a view approving a socket
     * chose (a token, checked against what the client offered). */
    uint8_t ws_protocol_len;
    char ws_protocol[M0_WS_PROTOCOL_MAX + 1];
    /* M0-Opcode on the answer to a WebSocket message: the reply frame's
     * opcode (1 text, 2 binary; 0: text when the body is UTF-8, else binary). */
    uint8_t ws_opcode;
    /* M0-Presence: who the held connection is for, in occupancy and
     * presence (presence.h) — a grant's sub, for a view's hold. */
    uint8_t presence_len;
    char presence[M0_HEAD_PRESENCE_MAX + 1];
    /* M0-Last-Event-ID: where the view's stream starts when the request
     * sent no Last-Event-ID (a page that rendered the history up to it). */
    uint64_t resume_from;
    /* GRIP (grip.h), read only when the runner sets grip_on (the server has
     * a GRIP key): Grip-* fields go to grip (allocated on the first one,
     * freed with the head), never to lines; grip_err is the first
     * instruction refused (m0_head_grip_finish). */
    uint8_t grip_on;
    uint8_t grip_hold;          /* enum m0_grip_hold, after m0_head_grip_finish */
    const char *grip_err;
    struct m0_grip *grip;
};

#define M0_HEAD_MAX_CHANNELS 32      /* channels of one hold (= M0_GRANT_MAX_CHANNELS) */

/* The hold's channels, NUL-terminated: one name, or names joined by '\n'
 * (channel_len bytes). Valid until the head is reset. */
const char *m0_head_channel(const struct m0_head *h);

/* Set the hold's channels to names name[i] (len[i] bytes), 1..32 of them,
 * each passing m0_sse_channel_error (repeats are the caller's to drop).
 * M0_OK, or M0_ERR with the head unchanged. */
int m0_head_set_channels(struct m0_head *h, const char *const *name, const size_t *len, size_t n);

/* Reset h for a new response; keeps the lines buffer's allocation. */
void m0_head_reset(struct m0_head *h);
void m0_head_free(struct m0_head *h);

/* Set the status line from a status code and an optional reason phrase
 * (reason_len 0: the standard phrase; RFC 9112 §4 keeps the SP either way).
 * Must be called first, on an empty head. */
void m0_head_status(struct m0_head *h, int status, const char *reason, size_t reason_len);

/*
 * Add one header field, name and value already checked as a token and a
 * field value (RFC 9110 §5.1, §5.5). Fields the server owns are recorded
 * instead of copied: Content-Length (must be a decimal number: returns
 * M0_ERR otherwise), Date/Server (noted so ours are not added),
 * Connection: close (honoured through the framing), the other hop-by-hop
 * fields (dropped), M0-Hold and M0-Channel (an invalid channel name returns
 * M0_ERR with *why set), M0-WebSocket-Protocol (a token of at most 64
 * bytes, else M0_ERR), M0-Opcode ("text" or "binary", else M0_ERR),
 * M0-Presence (at most 128 bytes, else M0_ERR) and M0-Last-Event-ID (an
 * event id, else M0_ERR).
 * Other M0-* fields are dropped. Returns M0_OK or M0_ERR.
 */
int m0_head_add(struct m0_head *h, const char *name, size_t nlen, const char *value, size_t vlen,
                const char **why);

/*
 * After the last field of a head with grip_on: the instructions' cross
 * checks (m0_grip_finish), Grip-Status in place of the view's status line,
 * and for Grip-Hold the hold the rest of the server knows: hold
 * M0_HOLD_STREAM, channel the Grip-Channels, grip_hold the kind. A
 * stream hold whose status is 1xx, 204 or 304 is refused: such a head
 * carries no content (RFC 9110 §15.4.5). Returns M0_OK (also when there
 * were no Grip-* fields), or M0_ERR with grip_err set: the instructions
 * are not followed (m0_job_commit answers 502, as Pushpin does).
 */
int m0_head_grip_finish(struct m0_head *h);

/* What the request says about the response's framing. */
struct m0_body_req {
    int http_minor;             /* 0 or 1 */
    int keepalive;              /* the request allows the connection to persist */
    int head;                   /* the method was HEAD */
};

struct m0_body {
    enum m0_framing framing;
    uint8_t committed;          /* the head is in the output */
    uint8_t keep;               /* the connection persists after this response */
    uint8_t hold;               /* committed as a held SSE stream */
    uint8_t truncated;          /* bytes beyond the promised length were dropped */
    int64_t length;             /* LENGTH framing: the promised body size */
    uint64_t sent;              /* body bytes framed so far */
};

/* Forget the previous response. */
void m0_body_reset(struct m0_body *b);

/*
 * Append the head (h's lines, Date/Server unless given, the framing
 * header, Connection) to out. body_len is the whole body's size when it is
 * known (iteration is over, or a sized sequence), else -1. hold: commit the
 * head of a held SSE stream instead (Content-Type: text/event-stream,
 * no-cache, X-Accel-Buffering: no, close-delimited; the app's own fields of
 * those names are dropped; a GRIP hold keeps the view's fields as they are
 * and is close-delimited).
 * Returns M0_OK, or M0_ERR when a head was already committed (nothing is
 * written: one head per response).
 */
int m0_body_commit(struct m0_body *b, struct m0_buf *out, const struct m0_head *h,
                   const struct m0_body_req *r, int64_t body_len, int hold);

/*
 * Append n body bytes framed for b's framing. Returns how many were taken:
 * all of them, except past a promised Content-Length (the rest is dropped
 * and b->truncated set) and with no framing at all (HEAD, 1xx/204/304:
 * none are sent, all are "taken"). Precondition: committed.
 */
size_t m0_body_emit(struct m0_body *b, struct m0_buf *out, const void *p, size_t n);

/* Nothing more will reach the client: the promised length is met, or the
 * response has no content. (Before the commit: 0.) */
int m0_body_enough(const struct m0_body *b);

/*
 * End the body: the chunked terminator "0\r\n\r\n" for chunked framing.
 * Returns M0_OK, or M0_ERR when fewer bytes than a promised Content-Length
 * were sent (the caller aborts the connection: a short body is never passed
 * off as complete).
 */
int m0_body_finish(struct m0_body *b, struct m0_buf *out);

#endif
