/*
 * presence_announce.h — the announcements' block of the shared occupancy
 * table (presence.h; presence_announce.c): which subs had a join published
 * on a channel --presence-events names, and the leaves pending their
 * debounce. The workers' presence agents (presence_agent.c) share it.
 */
#ifndef M0_PRESENCE_ANNOUNCE_H
#define M0_PRESENCE_ANNOUNCE_H

#include "m0/types.h"
#include "m0/presence.h"

/* Does --presence-events name channel (one of its comma-separated
 * prefixes starts it; "*" names every channel)? Pure. */
int m0_presence_events_match(const char *prefixes, const char *channel, size_t clen);

/*
 * The subs announced on channels with --presence-events (a join was
 * published, no leave yet), shared by the workers' agents: lock, look up,
 * change, unlock. A leave is pending from when the sub's last connection
 * went until due (CLOCK_MONOTONIC ms): a reconnect before then cancels it.
 * Agents only (they may wait for the lock); never a loop thread.
 */
void m0_presence_announce_lock(struct m0_presence *p);
void m0_presence_announce_unlock(struct m0_presence *p);
/* The entry of (channel, sub), or M0_PRESENCE_NONE. */
uint32_t m0_presence_announced(struct m0_presence *p, const char *channel, size_t clen, const char *sub, size_t slen);
/* Mark (channel, sub) announced (not pending). Returns its entry, or NONE when the block is full. */
uint32_t m0_presence_announce(struct m0_presence *p, const char *channel, size_t clen, const char *sub, size_t slen);
/* Forget an announced entry. */
void m0_presence_unannounce(struct m0_presence *p, uint32_t e);
/* Its pending leave's due time (0: none). */
uint64_t m0_presence_due(struct m0_presence *p, uint32_t e);
void m0_presence_set_due(struct m0_presence *p, uint32_t e, uint64_t due);
/* Every announced entry (a sweep after a worker died), or only those with
 * a pending leave due at or before now (now 0: all): cb gets the entry,
 * its channel and its sub. The callback may unannounce that entry. */
typedef void (*m0_presence_ann_cb)(void *ctx, uint32_t e, const char *channel, size_t clen, const char *sub,
                                   size_t slen);
void m0_presence_announced_each(struct m0_presence *p, int pending_only, uint64_t now, m0_presence_ann_cb cb,
                                void *ctx);

/* The subs announced on channel (a join published, no leave yet: those
 * whose leave is pending included), newest first, through cb until it
 * returns 0. Takes the announcements' lock: any thread but a loop's (a
 * view's presence() through m0_presence_list). */
typedef int (*m0_presence_name_cb)(void *ctx, const char *sub, size_t slen);
void m0_presence_announced_subs(struct m0_presence *p, const char *channel, size_t clen, m0_presence_name_cb cb,
                                void *ctx);

#endif
