/*
 * broker_seen.h — what a worker's broker reader last read, to tell, when it
 * comes back (a reconnect, maybe to another replica), a node that lags
 * from one whose log lost what was read.
 *
 * A reader that reads a replica (Sentinel, --broker-min-replicas >= 1)
 * may come back on a node whose counter is below its position: a replica
 * that has not yet received the last events (it lags: they arrive in a
 * moment, the same events under the same ids), or the node of a history
 * that lost them (a failover promoted a replica without them: the ids are
 * issued again, to other events). Only the entries themselves tell the
 * two apart, so the reader keeps a fingerprint of each of the last
 * M0_SEEN_MAX entries it read, re-reads them when it comes back, and
 * reports a loss (m0-gap) only when an entry the log now holds under one
 * of those ids is not the one it read; entries it never compared (older,
 * or not re-read yet) say nothing.
 *
 * Pure, single-threaded (the loop thread).
 */
#ifndef M0_BROKER_SEEN_H
#define M0_BROKER_SEEN_H

#include "m0/types.h"

#define M0_SEEN_MAX 256         /* entries remembered (one XREAD's worth) */

struct m0_seen {
    struct {
        uint64_t id, sum;       /* id 0: empty */
    } ring[M0_SEEN_MAX];        /* by id % M0_SEEN_MAX */
    uint64_t through;           /* re-reading up to this id (the position when it began); 0: not */
    uint64_t at;                /* re-reading: the newest id re-read so far (the next read starts after it) */
};

/* Fingerprints: FNV-1a (64 bits) of n bytes at p, continuing h (start
 * with M0_SEEN_SUM0). Not a secret or a defence: two entries that
 * differ collide once in 2^64. */
#define M0_SEEN_SUM0 0xcbf29ce484222325ull
uint64_t m0_seen_mix(uint64_t h, const void *p, size_t n);

/* Forget everything (and stop re-reading). */
void m0_seen_reset(struct m0_seen *s);

/* The entry id with fingerprint sum was read (ids ascending). */
void m0_seen_note(struct m0_seen *s, uint64_t id, uint64_t sum);

/* The reader comes back at position: returns the id its next read starts
 * after — below position when the entries up to it are remembered (they
 * are re-read and compared; m0_seen_rereading is true until one is found
 * different or the log passes position), else position itself. */
uint64_t m0_seen_begin(struct m0_seen *s, uint64_t position);

/* Re-reading: 1, and *from the id the next read starts after. */
int m0_seen_rereading(const struct m0_seen *s, uint64_t *from);

enum m0_seen_verdict {
    M0_SEEN_SAME,               /* the entry read under that id (or one never remembered): skip it */
    M0_SEEN_LOST,               /* another entry under an id already read: the log lost what was read */
};

/* An entry at or below the position while re-reading (id, its
 * fingerprint sum). LOST ends the re-reading and forgets everything (what
 * was remembered is of a history the log no longer has); the re-reading
 * also ends, SAME, when id is the position it began at. */
enum m0_seen_verdict m0_seen_recheck(struct m0_seen *s, uint64_t id, uint64_t sum);

/* An entry past the position arrived: the re-reading (if any) is over. */
void m0_seen_done(struct m0_seen *s);

#endif
