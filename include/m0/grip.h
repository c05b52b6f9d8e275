/*
 * grip.h — GRIP instruction headers on an application's response (the
 * Generic Realtime Intermediary Protocol, as Pushpin speaks it): Grip-Hold,
 * Grip-Channel, Grip-Timeout, Grip-Keep-Alive, Grip-Status, Grip-Link,
 * Grip-Set-Meta and Grip-Expose-Headers, parsed into a struct m0_grip; and
 * the content templates Pushpin's build-id filter renders (the id_format
 * meta, "%I" in published content), which django-eventstream relies on.
 *
 * Grammar (Pushpin's, the de-facto reference; the GRIP spec names the
 * headers): a list field (Grip-Channel, Grip-Link, Grip-Set-Meta,
 * Grip-Expose-Headers) may be repeated and is split on commas outside
 * double quotes; each element is a first part up to the first ';' and then
 * parameters "name[=value]" separated by ';', a value either a token-ish run
 * up to the next ';' or a quoted-string with backslash escapes. Whitespace
 * around parts is dropped. A singleton field (Grip-Hold, Grip-Timeout,
 * Grip-Keep-Alive, Grip-Status) is read from its first occurrence, as
 * Pushpin reads them; later ones are ignored.
 *
 *   Grip-Hold: response | stream
 *   Grip-Channel: NAME[; prev-id=ID][; filter=F]..., ...
 *   Grip-Timeout: SECONDS                  (response hold; default 55, at least 5)
 *   Grip-Keep-Alive: DATA[; format=raw|cstring|base64][; timeout=S][; mode=idle|interval]
 *   Grip-Status: CODE[ REASON]
 *   Grip-Link: <URL>; rel=next|gone[; timeout=S]   (next: default 120)
 *   Grip-Set-Meta: KEY="VALUE", ...
 *   Grip-Expose-Headers: NAME, ...
 *
 * A malformed value is an error with a static reason: Pushpin answers such
 * an origin response with 502 Bad Gateway ("Error while proxying to
 * origin."), and so should the caller. Where Pushpin is silently lenient
 * with garbage (an unterminated quote drops the element, an unknown cstring
 * escape drops the character, base64 skips invalid characters) this parser
 * refuses the value instead: what Pushpin would have sent is not what the
 * application meant either.
 *
 * Pure: no sockets, no Python. One struct per response, one thread.
 */
#ifndef M0_GRIP_H
#define M0_GRIP_H

#include "m0/types.h"
#include "m0/buf.h"

#define M0_GRIP_CHANNELS_MAX   64     /* Grip-Channel entries in one response */
#define M0_GRIP_FILTERS_MAX    5      /* filter= parameters on one channel (Pushpin's stack limit) */
#define M0_GRIP_ID_MAX         256    /* bytes of a prev-id */
#define M0_GRIP_KEEPALIVE_MAX  4096   /* bytes of decoded keep-alive data */
#define M0_GRIP_LINK_MAX       4096   /* bytes of a Grip-Link URL */
#define M0_GRIP_META_MAX       16     /* Grip-Set-Meta pairs */
#define M0_GRIP_META_LEN_MAX   1024   /* bytes of one meta key or value */
#define M0_GRIP_EXPOSE_MAX     32     /* Grip-Expose-Headers names */
#define M0_GRIP_SECONDS_MAX    (7 * 24 * 3600)   /* the largest timeout taken as given */

#define M0_GRIP_TIMEOUT_DEFAULT    55   /* Grip-Timeout absent (GRIP spec: SHOULD 55) */
#define M0_GRIP_TIMEOUT_MIN        5    /* Pushpin raises shorter response timeouts to 5 */
#define M0_GRIP_KEEPALIVE_DEFAULT  55   /* Grip-Keep-Alive without timeout= */
#define M0_GRIP_NEXT_TIMEOUT_DEFAULT 120 /* Grip-Link rel=next without timeout= */

enum m0_grip_hold { M0_GRIP_HOLD_NONE, M0_GRIP_HOLD_RESPONSE, M0_GRIP_HOLD_STREAM };

/* Grip-Keep-Alive mode=: idle (sent after TIMEOUT seconds without a write;
 * the default) or interval (every TIMEOUT seconds, whatever was written). */
enum m0_grip_ka_mode { M0_GRIP_KA_NONE, M0_GRIP_KA_IDLE, M0_GRIP_KA_INTERVAL };

/* Channel filters (Grip-Channel filter=NAME), as bits. Pushpin ignores a
 * name it does not know; so does the parser, but it sets M0_GRIP_F_OTHER so
 * the caller can say it is not honoured. */
#define M0_GRIP_F_SKIP_SELF    0x01u   /* drop items whose meta sender == sub meta user */
#define M0_GRIP_F_SKIP_USERS   0x02u   /* drop items whose meta skip_users lists sub meta user */
#define M0_GRIP_F_REQUIRE_SUB  0x04u   /* drop items whose meta require_sub is not one of our channels */
#define M0_GRIP_F_BUILD_ID     0x08u   /* render %I in content from sub meta id_format */
#define M0_GRIP_F_VAR_SUBST    0x10u   /* substitute %(name)s from sub meta */
#define M0_GRIP_F_OTHER        0x80u   /* some filter this server does not know */

/* A span of struct m0_grip's string store: bytes [off, off+len) of
 * g->store.data (use m0_grip_str; the store may move as it grows). */
struct m0_grip_span {
    uint32_t off, len;
};

struct m0_grip_channel {
    struct m0_grip_span name;      /* a valid m0 channel name (m0_sse_channel_error) */
    struct m0_grip_span prev_id;   /* when has_prev_id; may be empty */
    uint8_t has_prev_id;
    uint8_t nfilters;              /* filter= parameters seen */
    uint32_t filters;              /* M0_GRIP_F_* */
};

struct m0_grip_meta {
    struct m0_grip_span key, value;
};

struct m0_grip {
    enum m0_grip_hold hold;
    unsigned nchannels;
    struct m0_grip_channel channels[M0_GRIP_CHANNELS_MAX];

    int timeout;                   /* seconds (response hold), after m0_grip_finish's defaults */
    uint8_t has_timeout;           /* Grip-Timeout was given */

    enum m0_grip_ka_mode ka_mode;  /* M0_GRIP_KA_NONE: no Grip-Keep-Alive */
    struct m0_grip_span ka_data;   /* decoded bytes, 1..M0_GRIP_KEEPALIVE_MAX */
    int ka_timeout;                /* seconds, at least 1 */

    int status;                    /* Grip-Status code (100..599), 0 when absent */
    struct m0_grip_span reason;    /* its reason phrase; empty: the standard one */

    struct m0_grip_span next_link; /* Grip-Link rel=next URL (without <>), empty when absent */
    int next_timeout;              /* seconds */
    struct m0_grip_span gone_link; /* Grip-Link rel=gone URL, empty when absent */

    unsigned nmeta;                /* Grip-Set-Meta, later keys replacing earlier ones */
    struct m0_grip_meta meta[M0_GRIP_META_MAX];

    unsigned nexpose;              /* Grip-Expose-Headers: when nonzero, only these reach the client */
    struct m0_grip_span expose[M0_GRIP_EXPOSE_MAX];

    uint8_t seen;                  /* singleton fields already read (grip.c) */
    uint8_t any;                   /* some Grip-* field was seen */
    struct m0_buf store;           /* the bytes every span points into */
};

/* Reset g for a new response (keeps the store's allocation). */
void m0_grip_init(struct m0_grip *g);
void m0_grip_free(struct m0_grip *g);

/* The bytes of span s (not NUL-terminated; valid until g's next change). */
static inline const char *m0_grip_str(const struct m0_grip *g, struct m0_grip_span s)
{
    return g->store.data != NULL ? g->store.data + s.off : "";
}

/* Is the response field name (nlen bytes) a GRIP instruction, to be kept
 * from the client? Every "Grip-" field is, case-insensitively (Pushpin
 * strips the whole prefix, known names or not). */
int m0_grip_is_field(const char *name, size_t nlen);

/*
 * Read one response field. Fields that are not Grip-* are ignored (returns
 * M0_OK, nothing changes); known Grip-* fields are parsed into g; unknown
 * Grip-* fields are ignored. Returns M0_OK, or M0_ERR with *why set to a
 * static reason naming the field (g is then unusable for a hold: answer
 * 502). name and value need not outlive the call.
 */
int m0_grip_field(struct m0_grip *g, const char *name, size_t nlen, const char *value, size_t vlen,
                  const char **why);

/*
 * After the last field: the cross-field checks and defaults. A hold needs
 * at least one channel (GRIP spec); a stream hold whose channels give
 * prev-id needs a Grip-Link rel=next (Pushpin recovers gaps by requesting
 * it); Grip-Timeout defaults to 55 and is raised to at least 5 seconds.
 * Returns M0_OK or M0_ERR with *why set.
 */
int m0_grip_finish(struct m0_grip *g, const char **why);

/* The meta value for key (klen bytes), or NULL when not set; *len its size. */
const char *m0_grip_meta_get(const struct m0_grip *g, const char *key, size_t klen, size_t *len);

/* Binary payloads (content-bin, format=base64) decode with
 * m0_base64_decode(..., M0_B64_PAD, ...) (base64.h): the standard alphabet,
 * '=' padding optional, nothing skipped. */

/*
 * Pushpin's template syntax (its Format::process): "%%" is '%', "%X" a
 * directive X (a letter), "%(ARG)X" a directive with an argument ('\' in
 * ARG escapes the next byte). Two renderers, both appending to out and
 * returning M0_OK, or M0_ERR with *why set (out then holds a partial
 * result the caller discards):
 *
 * m0_grip_render_id: the id_format meta of a build-id subscription with
 * "%(CHANNEL)s" replaced by that channel's last id, looked up through
 * lookup(ctx, name, nlen, &vlen) (NULL: no such variable, an error).
 *
 * m0_grip_render_content: published content with "%I" replaced by id (the
 * rendered id) and "%(TEXT)I" by TEXT; any other directive is an error.
 */
typedef const char *(*m0_grip_lookup_fn)(void *ctx, const char *name, size_t nlen, size_t *vlen);
int m0_grip_render_id(struct m0_buf *out, const char *fmt, size_t n, m0_grip_lookup_fn lookup,
                      void *ctx, const char **why);
int m0_grip_render_content(struct m0_buf *out, const char *content, size_t n, const char *id,
                           size_t idlen, const char **why);

#endif
