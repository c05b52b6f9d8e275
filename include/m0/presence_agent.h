/*
 * presence_agent.h — a worker's presence agent: one thread per worker
 * process, started by its first loop when there is something to do, that
 * never touches a connection or a loop's state.
 *
 *   --presence-events   join/leave: when a sub's first connection on a
 *                       channel the flag names is held (anywhere on the
 *                       host, or with --broker on any host) a "join" event
 *                       is published on the channel, and when its last one
 *                       has been gone --presence-debounce seconds a
 *                       "leave" (a reconnect meanwhile sends neither). Data:
 *                       {"sub": SUB}.
 *   --broker            the worker's part of the occupancy in Redis, so
 *                       that other hosts count it (presence_broker.c): each
 *                       change within about M0_PRESENCE_PUSH_MS, a
 *                       heartbeat every second, gone when the worker stops,
 *                       expired when it dies (M0_PRESENCE_PART_TTL_MS).
 *
 * The loops tell it what changed through a buffer it swaps out (a mutex
 * held for a copy); it reads the counts themselves from the shared table.
 */
#ifndef M0_PRESENCE_AGENT_H
#define M0_PRESENCE_AGENT_H

#include "m0/types.h"

struct m0_config;

#define M0_PRESENCE_PUSH_MS 20           /* a change waits this long to be pushed with others */
#define M0_PRESENCE_BEAT_MS 1000         /* the part's heartbeat */
#define M0_PRESENCE_PART_TTL_MS 3000     /* a part not heard of this long is dead to readers */
#define M0_PRESENCE_NOTE_MAX (8u << 20)  /* bytes of changes buffered before a full resync instead */

/* The worker's agent, started at the first call that needs one (--broker
 * or --presence-events, and a shared table); NULL when none is needed.
 * Any loop thread; the agent lives until m0_presence_agent_stop. */
void *m0_presence_agent_start(const struct m0_config *cfg);

/* What changed, for the agent (ctx from start). kind 'c': the loop's count
 * on channel changed; 's': the count of sub on it changed, events: the
 * sub's first connection came or its last went, on a channel with
 * --presence-events. Never blocks beyond a short mutex. */
void m0_presence_agent_note(void *ctx, char kind, int events, const char *channel, size_t clen, const char *sub,
                            size_t slen);

/* The worker drains: the agent withdraws the worker's part from Redis and
 * ends, on its own thread (the caller does not wait). Idempotent; any
 * thread. */
void m0_presence_agent_stop(void);

#endif
