/*
 * wshold_int.h — what the two files of a WebSocket hold share (wshold.c,
 * the socket: handshake, frames in and out, close, heartbeats; and
 * wshold_mailbox.c, its inbound messages on their way to the runner). Not
 * for any other file: the rest of the server knows a WebSocket hold only by
 * its operations (wshold.h).
 */
#ifndef M0_WSHOLD_INT_H
#define M0_WSHOLD_INT_H

#include <stdint.h>
#include "m0/buf.h"
#include "m0/hold.h"
#include "m0/ws.h"

struct m0_conn;
struct m0_job;
struct m0_server;
struct m0_target;
struct m0_woh;

/* Messages waiting behind the one in flight before the socket stops being
 * read (and their bytes: at most --ws-max-message more). */
#define QUEUE_MAX 16
/* Bytes read per wakeup from one socket (a fast sender does not hold the loop). */
#define READ_BUDGET (256 * 1024)

struct m0_wsmsg {
    struct m0_wsmsg *next;
    uint8_t opcode;
    struct m0_buf payload;
};

/*
 * What a held WebSocket keeps (about 400 bytes and its handshake's
 * snapshot while idle; a message being reassembled or queued costs its
 * bytes, bounded by --ws-max-message). The hold's base comes first: c->hold
 * is this struct.
 */
struct m0_wshold {
    struct m0_hold base;            /* the accounting, the target (hold.h) */
    struct m0_ws_parser parser;     /* frames in: head state, masking, fragment buffer, UTF-8 state */
    const struct m0_target *target; /* the target whose view gated the socket: messages go back to it */
    struct m0_ws_snapshot *req;     /* the handshake request, for the messages' requests */
    struct m0_wsmsg *q_head, *q_tail;   /* complete messages waiting their turn, oldest first */
    uint32_t q_len;
    size_t q_bytes;
    uint8_t in_flight;              /* a message is with the runner (the conn has C_WS_MSG) */
    uint8_t paused;                 /* the queue is full: the socket is not read */
    uint8_t close_sent;             /* our close frame is queued: nothing else is sent */
    uint8_t close_received;         /* the peer's close frame arrived */
    uint8_t owned;                  /* an asynchronous runner keeps the job (ASGI): hold.h */
    uint8_t runner_done;            /* owned: the runner posted its DONE */
    uint8_t peer_gone;              /* the peer left while views still owed it messages (not owned) */
    uint16_t end_code;              /* the close code the socket ends with (the peer's, or ours) */
    uint64_t ping_at;               /* loop clock of our unanswered ping; 0: none */
    uint64_t last_pong;             /* loop clock of the last pong */
    uint64_t msg_us;                /* the message with the views began (its access-log duration) */
    uint16_t channel_len;
    uint16_t remote_port;           /* the handshake's client, for the messages' requests */
    uint8_t https;                  /*   (an idle socket has no job to keep it in) */
    struct m0_woh *woh;             /* its events go over HTTP (wshold_woh.c); NULL: messages */
    char channel[];                 /* M0-Channel of the approval, NUL, the client's address, NUL */
};

/* The WebSocket hold of a connection that has one (c->hold). */
static inline struct m0_wshold *m0_wshold_of(const struct m0_conn *c)
{
    return (struct m0_wshold *)c->hold;
}

/* wshold.c, for the mailbox. m0_wshold_input: parse n bytes of frames (what
 * cannot be taken while the queue is full waits in c->in). m0_wshold_settle:
 * after anything that may have queued our close frame or ended the last
 * message the views owed: the close handshake, or the slot's end when the
 * peer is gone. m0_wshold_fail: fail the socket (RFC 6455 §7.1.7): our close
 * frame with code. */
void m0_wshold_input(struct m0_server *s, struct m0_conn *c, const char *p, size_t n);
void m0_wshold_settle(struct m0_server *s, struct m0_conn *c);
void m0_wshold_fail(struct m0_server *s, struct m0_conn *c, unsigned code, const char *why);
/* Our close frame with code (M0_WS_CLOSE_NO_STATUS: none) and a reason of
 * wlen bytes (at most 123 are sent); nothing else is sent after it. */
void m0_wshold_close(struct m0_server *s, struct m0_conn *c, unsigned code, const char *why, size_t wlen);

#endif
