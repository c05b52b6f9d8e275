/*
 * registry.h — a loop's subscriptions and journals: channel → held slots,
 * each slot's delivery filter (the last event id it has), and per channel a
 * bounded journal of recent events for Last-Event-ID resume.
 *
 * Owned by the loop thread. Delivery goes through a callback so the
 * registry stays pure: the callback queues bytes on the slot's connection
 * and must not subscribe or unsubscribe during a publish (the loop defers
 * closes to after the fan-out).
 */
#ifndef M0_REGISTRY_H
#define M0_REGISTRY_H

#include "m0/types.h"

struct m0_registry;

/* Queue n bytes for slot: the event id (0: a notice of the server's own,
 * an m0-gap, which has none). */
typedef void (*m0_deliver_cb)(void *ctx, uint32_t slot, uint64_t id, const char *p, size_t n);

/*
 * nslots: connection slots of the loop. replay_events / replay_bytes: the
 * per-channel journal bounds (0 events disables journaling). floor: the
 * newest event id that may have been published before this registry
 * existed (the shared counter at worker start): a resume from below it
 * cannot be proven gap-free.
 */
struct m0_registry *m0_registry_new(uint32_t nslots, unsigned replay_events, size_t replay_bytes,
                                    uint64_t floor);
void m0_registry_free(struct m0_registry *r);

/* The most names a channel list holds (more are ignored). */
#define M0_REGISTRY_LIST_MAX 32

/* Split a channel list (names separated by '\n', len bytes) into at most
 * max names, pointers into list with their lengths: repeats and empty
 * names dropped, the first kept. Returns how many. The rule every reader
 * of a list keeps (the registry's subscribe, the presence counts). */
size_t m0_registry_split(const char *list, size_t len, const char **name, size_t *nlen, size_t max);

/*
 * Subscribe slot (not already subscribed) to channel with filter last_id.
 * channel may be a list: up to 32 names separated by '\n' (repeats and
 * empty names dropped; more are ignored); the slot then receives the events
 * of each, once, in id order, and a resume merges their journals in id
 * order (the gap marker when any of them cannot prove it whole). Before:
 * only events with a greater id reach it. When last_id != 0, first deliver
 * the journaled events after it; if the journal cannot prove it holds all of
 * them, an "event: m0-gap" comes first, telling the client to resync —
 * unless quiet: last_id is then the server's own starting point (the newest
 * id when the view decided to hold), not the client's, and what the journal
 * has after it is replayed without a claim of completeness.
 */
void m0_registry_subscribe(struct m0_registry *r, uint32_t slot, const char *channel, size_t len,
                           uint64_t last_id, int quiet, m0_deliver_cb cb, void *ctx);

/* Deliver frame (not an event: no id, never journaled, no filter) to every
 * subscribed slot now, e.g. the live m0-gap notice. Returns the number of
 * slots reached. */
size_t m0_registry_notice_all(struct m0_registry *r, const char *frame, size_t flen, m0_deliver_cb cb,
                              void *ctx);
/* Events up to id may be missing from this registry's journals (a
 * publisher found the bus full): resumes from below it get the gap marker. */
void m0_registry_raise_floor(struct m0_registry *r, uint64_t id);

/* Would m0_registry_subscribe(.., last_id, quiet = 0, ..) replay every
 * event of channel (or of each channel of a list) after last_id from the journal, without a gap marker?
 * (With a broker, a resume the journal cannot prove whole is asked of the
 * broker instead.) */
int m0_registry_resumable(const struct m0_registry *r, const char *channel, size_t len, uint64_t last_id);

/*
 * Make slot's channels channel (a '\n'-separated list, as subscribe takes;
 * empty: none), its delivery filter kept: a channel it had goes on
 * uninterrupted (an event of it still being fanned out, or journaled after
 * the filter, reaches the slot once), a new one gets the events published
 * from now on. A slot not subscribed is subscribed with filter start,
 * quiet (the journal after start is replayed). A held socket's
 * subscribe/unsubscribe while it is open (woh.h).
 */
void m0_registry_set_channels(struct m0_registry *r, uint32_t slot, const char *channel, size_t len,
                              uint64_t start, m0_deliver_cb cb, void *ctx);

/* Forget slot's subscription (no-op when it has none). */
void m0_registry_unsubscribe(struct m0_registry *r, uint32_t slot);
int m0_registry_is_subscribed(const struct m0_registry *r, uint32_t slot);

/* Journal one event (its SSE frame, id) on channel and queue its delivery
 * to every subscriber whose filter is below id (subscribers joining later do
 * not get it, except through replay). Delivery starts at once unless earlier
 * fan-outs are unfinished; with a budget set it stops after that many
 * subscribers and m0_registry_fanout() continues it. Returns the number of
 * deliveries made now. */
size_t m0_registry_publish(struct m0_registry *r, const char *channel, size_t len, uint64_t id,
                           const char *frame, size_t flen, m0_deliver_cb cb, void *ctx);

/* Continue queued fan-outs, oldest first, visiting at most the budget's
 * subscribers. Returns the deliveries made. */
size_t m0_registry_fanout(struct m0_registry *r, m0_deliver_cb cb, void *ctx);
int m0_registry_fanout_pending(const struct m0_registry *r);
/* Events queued for fan-out and not finished. */
size_t m0_registry_fanout_backlog(const struct m0_registry *r);

/* Subscribers visited per slice (0, the default: no limit). A loop sets it
 * so that one event to many thousands of streams cannot hold the loop for
 * the whole fan-out. */
void m0_registry_set_budget(struct m0_registry *r, size_t budget);

/* Journal bytes kept across all channels (0: only the per-channel bounds).
 * Past it, the least recently active channels lose their oldest events
 * first (their resumes then get m0-gap). */
void m0_registry_set_journal_cap(struct m0_registry *r, size_t bytes);

/* One journaled event of a history: take it (1) or skip it (0: not an
 * SSE event, e.g. a GRIP item). Called twice per event for a tail. */
typedef int (*m0_history_cb)(void *ctx, uint64_t id, const char *frame, size_t n);

/*
 * What the journal of channel holds (a view's m0pub.history, issue 32):
 * the events after since, oldest first, at most limit of them; or with
 * tail, the newest limit (since ignored). *complete: nothing after since
 * (tail: among or after the events given) is missing — the rule that
 * sends m0-gap to a resume. *last_id: the channel's newest id this
 * registry knows (0: none). Returns the events given.
 */
size_t m0_registry_history(const struct m0_registry *r, const char *channel, size_t len, uint64_t since, int tail,
                           size_t limit, m0_history_cb cb, void *ctx, int *complete, uint64_t *last_id);

struct m0_channel_stat {
    const char *name;          /* valid until the registry changes */
    size_t len;
    uint32_t subscribers;
};
/* Held slots in total; and the top channels by subscribers into out
 * (up to max, busiest first). Returns how many were written. */
uint32_t m0_registry_subscribers(const struct m0_registry *r);
size_t m0_registry_top(const struct m0_registry *r, struct m0_channel_stat *out, size_t max);

#endif
