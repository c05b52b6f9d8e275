/*
 * pubreq.h — the body of a publish on the server's local publish socket
 * (pubsock.h; docs/realtime.md "Publishing from outside the server"):
 *
 *   {"channel": "news", "data": "hello", "event": "message", "key": "k-1"}
 *
 * one JSON object (RFC 8259) with exactly these members: "channel" and
 * "data" strings (required), "event" and "key" strings or null (optional).
 * An "id" member is refused: event ids are the server's, one global
 * sequence. Any other member, a duplicate member or a value of the wrong
 * type is refused too, so a typo ("evnt") never publishes something else
 * than was meant. data is UTF-8 text (JSON strings are) and may hold any
 * character, "\u0000" included; the channel follows the channel-name rules
 * (sse.h); the event is one line (no CR, LF or NUL). What the key must be
 * (broker_url.h, m0_broker_key_ok) and whether the framed event fits the
 * bus is the caller's to check: those rules belong to the layers above.
 *
 * Pure: no sockets, no Python. JSON by jansson.
 */
#ifndef M0_PUBREQ_H
#define M0_PUBREQ_H

#include "m0/types.h"
#include "m0/buf.h"
#include "m0/http.h"

/* Bytes of a publish body: room for the largest event the bus carries
 * (64 KiB framed) written as JSON with escapes. Over it → 413. */
#define M0_PUBREQ_BODY_MAX (256 * 1024)
#define M0_PUBREQ_ERR_MAX 200          /* bytes of an error text, NUL included */

/* The HTTP limits of a connection to the publish socket (conn.c sets them
 * when it accepts one): a body over M0_PUBREQ_BODY_MAX is refused with 413
 * when its head is read (Content-Length) or as its chunks pass the limit,
 * never buffered whole; a short target and head (the request is POST
 * /publish and a few fields); the body kept in memory. */
extern const struct m0_limits m0_pubreq_limits;

struct m0_pubreq {
    const char *channel;               /* NUL-terminated; channel_len bytes */
    size_t channel_len;
    const char *data;                  /* NUL-terminated after data_len bytes (may hold NULs) */
    size_t data_len;
    const char *event;                 /* NULL: none; else one line, NUL-terminated */
    const char *key;                   /* NULL: none; else NUL-terminated, key_len bytes */
    size_t key_len;
    void *json;                        /* owns the strings above (m0_pubreq_free) */
    char err[M0_PUBREQ_ERR_MAX];       /* on 400/413: one sentence naming the member */
};

/*
 * Parse a publish body of len bytes into r (zeroed by the call; free it
 * with m0_pubreq_free whatever the result). Returns the HTTP status to
 * answer with: 200 (r holds the publish), 413 when len exceeds
 * M0_PUBREQ_BODY_MAX, or 400 with r->err set ("body is not a JSON
 * object: ...", "channel: the m0. channel namespace is reserved",
 * "unknown member 'evnt' (a publish has channel, data, event, key)", ...).
 */
int m0_pubreq_parse(struct m0_pubreq *r, const char *body, size_t len);
void m0_pubreq_free(struct m0_pubreq *r);

/*
 * The body m0_pubreq_parse reads back, appended to out: channel (clen
 * bytes), data (dlen bytes), event (NULL: none) and key (NULL: none), the
 * strings as given (the caller checked their rules). Returns M0_OK, or
 * M0_ERR (out unchanged) when a string is not UTF-8 (a JSON string must
 * be: RFC 8259 §8.1) — the error names which in err (cap bytes).
 */
int m0_pubreq_encode(struct m0_buf *out, const char *channel, size_t clen, const char *data, size_t dlen,
                     const char *event, const char *key, char *err, size_t cap);

/*
 * A publisher's reading of the socket's answer: resp, n bytes, the whole
 * answer (the publisher asked with Connection: close, so it read to the
 * end). Returns M0_OK with *status, the body (*body, *blen: a span of resp,
 * Content-Length bytes when the field is there, else the rest) and, for a
 * 200, *id > 0 from its {"id": N}; M0_ERR when resp is not an HTTP/1.x
 * status line and head, is shorter than its Content-Length, or is a 200
 * without such an id.
 */
int m0_pubreq_answer(const char *resp, size_t n, int *status, const char **body, size_t *blen, uint64_t *id);

#endif
