/*
 * broker_nats_link.h — a worker loop's link to NATS (broker_nats_link.c,
 * private to the broker module: see broker_nats.h): the items it hands
 * the loop, the resumes it answers, and its life.
 */
#ifndef M0_BROKER_NATS_LINK_H
#define M0_BROKER_NATS_LINK_H

#include <pthread.h>

#include "m0/buf.h"
#include "m0/types.h"
#include "broker_nats_pub.h"

#define M0_NATS_QUEUE_MAX 4096      /* deliveries waiting for the loop before the delivering thread waits */

enum {
    M0_NI_MSG = 1,                  /* an event read: seq, subject, data */
    M0_NI_UP,                       /* connected (text: the server's URL) */
    M0_NI_DOWN,                     /* the connection was lost; libnats reconnects */
    M0_NI_POSITIONED,               /* the reader reads after seq (the newest id when it first connected) */
    M0_NI_READING,                  /* the ordered consumer is in place */
    M0_NI_PROBE,                    /* the stream's state (st), or a failed probe (text) */
    M0_NI_REWOUND,                  /* the stream was made anew: read from its newest id (seq) on */
    M0_NI_ERROR,                    /* something the loop logs and shows in /health (text) */
    M0_NI_RESUME,                   /* a resume's answer (res) */
};

struct m0_nats_resume;

/* One thing for the loop, in the order it happened. */
struct m0_nats_item {
    struct m0_nats_item *next;
    int kind;
    unsigned gen;                   /* MSG: the subscription that read it */
    uint64_t seq;
    struct m0_nats_state st;        /* PROBE */
    struct m0_nats_resume *res;     /* RESUME */
    size_t slen, dlen;              /* MSG: subject and data; else text (slen) */
    char bytes[];
};

/* A resume asked of the link, and its answer. */
struct m0_nats_resume {
    struct m0_nats_resume *next;
    uint32_t slot, gen;
    uint64_t last;                  /* the client's Last-Event-ID */
    /* the answer */
    int rc;                         /* M0_OK, or M0_ERR (why) */
    char why[200];
    uint64_t top;                   /* the stream's newest id when asked */
    int found;                      /* the entry at last is this channel's and still kept */
    size_t total;                   /* entries after last, up to top (at most retention + 1 read) */
    size_t n;                       /* of which kept (the newest that fit in --replay-bytes), oldest first */
    uint64_t *seq;
    size_t *off, *len;              /* each frame's place in frames */
    struct m0_buf frames;
    size_t clen;
    char channel[];
};

void m0_nats_resume_free(struct m0_nats_resume *r);

struct m0_nats_link;

/* A worker loop's link to NATS: its thread connects (to the process's
 * servers), makes sure of the stream, positions the reader (after start,
 * or after the newest id when start_known is 0), reads with an ordered
 * consumer, answers resumes (retention: their bound; replay_bytes: the
 * frames they keep) and probes the stream once a second. position: the loop's read position (atomic), for a
 * re-subscription. NULL with err when the thread or the eventfd cannot be
 * made. */
struct m0_nats_link *m0_nats_link_new(int start_known, uint64_t start, const uint64_t *position, long retention,
                                      size_t replay_bytes, char *err, size_t cap);
/* The descriptor the loop watches (readable: items wait). */
int m0_nats_link_fd(const struct m0_nats_link *k);
/* The loop takes what waits (oldest first; NULL: nothing) and drains the
 * eventfd. */
struct m0_nats_item *m0_nats_link_take(struct m0_nats_link *k);
/* The loop asks a resume (the link owns r until it answers with it). */
void m0_nats_link_resume(struct m0_nats_link *k, struct m0_nats_resume *r);
/* The loop cannot take events now (its fan-outs are backed up): the link's
 * watchdog does not take a still reader for a broken one. */
void m0_nats_link_stalled(struct m0_nats_link *k, int stalled);
/* The subscription whose messages the loop takes (messages of an older one
 * are dropped). */
unsigned m0_nats_link_gen(const struct m0_nats_link *k);
/* Stop: the thread leaves (closing its connection) without being waited
 * for. Loop thread; never blocks. */
void m0_nats_link_stop(struct m0_nats_link *k);
/* Wait for the thread, then let go of the link (it is freed once libnats's
 * last callback returned). Blocks up to about a request timeout. */
void m0_nats_link_free(struct m0_nats_link *k);
/* In a process forked from the worker: close the eventfd (no thread is
 * there to use the rest). */
void m0_nats_link_close_in_child(struct m0_nats_link *k);

#endif
