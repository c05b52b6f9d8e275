/*
 * grip_hold_int.h — what the two files of a GRIP hold share (grip_hold.c:
 * the hold, its deliveries, its long-poll answers; grip_hold_link.c: its
 * recovery through Grip-Link rel=next). Not for any other file: the rest of
 * the server knows a GRIP hold by its operations (grip_hold.h).
 */
#ifndef M0_GRIP_HOLD_INT_H
#define M0_GRIP_HOLD_INT_H

#include <stdint.h>
#include <string.h>

#include "m0/buf.h"
#include "m0/conn.h"
#include "m0/grip.h"
#include "m0/hold.h"

struct m0_completion;
struct m0_server;

#define CONTENT_FILTERS (M0_GRIP_F_BUILD_ID | M0_GRIP_F_VAR_SUBST)

struct m0_griphold {
    struct m0_hold base;            /* the accounting, the target (hold.h) */
    uint8_t kind;                   /* M0_GRIP_HOLD_STREAM or M0_GRIP_HOLD_RESPONSE */
    uint8_t finishing;              /* answered or closed: end once the queue is out */
    uint8_t ka_mode;                /* enum m0_grip_ka_mode */
    uint8_t keep;                   /* response hold: the request lets the connection persist */
    uint8_t http10;                 /* response hold: an HTTP/1.0 request (keep-alive is said) */
    uint16_t peer_port;             /* keep: the client's port */
    char *peer;                     /* keep: the client's address (the job goes back while held) */
    uint32_t filters;               /* the first channel's M0_GRIP_F_* (for the view's body) */
    /* Every channel, each subscribed: entries of (u8 has a last id, u32
     * filters, u16 name length, name, u16 id length, id), the id its
     * prev-id and then the last item's id it saw (for prev-id chaining
     * and id_format). */
    struct m0_buf ids;
    struct m0_buf id_format;        /* the id_format meta (build-id), empty when none */
    struct m0_buf user;             /* the user meta (skip-self, skip-users), empty when none */
    struct m0_buf ka;               /* keep-alive bytes */
    uint64_t ka_ms, last_ka;
    /* Recovery (Grip-Link rel=next, stream holds): the link, resolved to
     * a target of this server; fetched from the application when an item
     * was missed, or when timeout passed without an item on every
     * channel, and its answer sent on the stream (Pushpin's way). */
    struct m0_buf link;             /* "/path?query"; empty: none */
    uint32_t link_ms;               /* its timeout (ms) */
    uint64_t link_due;              /* loop clock: fetch it then (timeout) */
    uint64_t active;                /* channels (by their place) with an item since link_due was set */
    uint8_t fetching;               /* its request is with the runner */
    uint8_t want;                   /* fetch it at the next tick (outside a fan-out pass) */
    uint8_t front;                  /* items that waited for its answer: drop those that do not chain */
    uint16_t client_port;
    char *client;                   /* the request's client and Host, for the link's request */
    char *host;
    uint8_t client_https;
    uint64_t fetch_from;            /* the newest event id when the link was asked for */
    uint64_t fetch_us;              /* when (its access-log duration) */
    struct m0_buf waiting;          /* items that came meanwhile: (u32 length, frame)... */
    int kept_status;                /* response hold: the view's status (Grip-Status's) */
    struct m0_buf kept;             /* response hold: the view's status line and fields */
    struct m0_buf kept_body;        /* response hold: the view's body */
    uint64_t deadline;              /* response hold: loop clock of Grip-Timeout */
};

static inline struct m0_griphold *gh_of(struct m0_conn *c)
{
    return (struct m0_griphold *)c->hold;
}

/* ------------------------------------------------------------ the ids */

/* One channel of the hold, as read from gh->ids. */
struct ent {
    const char *name, *id;
    size_t nlen, idlen;
    unsigned idx;                   /* its place among the hold's channels */
    uint8_t has_last;               /* the channel has a last id (its prev-id, then items' ids) */
    uint32_t filters;               /* its M0_GRIP_F_* */
    size_t at, end;                 /* its bytes in gh->ids */
};

static inline void put_entry(struct m0_buf *b, const char *name, size_t nlen, const char *id, size_t idlen, int has_last,
                             uint32_t filters)
{
    uint16_t n16 = (uint16_t)nlen, i16 = (uint16_t)idlen;
    uint8_t h8 = (uint8_t)has_last;
    m0_buf_append(b, &h8, 1);
    m0_buf_append(b, &filters, 4);
    m0_buf_append(b, &n16, 2);
    m0_buf_append(b, name, nlen);
    m0_buf_append(b, &i16, 2);
    m0_buf_append(b, id, idlen);
}

/* The entry at *off into e; *off moves past it. Returns 0 past the last. */
static inline int entry(const struct m0_buf *b, size_t *off, struct ent *e)
{
    if (*off + 7 > b->len)
        return 0;
    const char *p = b->data + *off;
    uint16_t n16, i16;
    e->at = *off;
    e->has_last = (uint8_t)p[0];
    memcpy(&e->filters, p + 1, 4);
    memcpy(&n16, p + 5, 2);
    if (*off + 9u + n16 > b->len)
        return 0;                    /* never past the table (it is built whole) */
    e->name = p + 7;
    e->nlen = n16;
    memcpy(&i16, p + 7 + n16, 2);
    if (*off + 9u + n16 + i16 > b->len)
        return 0;
    e->id = p + 9 + n16;
    e->idlen = i16;
    *off += 9u + n16 + i16;
    e->end = *off;
    return 1;
}

/* The hold's channel named name (nlen bytes) into e. 0: not one of them. */
static inline int find(const struct m0_buf *b, const char *name, size_t nlen, struct ent *e)
{
    size_t off = 0;
    for (unsigned i = 0; entry(b, &off, e); i++) {
        e->idx = i;
        if (e->nlen == nlen && memcmp(e->name, name, nlen) == 0)
            return 1;
    }
    return 0;
}

/*
 * grip_hold.c, for the link's file. m0_griphold_render: content with %I
 * rendered (build-id) appended to out (M0_OK or M0_ERR). m0_griphold_finish:
 * end the stream once its queue is out. m0_griphold_deliver: one GRIP item
 * frame for the hold (gh->front set: one that does not chain is dropped).
 */
int m0_griphold_render(struct m0_griphold *gh, struct m0_buf *out, const char *p, size_t n);
void m0_griphold_finish(struct m0_server *s, struct m0_conn *c);
void m0_griphold_deliver(struct m0_server *s, struct m0_conn *c, const char *frame, size_t n);

#endif
