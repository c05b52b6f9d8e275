/*
 * response.h — the response a runner produces and the loop writes, and the
 * pure functions that serialize its head (RFC 9112 §4, §6; RFC 9110 §6.6).
 *
 * A struct m0_resp travels with its job: the runner (a pool thread, or the
 * loop thread when no pool serves) appends framed bytes to out, and may
 * leave a file range for sendfile; the loop writes out first, then the file
 * range.
 */
#ifndef M0_RESPONSE_H
#define M0_RESPONSE_H

#include "m0/types.h"
#include "m0/buf.h"

/* Whether the connection persists after a response is the body encoder's
 * decision alone (struct m0_body.keep, written into the head); these flags
 * say what happens once the bytes are out. */
#define M0_RESP_ABORT     0x08u  /* the body cannot be completed: close without finishing */
#define M0_RESP_HOLD      0x20u  /* an SSE hold: after out is written the slot stays open,
                                    subscribed to job->hold_channel (M0-Hold: stream) */

struct m0_resp {
    struct m0_buf out;        /* framed bytes not yet written */
    int file_fd;              /* -1, or a file to sendfile after out */
    off_t file_off;           /* next file byte to send */
    uint64_t file_left;       /* file bytes still to send */
    unsigned flags;           /* M0_RESP_* */
    int status;               /* status code, for the access log */
    uint64_t body_bytes;      /* body bytes produced, for the access log */
};

void m0_resp_init(struct m0_resp *rs);
/* Forget the response, keep out's allocation; closes file_fd. */
void m0_resp_reset(struct m0_resp *rs);
void m0_resp_free(struct m0_resp *rs);

/* The registered reason phrase for a status code (IANA HTTP Status Code
 * Registry, RFC 9110 §15), a static string; "" for a code with none
 * (unregistered, or registered "(Unused)"): RFC 9112 §4 allows an empty
 * reason, and the SP before it stays. */
const char *m0_status_reason(int status);

/* Does a response with this status to this method carry no content?
 * (1xx, 204, 304, or any response to HEAD: RFC 9110 §6.4.1, §9.3.2.) */
int m0_status_bodiless(int status);

/* The IMF-fixdate for now (RFC 9110 §5.6.7), 29 characters plus NUL,
 * cached per thread and per second. Returns a thread-local buffer. */
const char *m0_http_date(void);

/* Framing chosen for a body (RFC 9112 §6.3). */
enum m0_framing {
    M0_FRAME_NONE,      /* no content: 1xx/204/304 or HEAD */
    M0_FRAME_LENGTH,    /* Content-Length */
    M0_FRAME_CHUNKED,   /* Transfer-Encoding: chunked (HTTP/1.1 peers only) */
    M0_FRAME_CLOSE,     /* delimited by closing the connection */
};

/* What the head's closing lines need to know. */
struct m0_head_info {
    int status;
    int http_minor;          /* request's minor version: 0 or 1 */
    int keepalive;           /* request asked to keep the connection */
    int head;                /* request method was HEAD */
    int app_close;           /* the application sent Connection: close */
    int64_t content_length;  /* the application's Content-Length, or -1 */
    int64_t body_len;        /* the whole body's size when known, or -1 */
    int has_date;            /* the application supplied Date */
    int has_server;          /* the application supplied Server */
};

/* Append "Date:" (RFC 9110 §6.6.1) and "Server:" unless the application
 * supplied its own. */
void m0_head_server_fields(struct m0_buf *b, int has_date, int has_server);

/*
 * Append the server's headers and the blank line that ends the head:
 * Date and Server (unless given), the framing header, and Connection.
 * Returns the framing; *keep receives whether the connection persists.
 */
enum m0_framing m0_head_finish(struct m0_buf *b, const struct m0_head_info *hi, int *keep);

/* Append a complete error response generated in C: status line, Date,
 * Server, Content-Type text/plain, Content-Length, Connection, and a
 * one-line body naming reason. HEAD gets the head only. Returns the body
 * bytes appended (0 for HEAD), for the access log. */
size_t m0_error_response(struct m0_buf *b, int status, const char *reason, int close, int head);

#endif
