/*
 * presence_int.h — the layout of the shared occupancy table, for the files
 * of the presence module only (presence.c writes and reads it,
 * presence_announce.c keeps the announcements' block). See presence.h.
 */
#ifndef M0_PRESENCE_INT_H
#define M0_PRESENCE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "m0/presence.h"

#define CELL 32
#define HDR 48                           /* an entry's header bytes */
#define NAME_MAX_ 200                    /* the longest name: a channel (M0_CHANNEL_MAX) */
#define MIN_CELLS 2
#define MAX_CELLS ((HDR + NAME_MAX_ + CELL - 1) / CELL)
#define NCLASS (MAX_CELLS - MIN_CELLS + 1)
#define NONE M0_PRESENCE_NONE

/* An entry's header, in its first cells (48 bytes), the name after it. */
struct entry {
    uint32_t seq;                        /* odd while a writer changes the entry */
    uint8_t kind;
    uint8_t ncells;                      /* the run's size: fixed for the block's life */
    uint16_t nlen;
    uint32_t count;                      /* connections (announcements: subs under a channel) */
    uint32_t hash;
    uint32_t hnext;                      /* the hash chain */
    uint32_t link;                       /* a sub: its channel; a channel: its first sub */
    uint32_t next, prev;                 /* a sub: its siblings under its channel (announcements
                                            too); a free run: the free list */
    union {
        uint64_t birth;                  /* loop blocks: insertion stamp (lists run from the newest) */
        struct {
            uint32_t next, prev;         /* announcements' subs: the pending list (while aux != 0) */
        } pend;                          /* (that block is read under its lock only: no stamps) */
    };
    uint64_t aux;                        /* announcements: the pending leave's due time (ms); a
                                            channel of a loop block: the newest event id noted */
};                                       /* then the name (entry_name) */
_Static_assert(sizeof(struct entry) == HDR, "an entry's header is HDR bytes");

/* The name bytes after an entry's header. */
static inline char *entry_name(const struct entry *e)
{
    return (char *)e + HDR;
}

struct block {
    pthread_mutex_t wlock;               /* writers (the loop; a claimer; the master; agents) */
    int32_t owner;                       /* pid; 0: nobody (not counted). atomic */
    uint32_t epoch;                      /* bumped on every reset. atomic */
    uint32_t top;                        /* cells carved so far. atomic (readers bound walks) */
    uint32_t entries;                    /* live entries. atomic */
    uint64_t birth;                      /* the last stamp given */
    uint64_t full;                       /* adds refused for want of cells. atomic */
    uint32_t free_[NCLASS];              /* free runs by size class */
    uint32_t pending;                    /* announcements: the first pending leave */
};

struct m0_presence {
    uint64_t magic;
    uint32_t nblocks;                    /* loop blocks (the announcements' block is one more) */
    uint32_t cells;                      /* per block */
    uint32_t nbuckets;                   /* per block, a power of two */
    uint32_t pad;
    size_t block_bytes, total;
    uint64_t reaped;                     /* atomic: blocks emptied after their owner died */
    char host[M0_PRESENCE_HOST_MAX];
};

#define HEAD_BYTES 4096
#define BLOCK_HDR ((sizeof(struct block) + 63) & ~(size_t)63)

static inline struct block *block_at(const struct m0_presence *p, uint32_t blk)
{
    return (struct block *)((char *)p + HEAD_BYTES + (size_t)blk * p->block_bytes);
}

static inline uint32_t *buckets(const struct m0_presence *p, const struct block *b)
{
    (void)p;
    return (uint32_t *)((char *)b + BLOCK_HDR);
}

static inline struct entry *entry_at(const struct m0_presence *p, const struct block *b, uint32_t idx)
{
    return (struct entry *)((char *)b + BLOCK_HDR + (size_t)p->nbuckets * 4 + (size_t)idx * CELL);
}

static inline uint32_t load32(const uint32_t *v)
{
    return __atomic_load_n(v, __ATOMIC_ACQUIRE);
}

static inline void store32(uint32_t *v, uint32_t x)
{
    __atomic_store_n(v, x, __ATOMIC_RELEASE);
}

enum { M0_PRESENCE_K_FREE = 0, M0_PRESENCE_K_CHAN = 1, M0_PRESENCE_K_SUB = 2 };

/* Writer primitives (the block's lock held): look a key up, add one
 * (count 0; a listed sub joins its channel's list), set a count, remove
 * an entry, empty a block. */
uint32_t m0_presence_find(const struct m0_presence *p, const struct block *b, int kind, uint32_t link,
                          const char *name, size_t n);
uint32_t m0_presence_add(struct m0_presence *p, struct block *b, int kind, uint32_t link, const char *name,
                         size_t n, int listed);
void m0_presence_set_count(struct entry *e, uint32_t count);
void m0_presence_remove(struct m0_presence *p, struct block *b, uint32_t idx, int listed);
void m0_presence_reset_block(struct m0_presence *p, struct block *b);

#endif
