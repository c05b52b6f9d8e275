/*
 * presence_loop.h — a loop's side of occupancy and presence (presence.h):
 * the loop's block in the shared table follows its registry. Each held
 * connection, when the registry subscribes it, counts once on each of its
 * channels and once under its sub (if it has one); when it is unsubscribed
 * it counts no more. The tracker is the loop's presence extension (made
 * and freed by serve.c, server.h's m0_ext), and the realtime engine (rt.c)
 * calls it through m0_presence_loop_watch, the watcher serve.c gives it
 * (rt.h, m0_rt_watch): neither rt.c nor the holds name presence. Loop
 * thread only.
 *
 * Changes the worker's agent must hear of (presence_agent.h) go to it: with
 * --broker every change (it keeps the worker's part in Redis), else only a
 * sub's first or last connection on a channel named by --presence-events
 * (join and leave).
 */
#ifndef M0_PRESENCE_LOOP_H
#define M0_PRESENCE_LOOP_H

#include "m0/types.h"

struct m0_config;
struct m0_presence_loop;

/* The tracker of a loop of nslots slots (cfg: --broker,
 * --presence-events). Never NULL; without a shared table (no --realtime)
 * it counts nothing. */
struct m0_presence_loop *m0_presence_loop_new(const struct m0_config *cfg, uint32_t nslots);
void m0_presence_loop_free(struct m0_presence_loop *pl);

/* The loop starts reading events as bus endpoint blk: its block becomes
 * this process's (emptied), and the worker's agent is started if needed. */
void m0_presence_loop_start(struct m0_presence_loop *pl, int blk);

/* The sub the slot's next subscription is held for (slen 0: none): a
 * grant's sub, or a view's M0-Presence. Copied. */
void m0_presence_loop_sub(struct m0_presence_loop *pl, uint32_t slot, const char *sub, size_t slen);

/* The registry subscribed slot to channel (one name, or up to 32 joined
 * by '\n'): count it on each, with its sub. last(ctx, name, len): the
 * newest id the loop knows on a channel (its journal), kept with its
 * entry. A slot counted already is left as it is. */
void m0_presence_loop_join(struct m0_presence_loop *pl, uint32_t slot, const char *channel, size_t clen,
                           uint64_t (*last)(void *ctx, const char *name, size_t len), void *ctx);

/* An event numbered id went out on channel (its last id for channel_info,
 * presence.h). */
void m0_presence_loop_event(struct m0_presence_loop *pl, const char *channel, size_t clen, uint64_t id);

/* The slot's subscription ends (or never began): it counts no more, and
 * its sub is forgotten. */
void m0_presence_loop_leave(struct m0_presence_loop *pl, uint32_t slot);

/* The tracker as the realtime engine's watcher (rt.h): ctx is a
 * struct m0_presence_loop (its owner unsets the watch before
 * m0_presence_loop_free); stop stops the worker's agent
 * (m0_presence_agent_stop). */
struct m0_rt_watch_ops;
extern const struct m0_rt_watch_ops m0_presence_loop_watch;

#endif
