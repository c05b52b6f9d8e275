/*
 * sse.h — the WHATWG Server-Sent Events wire format (HTML Living Standard,
 * "Server-sent events", §9.2.5 "Parsing an event stream"), and the rules for
 * channel names. Pure functions.
 */
#ifndef M0_SSE_H
#define M0_SSE_H

#include "m0/types.h"
#include "m0/buf.h"

#define M0_CHANNEL_MAX 200            /* bytes */
#define M0_SSE_HEARTBEAT ": heartbeat\n\n"

/* NULL when name (len bytes) is an acceptable channel name, else a static
 * reason. Accepted: 1..M0_CHANNEL_MAX bytes of printable ASCII (a WSGI
 * header value is latin-1 and frameworks encode others differently, so
 * only ASCII means the same on both sides), not in the reserved "m0."
 * namespace. */
const char *m0_sse_channel_error(const char *name, size_t len);

/*
 * Append one event to b: "id: ID\n" (when id != 0), "event: NAME\n" (when
 * event != NULL), one "data: " line per line of data (split on CRLF, LF or
 * CR, as the parser splits them), then the blank line that dispatches it.
 * event must hold no CR or LF (the caller validates).
 */
void m0_sse_frame(struct m0_buf *b, uint64_t id, const char *event, const char *data, size_t len);

/*
 * Read the first event of a framed event stream [p, p+n) as EventSource
 * does (WHATWG HTML §9.2.6, "Interpreting an event stream"): lines end at
 * CRLF, LF or CR; a line starting with ':' is a comment; "field: value"
 * drops one space after the colon; each "data" field appends its value and
 * a LF to the data buffer; a blank line dispatches. What is appended to
 * data is what an EventSource's onmessage handler receives as event.data:
 * the data lines joined with LF (the final LF removed).
 *
 * Returns the bytes the event took (through its blank line), or 0 when p
 * holds no complete event. *dispatch is 1 when the event fires (its data
 * buffer is not empty, §9.2.6 "dispatch the event" step 2); *event and
 * *event_len name its type ("message" when it has no event field; they
 * point into p).
 */
size_t m0_sse_event_data(const char *p, size_t n, struct m0_buf *data, int *dispatch, const char **event,
                         size_t *event_len);

/* The Last-Event-ID request header as a number: 0 when empty, UINT64_MAX
 * when it is not a decimal number this server could have issued (the
 * caller treats an id above the newest one as "resync": m0-gap). */
uint64_t m0_sse_parse_last_id(const char *v, size_t len);

#endif
