/*
 * presence.h — occupancy and presence (issue 32): who holds which channel,
 * answered from the loops' own tables in shared memory, never by asking a
 * connection.
 *
 * The master maps one region before the first fork (MAP_SHARED, like the
 * bus's id page): a header, then one block per event loop of every worker
 * slot (slot × loops + loop: the loop's bus endpoint), then one block for
 * the join/leave announcements (presence_agent.c). A loop writes only its
 * own block: per channel an entry with the number of its held connections
 * on it, and per (channel, sub) an entry with the connections of that sub
 * (a grant's "sub" claim, or a view hold's M0-Presence header). Any thread
 * of any process of the server reads every block, without a lock:
 *
 *   count     the channel's entry in each live block: O(blocks), whatever
 *             the number of listeners;
 *   list      the channel's subs, walked in each block up to the caller's
 *             limit, then each listed sub's count looked up by hash.
 *
 * Consistency: one writer per block (its loop; a mutex only hands a block
 * over to a replacement worker). Each entry carries a sequence counter (odd
 * while written) and a birth stamp; lists are inserted at their head, so a
 * reader walking one sees births strictly decrease — an entry removed or
 * reused under it breaks that (or its sequence, kind, bucket or owner
 * check) and the walk starts over. A block reset (a new owner, or the
 * master after its owner died) bumps the block's epoch, and a reader that
 * saw it change reads the block again. No reader ever waits for a writer.
 *
 * Memory: entries are runs of 32-byte cells (a 48-byte header, then the
 * name: one channel or sub of 20 bytes takes 3 cells); a run keeps its size
 * class for the block's life (so an index always lands on an entry's first
 * cell). The region is reserved with MAP_NORESERVE: only the cells used
 * cost memory. A block out of cells counts the refusal (full) and the
 * connection goes uncounted there (the loop logs it once).
 */
#ifndef M0_PRESENCE_H
#define M0_PRESENCE_H

#include "m0/types.h"

#define M0_PRESENCE_SUB_MAX 128      /* bytes of a sub that is listed (longer: counted, not listed) */
#define M0_PRESENCE_NONE 0xffffffffu
#define M0_PRESENCE_HOST_MAX 24      /* the host id: 16 hex digits and a NUL, with room */

struct m0_presence;

/* The region this process maps (NULL: none, e.g. without --realtime).
 * Set by the master before it forks; read-only afterwards. */
extern struct m0_presence *m0_presence_current;

/* Map a region of nblocks loop blocks of cells cells each (the master,
 * before the first fork), named by a fresh random host id. NULL (errno
 * set) when it cannot be mapped. */
struct m0_presence *m0_presence_create(uint32_t nblocks, uint32_t cells);
/* Unmap (the master at exit; tests). */
void m0_presence_destroy(struct m0_presence *p);

/* Cells a block gets for a loop of nconns connection slots: room for a
 * channel and a sub entry per connection (3 cells each) and some. */
uint32_t m0_presence_cells_for(uint32_t nconns);
/* Loop blocks, and this host's id ("0123456789abcdef"). */
uint32_t m0_presence_blocks(const struct m0_presence *p);
const char *m0_presence_host(const struct m0_presence *p);

/* ------------------------------------------------------------ a writer */

/* The loop's block blk becomes pid's: emptied, its epoch bumped (a
 * predecessor still draining writes nothing more into it). M0_OK, M0_ERR
 * (blk out of range). Loop thread. */
int m0_presence_claim(struct m0_presence *p, uint32_t blk, int32_t pid);

/* What a join or leave changed: the channel's count and the sub's. */
struct m0_presence_delta {
    uint32_t chan, sub;               /* the entries (M0_PRESENCE_NONE: none) */
    int sub_first;                    /* the sub's count went 0 -> 1 (join) / 1 -> 0 (leave) */
    int counted;                      /* the block took it (else: not the owner, or full) */
};

/* One more connection of pid's block blk on channel (clen bytes), with sub
 * (slen bytes; NULL or slen 0: none; over M0_PRESENCE_SUB_MAX: counted on
 * the channel, not listed). *d receives the entries to pass to leave. */
void m0_presence_join(struct m0_presence *p, uint32_t blk, int32_t pid, const char *channel, size_t clen,
                      const char *sub, size_t slen, struct m0_presence_delta *d);
/* One connection less on the entries join gave (chan, sub). Removes an
 * entry whose count reaches 0. d->sub_first: the sub's last connection
 * went. */
void m0_presence_leave(struct m0_presence *p, uint32_t blk, int32_t pid, uint32_t chan, uint32_t sub,
                       struct m0_presence_delta *d);

/* An event numbered id went out on channel: the channel's entry in pid's
 * block blk (if the loop holds anyone there) keeps the newest id, for
 * channel_info's last_id without asking the loop. Loop thread. */
void m0_presence_event(struct m0_presence *p, uint32_t blk, int32_t pid, const char *channel, size_t clen,
                       uint64_t id);

/* Master, after reaping pid: the blocks pid owned are emptied and freed
 * (a reader stops counting them at once). Returns how many. */
int m0_presence_reaped(struct m0_presence *p, int32_t pid);

/* ------------------------------------------------------------ readers */

/* Blocks [first, first + n) (n 0: every loop block). Any thread, any
 * process; never waits for a writer. */
struct m0_presence_span {
    uint32_t first, n;
};

/* Held connections on channel, summed over the span's live blocks. */
uint64_t m0_presence_count(const struct m0_presence *p, const char *channel, size_t clen,
                           struct m0_presence_span span);
/* The newest event id the span's live blocks noted on channel (0: no loop
 * holds anyone there, or none has seen an event since). */
uint64_t m0_presence_last_id(const struct m0_presence *p, const char *channel, size_t clen,
                             struct m0_presence_span span);
/* Connections of sub on channel, summed likewise. */
uint64_t m0_presence_sub_count(const struct m0_presence *p, const char *channel, size_t clen, const char *sub,
                               size_t slen, struct m0_presence_span span);

/* One listed sub: its name (valid during the callback) and connections. */
typedef void (*m0_presence_sub_cb)(void *ctx, const char *sub, size_t slen, uint64_t connections);
/* Up to limit distinct subs held on channel with their connection counts,
 * through cb. Over the whole table (span {0, 0}) the subs announced on the
 * channel (presence_announce.h: a join published, the leave not yet) are
 * listed too, with 0 connections when held nowhere right now (a leave
 * pending its debounce): what the join/leave events say. Returns how many
 * were listed. Costs O(limit × blocks); takes the announcements' lock (not
 * from a loop thread). */
size_t m0_presence_list(const struct m0_presence *p, const char *channel, size_t clen, size_t limit,
                        struct m0_presence_span span, m0_presence_sub_cb cb, void *ctx);

/* Every (channel, sub) and every channel with connections in the span's
 * blocks (a full resync: presence_broker.c): cb(ctx, channel, clen, sub,
 * slen) — sub NULL for a channel. Keys held in several blocks come once
 * per block. */
typedef void (*m0_presence_key_cb)(void *ctx, const char *channel, size_t clen, const char *sub, size_t slen);
void m0_presence_each(const struct m0_presence *p, struct m0_presence_span span, m0_presence_key_cb cb, void *ctx);

/* For /health: entries used in block blk, and adds it refused (full). */
void m0_presence_block_stats(const struct m0_presence *p, uint32_t blk, uint32_t *entries, uint64_t *full);

/* The announcements' block (join/leave, --presence-events) is
 * presence_announce.h's. */

/* Bumped each time a worker's blocks are emptied under it: the master
 * reaped it, or a replacement claimed its block. */
uint64_t m0_presence_reap_count(const struct m0_presence *p);

#endif
