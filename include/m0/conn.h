/*
 * conn.h — a client connection: its state machine, the transport and the
 * protocol it speaks, and what conn.c (the socket: reads, writes, the
 * output queue) and conn_slots.c (the slot table, states, timeouts,
 * completion routing) offer the protocols — h1.c (HTTP/1.1 requests),
 * hold.c (SSE streams), wshold.c (WebSockets), grip_hold.c (GRIP). The
 * loop's serving state (struct m0_server, with its slot table) is
 * server.h's. Loop thread only.
 *
 * conn.c alone reads and writes a client socket, through the slot's
 * transport (struct m0_xprt_ops, haproxy's xprt under its mux): the plain
 * one (conn.c) or TLS (xprt_tls.c). A protocol asks conn.c to read (m0_conn_read,
 * m0_conn_recv), to write (m0_conn_flush, m0_conn_send_now), to shut its
 * side (m0_conn_shutdown); it never names the descriptor.
 *
 * conn.c knows its protocols only through a table of operations (haproxy's
 * conn->mux): c->proto indexes s->proto[], which the composition root
 * (serve.c) fills once. conn.c reads and writes, times out and closes;
 * what the bytes mean, what comes after a response is written and what a
 * runner's completion does are the protocol's.
 *
 * A connection's life:
 *
 *   READ_HEAD ──head──▶ READ_BODY ──message──▶ RUN ──runner──▶ WRITE ──▶ READ_HEAD (keep-alive)
 *       │                                       │  (Expect: 100-continue: RUN at the head,
 *       │                                       │   the body read while the runner runs)
 *       └─ /health, errors: WRITE               └──▶ WRITE ──hold──▶ HELD
 *   any ──close──▶ LINGER (unread input) ──▶ CLOSING ──end of batch──▶ FREE
 *   RUN/WRITE with a runner still on the job ──close──▶ ORPHAN ──runner done──▶ FREE
 */
#ifndef M0_CONN_H
#define M0_CONN_H

#include <stdatomic.h>
#include <sys/types.h>
#include <sys/uio.h>
#include "m0/types.h"
#include "m0/buf.h"

struct m0_completion;
struct m0_hold;
struct m0_hold_ops;
struct m0_job;
struct m0_job_tls;
struct m0_loop;
struct m0_server;

/* What a connection speaks: HTTP/1.1 until a hold is entered, then the
 * hold's protocol (printable: m0_conn_proto_name). */
enum m0_conn_proto { M0_CONN_PROTO_H1, M0_CONN_PROTO_SSE, M0_CONN_PROTO_WS, M0_CONN_PROTO_GRIP, M0_CONN_PROTOS };

/* "h1", "sse", "ws". */
const char *m0_conn_proto_name(enum m0_conn_proto p);

/* One protocol's operations (NULL: nothing to do there). Loop thread. */
struct m0_conn_ops {
    const char *name;
    /* READ_HEAD / READ_BODY: bytes were read into c->in, or the peer left
     * (C_PEER_GONE): parse and serve. */
    void (*input)(struct m0_server *s, struct m0_conn *c);
    /* Epoll events in a state conn.c leaves to the protocol (RUN, HELD). */
    void (*event)(struct m0_server *s, struct m0_conn *c, uint32_t events);
    /* WRITE: c->out and the file range are written (a streaming runner
     * that still owns the job has been credited): what comes next. */
    void (*drained)(struct m0_server *s, struct m0_conn *c);
    /* The periodic check. A connection that is not HELD: every sweep
     * (200 ms), before its deadline is checked. A HELD one sits in the
     * loop's timer wheel instead and is ticked when c->deadline comes (the
     * first: a heartbeat interval after the hold began); the tick sets
     * c->deadline to when it wants the next (loop clock ms; left at or
     * before now: the next sweep). */
    void (*tick)(struct m0_server *s, struct m0_conn *c);
    /* m0_conn_close, before the descriptor closes: release the
     * protocol's state. */
    void (*closing)(struct m0_server *s, struct m0_conn *c);
    /* A runner's completion for the slot (conn.c has done the DONE
     * bookkeeping: C_RUNNER cleared, an ORPHAN released). */
    void (*complete)(struct m0_server *s, struct m0_conn *c, const struct m0_completion *done);
    /* HELD: n bytes of c->out were written (the hold's accounting). */
    void (*wrote)(struct m0_server *s, struct m0_conn *c, size_t n);
    /* The input events the protocol watches while its output is queued or
     * written, and once a held stream's is (conn.c's one interest
     * computation adds EPOLLOUT and the transport's). NULL: none. */
    uint32_t (*watch)(struct m0_server *s, const struct m0_conn *c);
    /* H1: a hold hands c back (a long-poll answered on a connection its
     * request let persist, RFC 9112 §9.3); its hold is released already,
     * its job perhaps given back: peer/peer_port are the client's address
     * the hold kept. Bytes in c->in are the next request, parsed now. */
    void (*resume)(struct m0_server *s, struct m0_conn *c, const char *peer, uint16_t peer_port);
    /* SSE, WS: the hold implementation (hold.h) an M0-Hold response of
     * this kind takes. */
    const struct m0_hold_ops *hold;
};

/* The transport under a connection (plain TCP or unix, or TLS): every
 * byte a connection reads or writes goes through one of these, called by
 * conn.c alone. Non-blocking, loop thread. Errors are -1 with errno:
 * EAGAIN/EWOULDBLOCK when the operation cannot progress now (a TLS
 * transport that needs the other direction first says so through wants),
 * anything else: the connection is unusable.
 *
 * A transport with a handshake (TLS) runs it inside recv and writev: until
 * it is done they return -1/EAGAIN (wants naming the direction it waits
 * for) and the protocol sees no byte — a new connection is in READ_HEAD
 * with its head timer running, so --header-timeout bounds a handshake that
 * stalls. Its per-connection state is kept by slot (an extension's table,
 * server.h), not in struct m0_conn: an idle plain connection pays nothing
 * for the seam. */
struct m0_xprt_ops {
    const char *name;
    /* Read up to n bytes into buf: >0 bytes, 0 at the peer's end of
     * stream (a TLS close_notify or a FIN), -1 with errno. */
    ssize_t (*recv)(struct m0_server *s, struct m0_conn *c, void *buf, size_t n);
    /* Write from n iovecs: the bytes taken (perhaps fewer than offered),
     * or -1 with errno. M0_XPRT_MORE: more follows at once (a head before
     * its file range): the transport may hold back a small segment. */
    ssize_t (*writev)(struct m0_server *s, struct m0_conn *c, const struct iovec *iov, int n, unsigned flags);
    /* Write up to n bytes of file fd from *off (advanced by what went): as
     * writev (the plain transport: sendfile(2); TLS: kTLS, or reads and
     * writes of records). 0: the file ended early. */
    ssize_t (*sendfile)(struct m0_server *s, struct m0_conn *c, int fd, off_t *off, size_t n);
    /* Our side writes no more (a FIN; TLS: close_notify first). */
    int (*shutdown)(struct m0_server *s, struct m0_conn *c);
    /* Bytes already read from the socket and decoded but not yet returned
     * by recv (TLS records): the caller reads on before waiting for
     * EPOLLIN. NULL: none ever. */
    size_t (*pending)(struct m0_server *s, const struct m0_conn *c);
    /* Epoll events the transport itself needs beside the protocol's (a TLS
     * write that must read first, a read that must write first); NULL:
     * none. */
    uint32_t (*wants)(struct m0_server *s, const struct m0_conn *c);
    /* A connection accepted on a listener of this transport (c->fd set,
     * before its first read): make its state. M0_OK, or M0_ERR (logged):
     * it cannot be served and is closed. NULL: nothing to make. */
    int (*open)(struct m0_server *s, struct m0_conn *c);
    /* Before the descriptor closes (m0_conn_close): free the state (TLS:
     * a close_notify first when the connection is still sound). NULL:
     * nothing. */
    void (*close)(struct m0_server *s, struct m0_conn *c);
    /* What the request in flight may know of the transport (job.h: the
     * TLS version, cipher, client certificate), into *out. NULL: plain
     * (out->version 0). */
    void (*describe)(struct m0_server *s, struct m0_conn *c, struct m0_job_tls *out);
};

/* writev's flags. */
#define M0_XPRT_MORE 0x1u

/* The transports a loop knows (s->xprt[], filled by serve.c; c->xprt
 * indexes it: a listener's, server.h accept.tls), and the plain one
 * (conn.c); TLS is xprt_tls.h's. */
enum { M0_XPRT_PLAIN, M0_XPRT_TLS, M0_XPRTS };
extern const struct m0_xprt_ops m0_xprt_plain;

enum m0_conn_state {
    M0_CONN_FREE,        /* on the free list; fd -1 */
    M0_CONN_READ_HEAD,   /* idle keep-alive, or reading a head: deadline keep-alive, then head timeout */
    M0_CONN_READ_BODY,   /* head parsed, reading the body: deadline = body idle timeout */
    M0_CONN_RUN,         /* the job belongs to a runner; nothing to write yet */
    M0_CONN_WRITE,       /* writing a response; a streaming runner may still own the job (C_RUNNER) */
    M0_CONN_HELD,        /* a held stream: c->hold is set; fed by the registry */
    M0_CONN_LINGER,      /* response sent, our side shut: discarding input until the peer closes */
    M0_CONN_CLOSING,     /* fd closed; the slot is released at the end of the batch */
    M0_CONN_ORPHAN,      /* fd closed while a runner holds the job: released on its completion */
};

/* "READ_HEAD", ... for logs and /health. */
const char *m0_conn_state_name(enum m0_conn_state st);

/* Listening sockets a worker can serve at once (--bind, or those systemd
 * passes, listen.h). */
#define M0_MAX_LISTENERS 16

/* While draining, an idle keep-alive connection is closed after this
 * long without a request (ms). */
#define M0_DRAIN_IDLE_MS 1000

#define C_PEER_GONE   0x001u  /* the peer hung up or a write failed */
#define C_RUNNER      0x002u  /* a runner owns the job (queued, running or streaming) */
#define C_MORE        0x004u  /* inline runner: more body once out drains (resume) */
#define C_HEAD_TIMER  0x008u  /* the current request's head timeout is running */
#define C_SLOW_LOGGED 0x010u  /* --request-timeout already reported this view */
#define C_DOOMED      0x020u  /* to be closed after the current fan-out */
#define C_SENT_100    0x040u  /* 100 Continue went out for the current request */
#define C_LAZY_BODY   0x080u  /* the body is being read while the runner runs */
#define C_STREAMING   0x100u  /* a runner on another thread streams this response (credit, disconnect) */
#define C_WS_MSG      0x200u  /* the runner has an inbound WebSocket message of this held socket */
#define C_WHEEL       0x800u  /* HELD, in the timer wheel (s->wheel) rather than the active list */
#define C_UPGRADED    0x400u  /* an asynchronous runner accepted this WebSocket: the loop answered
                                 (101, or a refusal); the runner's DONE only returns the job */

struct m0_conn {
    int fd;
    uint32_t gen;
    uint32_t slot;           /* its index: chunk << M0_CONN_CHUNK_SHIFT | place in the chunk */
    uint8_t state;           /* enum m0_conn_state: change it with m0_conn_set_state only */
    uint8_t proto;           /* enum m0_conn_proto: s->proto[c->proto] are its operations */
    uint8_t xprt;            /* its transport: s->xprt[c->xprt] (TLS keeps its per-connection
                                state by slot, not here: an idle plain connection pays nothing for it) */
    unsigned flags;          /* C_* */
    uint32_t events;         /* epoll interest currently registered */
    uint64_t deadline;       /* loop clock ms; 0 = none (HELD: the next tick, the wheel's key) */
    uint64_t started_us;     /* request start, for the access log */
    struct m0_buf in;        /* bytes read, not yet parsed */
    struct m0_buf out;       /* the output queue: bytes to write (a response, or a held stream's), then the file range */
    int file_fd;             /* -1, or a file to sendfile after out */
    off_t file_off;
    uint64_t file_left;
    unsigned resp_flags;     /* M0_RESP_* of the response being written (DONE, ABORT, HOLD) */
    struct m0_job *job;      /* while a request runs (m0_conn_job); NULL while held, FREE */
    struct m0_hold *hold;    /* a hold taken (subscribed, its head maybe still going out) or HELD */
    struct m0_conn *prev, *next;   /* active list (timeout sweeps), or a wheel bucket (HELD) */
    struct m0_conn *next_free;     /* free list / release list */
    struct m0_conn *next_doomed;   /* doomed list */
};


#define M0_CONN_CHUNK_SHIFT 12
#define M0_CONN_CHUNK (1u << M0_CONN_CHUNK_SHIFT)

static inline uint32_t m0_conn_slot(const struct m0_server *s, const struct m0_conn *c)
{
    (void)s;
    return c->slot;
}

#define M0_CONN_WHEEL 1024
#define M0_CONN_WHEEL_MS 200

/* Register events as the epoll interest (no-op when unchanged). */
void m0_conn_interest(struct m0_server *s, struct m0_conn *c, uint32_t events);
/* Queue a C-generated error response and close after it (RFC 9110 §15). */
void m0_conn_error(struct m0_server *s, struct m0_conn *c, int status, const char *reason);
/*
 * The connection's one output queue: c->out, then a file range (c->file_*).
 * A response goes there (its head and body, or a runner's pieces), and
 * once the connection is HELD so do its hold's bytes: a hold keeps only
 * its accounting (hold.h). m0_conn_queue appends n bytes (written by the
 * next m0_conn_write; see also m0_conn_send_now for a write that skips an
 * empty queue). m0_conn_queued: bytes waiting.
 *
 * m0_conn_write is the one writer: c->out then the file range, through the
 * transport; the interest follows (EPOLLOUT while bytes wait; a HELD
 * connection's interest is set either way). M0_OK: all out; M0_AGAIN: the
 * rest waits for EPOLLOUT; M0_ERR: the connection is unusable (the caller
 * closes it, or dooms it inside a fan-out). Never closes, never calls the
 * protocol but its wrote.
 *
 * m0_conn_flush (WRITE): m0_conn_write, then a streaming runner credited,
 * and when all is out the protocol goes on (s->proto[c->proto]->drained:
 * resume an inline runner, enter a hold, or finish); closes on M0_ERR.
 *
 * m0_conn_rearm: set the interest the queue and the protocol imply now
 * (after a hold stopped or resumed reading).
 */
void m0_conn_queue(struct m0_conn *c, const void *p, size_t n);
static inline size_t m0_conn_queued(const struct m0_conn *c)
{
    return m0_buf_unread(&c->out);
}
int m0_conn_write(struct m0_server *s, struct m0_conn *c);
void m0_conn_flush(struct m0_server *s, struct m0_conn *c);
void m0_conn_rearm(struct m0_server *s, struct m0_conn *c);

/* Slot events: the loop's slot handler (the epoll events of a slot's
 * socket, dispatched by its state to conn.c or its protocol). */
void m0_conn_on_event(struct m0_loop *l, uint32_t slot, uint32_t gen, uint32_t events, void *ctx);
/* Jobs the cache keeps (1.3 KB each); about a pool's threads and the
 * requests in flight beside them. */
#define M0_JOB_CACHE 256
/* Read what is available into c->in (bounded per wakeup); the peer's end
 * or an error sets C_PEER_GONE. */
void m0_conn_read(struct m0_server *s, struct m0_conn *c);
/* One read of at most n bytes into buf (EINTR retried): >0, 0 at the
 * peer's end, -1 with errno (EAGAIN: nothing now). */
ssize_t m0_conn_recv(struct m0_server *s, struct m0_conn *c, void *buf, size_t n);
/* Write what the socket takes of n bytes now, unqueued (EINTR retried):
 * the bytes written (0: none fit now), or -1 with errno when the
 * connection is unusable. The caller queues or drops the rest. */
ssize_t m0_conn_send_now(struct m0_server *s, struct m0_conn *c, const void *p, size_t n);
/* Our side writes no more (the transport's FIN): lingering close, the end
 * of a held stream. */
void m0_conn_shutdown(struct m0_server *s, struct m0_conn *c);
/* What the request in flight knows of the connection's transport, into
 * job->tls (version 0 on a plain one); 1 when it is TLS. Once per request,
 * when its head is complete. */
int m0_conn_describe(struct m0_server *s, struct m0_conn *c, struct m0_job *job);
/* The inline runner (a view on the loop thread) cannot wait for the loop:
 * m0_conn_send_wait writes all n bytes, blocking up to the write timeout
 * per stall (M0_OK, or M0_ERR with C_PEER_GONE set);
 * m0_conn_wait_readable blocks until input is there (or the transport
 * holds some), at most ms: M0_OK, or M0_ERR (timeout, error). */
int m0_conn_send_wait(struct m0_server *s, struct m0_conn *c, const char *p, size_t n);
int m0_conn_wait_readable(struct m0_server *s, struct m0_conn *c, uint64_t ms);
/* Send an answer the loop made itself (/health, a static file, a 404 no
 * mount claims, the metrics): c->out holds its head and body_bytes of body
 * (a file range may follow), framed as m0_job_framing said; the
 * protocol's drained decides keep-alive. */
void m0_conn_answer(struct m0_server *s, struct m0_conn *c, int status, uint64_t body_bytes);
/* The same for a small body the loop rendered (JSON, metrics text): a head
 * with Content-Type ctype and Cache-Control: no-store, then len bytes. */
void m0_conn_answer_body(struct m0_server *s, struct m0_conn *c, int status, const char *ctype, const char *body,
                         size_t len);
/* One access-log line for the connection's request (its head as the
 * runner built it, the bytes sent, the time since c->started_us; the
 * request as m0_job_keep_access kept it, if it did). */
void m0_conn_access_log(struct m0_server *s, struct m0_conn *c);

#include "m0/conn_slots.h"

#endif
