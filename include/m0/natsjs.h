/*
 * natsjs.h — what m0serve reads and writes of NATS JetStream by itself
 * (docs/broker.md, "NATS JetStream"); the protocol is libnats's. Pure: no
 * I/O, no state; unit-tested and fuzzed (tests/fuzz/fuzz_nats.c), since
 * every byte it reads comes from the broker.
 *
 *   names     a channel name (printable ASCII, sse.h's rule) as one subject
 *             token: a subject cannot carry '.', '*', '>' or white space
 *             inside a token, and the JetStream API carries subjects in JSON,
 *             so every byte outside [A-Za-z0-9_-] is written %XX (two
 *             uppercase hex digits). One spelling per name: an untoken that
 *             meets a byte escaped without need, or a lowercase digit, refuses
 *             it. The same escape makes the broker prefix a subject token and
 *             a publish key a Nats-Msg-Id.
 *   subjects  PREFIX.CHANNEL, PREFIX the prefix's token (one trailing ':' of
 *             --broker-prefix dropped: "m0:" gives "m0"); the stream is
 *             PREFIX-events with the subjects PREFIX.>.
 *   replies   the JSON answer of $JS.API.STREAM.MSG.GET (a resume reads a
 *             channel's history with it): its message's sequence, subject and
 *             payload (base64), or its error.
 */
#ifndef M0_NATSJS_H
#define M0_NATSJS_H

#include "m0/types.h"
#include "m0/buf.h"

#define M0_NATS_PREFIX_MAX 200      /* bytes of a subject prefix (63 bytes of --broker-prefix, escaped) */
#define M0_NATS_STREAM_MAX 220      /* bytes of a stream name ("-events" after the prefix) */

/* Append the token of p[0..n) to out (see above): n bytes of [A-Za-z0-9_-]
 * give themselves, any other byte three (%XX). */
void m0_nats_token(struct m0_buf *out, const char *p, size_t n);

/* The bytes of the token tok[0..n) into out (at most cap bytes), their
 * count in *len. M0_OK, or M0_ERR when tok is empty or not a token
 * m0_nats_token makes: a byte outside [A-Za-z0-9_%-], a '%' not followed by
 * two uppercase hex digits, an escape of a byte that needs none, or more
 * than cap bytes. */
int m0_nats_untoken(const char *tok, size_t n, char *out, size_t cap, size_t *len);

/* The subject prefix (NUL-terminated, at most M0_NATS_PREFIX_MAX bytes) and
 * the stream name (at most M0_NATS_STREAM_MAX) of a broker prefix (1..63
 * printable bytes, m0_broker_prefix_ok). */
void m0_nats_names(const char *prefix, char *subject_prefix, size_t pcap, char *stream, size_t scap);

/* Append the subject of channel (clen bytes) under the subject prefix
 * sprefix to out: "SPREFIX.TOKEN". */
void m0_nats_subject(struct m0_buf *out, const char *sprefix, const char *channel, size_t clen);

/* The channel of a message's subject (slen bytes) under sprefix: M0_OK with
 * its bytes in out (at most cap) and *len, when the subject is
 * "SPREFIX.TOKEN" with one token whose bytes are a valid channel name
 * (m0_sse_channel_error); else M0_ERR (not ours, or malformed). */
int m0_nats_channel(const char *subject, size_t slen, const char *sprefix, char *out, size_t cap, size_t *len);

/* A $JS.API.STREAM.MSG.GET answer (json, n bytes), as decoded. */
struct m0_nats_got {
    uint64_t seq;               /* the message's stream sequence (>= 1) */
    struct m0_buf subject;      /* its subject (not NUL-terminated) */
    struct m0_buf data;         /* its payload, decoded (empty: none) */
    int code, err_code;         /* an error answer's "code" and "err_code" */
    char why[160];              /* an error answer's description, or what was wrong */
};

/*
 * Decode a message-get answer into *got (its buffers are reset first and
 * belong to the caller, who frees them). M0_OK: a message (seq >= 1, a
 * subject, a payload that is base64 of at most max_data bytes); M0_AGAIN:
 * the answer says there is no such message (404, err_code 10037); M0_ERR:
 * another error answer (code, err_code, why), or an answer that is not one
 * (not JSON, a missing or mistyped member, bad base64, a payload over
 * max_data: why says which).
 */
int m0_nats_msg_get_reply(const char *json, size_t n, size_t max_data, struct m0_nats_got *got);

#endif
