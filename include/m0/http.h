/*
 * http.h — the parsed request and the llhttp glue (RFC 9112).
 *
 * m0_http_feed() runs llhttp over bytes the connection read and fills a
 * struct m0_req. It pauses twice per message — once when the header section
 * is complete (so the caller can answer 100-continue or refuse a body early)
 * and once when the message is complete (so pipelined requests wait their
 * turn). Every rejection carries a status code and a static reason string;
 * llhttp errors are sticky, so any error ends the connection.
 *
 * Two parts of the grammar are read by the glue, not by llhttp (8.1.0 gets
 * both wrong; see http.c): the method (RFC 9110 §9.1: any token; one llhttp
 * does not know is answered 501 once the rest of the head is checked) and
 * the whitespace of chunk-size lines (RFC 9112 §7.1.1: BWS around ";" and
 * "=" in chunk extensions).
 *
 * Pure logic: no sockets, no Python. Callers own both structs. A request is
 * touched by one thread at a time: the loop while reading, the runner while
 * dispatched (see job.h).
 */
#ifndef M0_HTTP_H
#define M0_HTTP_H

#include <llhttp.h>
#include "m0/types.h"
#include "m0/buf.h"
#include "m0/log_text.h"    /* M0_REQ_LOG */

/* Limits enforced while parsing. Sizes in bytes. */
struct m0_limits {
    size_t max_target;        /* request-target length; over → 414 */
    size_t max_header_bytes;  /* request line + header section; over → 431 */
    unsigned max_headers;     /* header field lines; over → 431 */
    uint64_t max_body;        /* decoded body; over → 413 */
    size_t body_mem;          /* body bytes kept in memory before spilling to a temp file */
};

/* One header field line, as received: name case preserved; value with
 * surrounding whitespace trimmed (RFC 9110 §5.5). NUL-terminated copies
 * in the request arena. */
struct m0_hdr {
    const char *name;
    const char *value;
    uint32_t name_len;
    uint32_t value_len;
};

#define M0_REQ_KEEPALIVE  0x01u   /* connection persists after this response */
#define M0_REQ_HEAD       0x02u   /* method is HEAD: no response body */
#define M0_REQ_EXPECT100  0x04u   /* Expect: 100-continue was sent */
#define M0_REQ_CHUNKED    0x08u   /* body uses chunked transfer coding */
#define M0_REQ_UPGRADE    0x10u   /* Connection: upgrade + Upgrade header */
#define M0_REQ_ASTERISK   0x20u   /* request-target "*" (OPTIONS) */

struct m0_req {
    struct m0_arena arena;    /* method, target, headers; reset per request */
    const char *method;       /* as received (an RFC 9110 token), NUL-terminated; NULL
                               * until the request-line's method is read */
    const char *target;       /* raw request-target, NUL-terminated */
    uint32_t method_len, target_len;
    const char *path;         /* target up to '?' (raw, not decoded), in arena;
                               * "" for CONNECT's authority-form */
    const char *query;        /* after '?', or "" */
    uint32_t path_len, query_len;
    const char *authority;    /* host[:port] of an absolute-form target, host:port
                               * of CONNECT's authority-form, or NULL */
    uint32_t authority_len;
    uint8_t http_major, http_minor;   /* 0.0 until the request-line's version is read */
    unsigned flags;           /* M0_REQ_* */
    struct m0_hdr *hdrs;      /* arena array of nhdrs entries */
    unsigned nhdrs, hdrs_cap;
    int64_t content_length;   /* -1 when absent */
    /* Decoded body: the first limits.body_mem bytes in memory, the rest
     * (if any) spills to an unlinked temporary file body_fd. */
    struct m0_buf body;
    int body_fd;              /* -1 when the body is entirely in memory */
    uint64_t body_len;        /* total decoded body bytes */
};

/* The longest chunk-size line, extensions included, in bytes. RFC 9112
 * §7.1.1 sets no limit, and a server that ignores extensions must still read
 * them: without a bound one chunk could carry endless extension bytes (a
 * known DoS against other parsers). Longer lines are a 400. */
#define M0_CHUNK_LINE_MAX (16 * 1024)

/* Parser state for one connection. */
struct m0_http {
    llhttp_t parser;
    struct m0_req *req;
    const struct m0_limits *lim;
    struct m0_buf field;      /* span accumulators across reads */
    struct m0_buf value;
    size_t head_bytes;        /* bytes of the current head fed so far */
    int status;               /* on M0_ERR: the HTTP status to answer */
    const char *reason;       /* on M0_ERR: static reason string */
    uint8_t in_message;       /* first byte of a message seen */
    uint8_t headers_done;
    uint8_t message_done;
    uint8_t host_seen;
    uint8_t head_scanned;     /* obs-fold scan finished for this head */
    uint8_t last_was_lf;      /* whitespace scan state across feeds */
    uint8_t last_was_sp;
    uint8_t last_was_cr;      /* bare-LF scan state across feeds (head, trailers) */
    uint8_t start_line_done;
    uint8_t start_seen;       /* a byte of the request-line itself was seen */
    uint8_t method_done;      /* the method is read and llhttp has it (or a stand-in) */
    uint8_t method_unknown;   /* llhttp got a stand-in: answer 501 at head end */
    uint8_t chunk_line;       /* reading a chunk-size line: the glue drops its BWS */
    uint8_t chunk_last;       /* the current chunk is the last one (size 0) */
    uint8_t chunk_paused;     /* llhttp paused at the end of a chunk's data */
    uint8_t ext_bws;          /* chunk-size line: whitespace dropped, next byte decides */
    uint8_t ext_value;        /* chunk-size line: inside an extension value (after "=") */
    uint8_t ext_quoted;       /* chunk-size line: inside a quoted-string */
    uint8_t ext_escaped;      /* chunk-size line: after a backslash in a quoted-string */
    char ext_prev;            /* chunk-size line: last byte kept, or 0 at line start */
    uint32_t chunk_line_len;  /* chunk-size line: bytes read so far (M0_CHUNK_LINE_MAX) */
    unsigned trailers;        /* trailer fields seen (dropped) */
    uint64_t body_max;        /* this message's body limit: lim->max_body unless m0_http_cap_body lowered it */
};

/* Set up h for a new connection; req must outlive it. */
void m0_http_init(struct m0_http *h, struct m0_req *req, const struct m0_limits *lim);
/* Prepare for the next message on the same connection (keep-alive): resets
 * the request and its arena but keeps allocations. */
void m0_http_next(struct m0_http *h);
/* Lower the body limit of the message in progress to max bytes (never
 * raise it past lim->max_body): a body that passes it is M0_ERR 413 at
 * the byte that passes it, before that byte is stored. Called between the
 * head (M0_OK) and the body, for an endpoint with a smaller limit of its
 * own (the GRIP control port's --grip-max-body); m0_http_next restores
 * lim->max_body. A Content-Length over max is the caller's to refuse. */
void m0_http_cap_body(struct m0_http *h, uint64_t max);
/* Release parser temporaries (not the request). */
void m0_http_free(struct m0_http *h);

/*
 * Parse up to n bytes at p. *used receives how many were consumed.
 * Returns:
 *   M0_AGAIN  all n consumed, the message is not complete yet;
 *   M0_OK     the header section just completed (paused; call again with
 *             the rest — the caller may first send 100 Continue);
 *   M0_DONE   the message is complete (paused; bytes after *used belong to
 *             the next pipelined request — call m0_http_next() first);
 *   M0_ERR    malformed (4xx), over a limit (413, 414, 431), a version
 *             (505) or method (501) we do not implement: h->status and
 *             h->reason say why; the connection must answer and close —
 *             after such a request its framing cannot be trusted.
 */
int m0_http_feed(struct m0_http *h, const char *p, size_t n, size_t *used);

/* The same as a printf argument (log_text.h's M0_LOG_TEXT). */
#define M0_REQ_LOG(r) m0_req_log((char[M0_LOG_TEXT_MAX]){0}, M0_LOG_TEXT_MAX, (r))

#include "m0/request.h"

#endif
