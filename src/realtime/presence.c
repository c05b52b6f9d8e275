/*
 * presence.c — the shared occupancy table (see presence.h).
 *
 * Region: a header page, then nblocks + 1 blocks of block_bytes each (the
 * last: announcements). A block: its header (the writers' mutex, owner,
 * epoch, allocator), the hash buckets (cell indices), the cells.
 *
 * Entries are runs of 2..8 cells carved from the top of the block and kept
 * on a free list of their size class when removed: a run is never split
 * or merged, so every index a reader holds points at the first cell of
 * some entry, live or not. Writers change an entry between two increments
 * of its sequence counter (odd while written); readers copy it and check
 * the counter did not move (the kernel's seqlock, with GCC's __atomic
 * builtins as bus.c uses them). A reader that meets a writer TRIES times
 * running (one preempted mid-entry) waits for the block's lock rather
 * than count the block as empty (r_lock).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "m0/buf.h"
#include "m0/presence.h"
#include "m0/presence_announce.h"
#include "presence_int.h"

#define K_FREE M0_PRESENCE_K_FREE
#define K_CHAN M0_PRESENCE_K_CHAN
#define K_SUB M0_PRESENCE_K_SUB

#define MAGIC 0x6d30707265733031ull      /* "m0pres01" */
#define TRIES 64                         /* a reader's attempts before it waits for the writer (r_lock) */

struct m0_presence *m0_presence_current;

/* ------------------------------------------------------------- hashing */

static uint32_t fnv(uint32_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

/* A channel's hash; a sub's mixes in its channel's entry. */
static uint32_t key_hash(int kind, uint32_t link, const char *name, size_t n)
{
    uint32_t h = 2166136261u;
    if (kind == K_SUB) {
        char l[4] = {(char)link, (char)(link >> 8), (char)(link >> 16), (char)(link >> 24)};
        h = fnv(h ^ 0x5bd1e995u, l, 4);
    }
    return fnv(h, name, n);
}

static uint32_t cells_for(size_t nlen)
{
    uint32_t k = (uint32_t)((HDR + nlen + CELL - 1) / CELL);
    return k < MIN_CELLS ? MIN_CELLS : k;
}

/* ----------------------------------------------------------- the region */

uint32_t m0_presence_cells_for(uint32_t nconns)
{
    /* Two entries of three cells per connection (a channel and a sub of up
     * to 48 bytes each), and room for a few lists. */
    uint64_t c = (uint64_t)nconns * 6 + 4096;
    return c > 0x7fffffffu ? 0x7fffffffu : (uint32_t)c;
}

void m0_presence_reset_block(struct m0_presence *p, struct block *b)
{
    memset(buckets(p, b), 0xff, (size_t)p->nbuckets * 4);
    b->top = 0;
    for (int i = 0; i < NCLASS; i++)
        b->free_[i] = NONE;
    b->pending = NONE;
    __atomic_store_n(&b->entries, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&b->epoch, 1, __ATOMIC_RELEASE);
}

static void lock(pthread_mutex_t *m)
{
    if (pthread_mutex_lock(m) == EOWNERDEAD)
        pthread_mutex_consistent(m);     /* its holder died: callers reset what it held */
}

struct m0_presence *m0_presence_create(uint32_t nblocks, uint32_t cells)
{
    if (cells < 64)
        cells = 64;
    uint32_t nb = 64;
    while (nb < cells / 4 && nb < (1u << 30))
        nb <<= 1;
    size_t bb = BLOCK_HDR + (size_t)nb * 4 + (size_t)cells * CELL;
    bb = (bb + 4095) & ~(size_t)4095;
    size_t total = HEAD_BYTES + bb * ((size_t)nblocks + 1);
    void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    struct m0_presence *p = m;            /* zero-filled */
    p->magic = MAGIC;
    p->nblocks = nblocks;
    p->cells = cells;
    p->nbuckets = nb;
    p->block_bytes = bb;
    p->total = total;
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        memcpy(r, &t, sizeof r);
    }
    for (int i = 0; i < 8; i++)
        snprintf(p->host + 2 * i, 3, "%02x", r[i]);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    for (uint32_t i = 0; i <= nblocks; i++) {
        struct block *b = block_at(p, i);
        pthread_mutex_init(&b->wlock, &ma);
        m0_presence_reset_block(p, b);
    }
    pthread_mutexattr_destroy(&ma);
    block_at(p, nblocks)->owner = 1;      /* the announcements' block is always live */
    return p;
}

void m0_presence_destroy(struct m0_presence *p)
{
    if (p != NULL)
        munmap(p, p->total);
}

uint32_t m0_presence_blocks(const struct m0_presence *p)
{
    return p->nblocks;
}

const char *m0_presence_host(const struct m0_presence *p)
{
    return p->host;
}

uint64_t m0_presence_reap_count(const struct m0_presence *p)
{
    return __atomic_load_n(&p->reaped, __ATOMIC_ACQUIRE);
}

void m0_presence_block_stats(const struct m0_presence *p, uint32_t blk, uint32_t *entries, uint64_t *full)
{
    *entries = 0;
    *full = 0;
    if (blk >= p->nblocks)
        return;
    const struct block *b = block_at(p, blk);
    *entries = __atomic_load_n(&b->entries, __ATOMIC_RELAXED);
    *full = __atomic_load_n(&b->full, __ATOMIC_RELAXED);
}

/* -------------------------------------------------------------- writing */

static void w_begin(struct entry *e)
{
    uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&e->seq, s + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static void w_end(struct entry *e)
{
    uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&e->seq, s + 1, __ATOMIC_RELEASE);
}

/* A run of k cells, or NONE. Its counter is left even (a writer that died
 * mid-write left it odd; the block was reset since). */
static uint32_t alloc_run(struct m0_presence *p, struct block *b, uint32_t k)
{
    uint32_t c = k - MIN_CELLS, idx = b->free_[c];
    if (idx != NONE) {
        b->free_[c] = entry_at(p, b, idx)->next;
    } else {
        if (b->top + k > p->cells || b->top + k < b->top)
            return NONE;
        idx = b->top;
        store32(&b->top, b->top + k);
        struct entry *e = entry_at(p, b, idx);
        uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
        __atomic_store_n(&e->seq, (s & ~1u) + 2, __ATOMIC_RELAXED);
        e->ncells = (uint8_t)k;
    }
    return idx;
}

uint32_t m0_presence_find(const struct m0_presence *p, const struct block *b, int kind, uint32_t link, const char *name,
                     size_t n)
{
    uint32_t h = key_hash(kind, link, name, n);
    uint32_t idx = buckets(p, b)[h & (p->nbuckets - 1)];
    while (idx != NONE) {
        const struct entry *e = entry_at(p, b, idx);
        if (e->kind == kind && e->hash == h && e->nlen == n && (kind != K_SUB || e->link == link) &&
            memcmp(entry_name(e), name, n) == 0)
            return idx;
        idx = e->hnext;
    }
    return NONE;
}

/* A new entry (count 0) at the head of its bucket, and for a sub of a
 * loop block (listed: siblings) at the head of its channel's list. */
uint32_t m0_presence_add(struct m0_presence *p, struct block *b, int kind, uint32_t link, const char *name, size_t n,
                    int listed)
{
    uint32_t idx = alloc_run(p, b, cells_for(n));
    if (idx == NONE) {
        __atomic_add_fetch(&b->full, 1, __ATOMIC_RELAXED);
        return NONE;
    }
    uint32_t h = key_hash(kind, link, name, n), *head = &buckets(p, b)[h & (p->nbuckets - 1)];
    struct entry *e = entry_at(p, b, idx), *c = kind == K_SUB ? entry_at(p, b, link) : NULL;
    uint32_t first = listed && c != NULL ? c->link : NONE;
    w_begin(e);
    e->kind = (uint8_t)kind;
    e->nlen = (uint16_t)n;
    e->count = 0;
    e->hash = h;
    e->hnext = *head;
    e->link = kind == K_SUB ? link : NONE;
    e->next = first;
    e->prev = NONE;
    e->birth = ++b->birth;
    e->aux = 0;
    memcpy(entry_name(e), name, n);
    w_end(e);
    store32(head, idx);
    if (listed && c != NULL) {
        if (first != NONE) {
            struct entry *f = entry_at(p, b, first);
            w_begin(f);
            f->prev = idx;
            w_end(f);
        }
        w_begin(c);
        c->link = idx;
        w_end(c);
    }
    __atomic_add_fetch(&b->entries, 1, __ATOMIC_RELAXED);
    return idx;
}

void m0_presence_set_count(struct entry *e, uint32_t count)
{
    w_begin(e);
    e->count = count;
    w_end(e);
}

/* Unlink entry idx from its bucket (and its channel's list when listed)
 * and put its run on the free list. */
void m0_presence_remove(struct m0_presence *p, struct block *b, uint32_t idx, int listed)
{
    struct entry *e = entry_at(p, b, idx);
    uint32_t *head = &buckets(p, b)[e->hash & (p->nbuckets - 1)];
    if (*head == idx) {
        store32(head, e->hnext);
    } else {
        uint32_t at = *head;
        while (at != NONE) {
            struct entry *q = entry_at(p, b, at);
            if (q->hnext == idx) {
                w_begin(q);
                q->hnext = e->hnext;
                w_end(q);
                break;
            }
            at = q->hnext;
        }
    }
    if (listed && e->kind == K_SUB) {
        struct entry *q = e->prev != NONE ? entry_at(p, b, e->prev) : entry_at(p, b, e->link);
        w_begin(q);
        if (e->prev != NONE)
            q->next = e->next;
        else
            q->link = e->next;
        w_end(q);
        if (e->next != NONE) {
            struct entry *nx = entry_at(p, b, e->next);
            w_begin(nx);
            nx->prev = e->prev;
            w_end(nx);
        }
    }
    uint32_t c = e->ncells - MIN_CELLS;
    w_begin(e);
    e->kind = K_FREE;
    e->next = b->free_[c];
    w_end(e);
    b->free_[c] = idx;
    __atomic_sub_fetch(&b->entries, 1, __ATOMIC_RELAXED);
}

int m0_presence_claim(struct m0_presence *p, uint32_t blk, int32_t pid)
{
    if (p == NULL || blk >= p->nblocks)
        return M0_ERR;
    struct block *b = block_at(p, blk);
    lock(&b->wlock);
    int32_t was = b->owner;
    m0_presence_reset_block(p, b);
    __atomic_store_n(&b->owner, pid, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&b->wlock);
    if (was != 0 && was != pid)
        __atomic_add_fetch(&p->reaped, 1, __ATOMIC_RELEASE);   /* its holds went without a word */
    return M0_OK;
}

/* The block, locked, when pid owns it; else NULL (nothing to write). */
static struct block *own(struct m0_presence *p, uint32_t blk, int32_t pid)
{
    if (p == NULL || blk >= p->nblocks)
        return NULL;
    struct block *b = block_at(p, blk);
    lock(&b->wlock);
    if (__atomic_load_n(&b->owner, __ATOMIC_RELAXED) != pid) {
        pthread_mutex_unlock(&b->wlock);
        return NULL;
    }
    return b;
}

void m0_presence_join(struct m0_presence *p, uint32_t blk, int32_t pid, const char *channel, size_t clen,
                      const char *sub, size_t slen, struct m0_presence_delta *d)
{
    *d = (struct m0_presence_delta){.chan = NONE, .sub = NONE};
    if (clen == 0 || clen > NAME_MAX_)
        return;
    struct block *b = own(p, blk, pid);
    if (b == NULL)
        return;
    uint32_t c = m0_presence_find(p, b, K_CHAN, NONE, channel, clen);
    if (c == NONE)
        c = m0_presence_add(p, b, K_CHAN, NONE, channel, clen, 0);
    if (c != NONE) {
        struct entry *ce = entry_at(p, b, c);
        m0_presence_set_count(ce, ce->count + 1);
        d->chan = c;
        d->counted = 1;
        if (sub != NULL && slen > 0 && slen <= M0_PRESENCE_SUB_MAX) {
            uint32_t s = m0_presence_find(p, b, K_SUB, c, sub, slen);
            if (s == NONE)
                s = m0_presence_add(p, b, K_SUB, c, sub, slen, 1);
            if (s != NONE) {
                struct entry *se = entry_at(p, b, s);
                m0_presence_set_count(se, se->count + 1);
                d->sub = s;
                d->sub_first = se->count == 1;
            }
        }
    }
    pthread_mutex_unlock(&b->wlock);
}

void m0_presence_leave(struct m0_presence *p, uint32_t blk, int32_t pid, uint32_t chan, uint32_t sub,
                       struct m0_presence_delta *d)
{
    *d = (struct m0_presence_delta){.chan = chan, .sub = sub};
    if (chan == NONE)
        return;
    struct block *b = own(p, blk, pid);
    if (b == NULL)
        return;
    d->counted = 1;
    if (sub != NONE && sub < p->cells) {
        struct entry *se = entry_at(p, b, sub);
        if (se->kind == K_SUB && se->link == chan && se->count > 0) {
            m0_presence_set_count(se, se->count - 1);
            if (se->count == 0) {
                d->sub_first = 1;
                m0_presence_remove(p, b, sub, 1);
            }
        }
    }
    if (chan < p->cells) {
        struct entry *ce = entry_at(p, b, chan);
        if (ce->kind == K_CHAN && ce->count > 0) {
            m0_presence_set_count(ce, ce->count - 1);
            if (ce->count == 0 && ce->link == NONE)
                m0_presence_remove(p, b, chan, 0);
        }
    }
    pthread_mutex_unlock(&b->wlock);
}

void m0_presence_event(struct m0_presence *p, uint32_t blk, int32_t pid, const char *channel, size_t clen,
                       uint64_t id)
{
    if (clen == 0 || clen > NAME_MAX_)
        return;
    struct block *b = own(p, blk, pid);
    if (b == NULL)
        return;
    uint32_t c = m0_presence_find(p, b, K_CHAN, NONE, channel, clen);
    if (c != NONE) {
        struct entry *e = entry_at(p, b, c);
        if (id > e->aux)
            __atomic_store_n(&e->aux, id, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&b->wlock);
}

int m0_presence_reaped(struct m0_presence *p, int32_t pid)
{
    int n = 0;
    if (p == NULL || pid <= 0)
        return 0;
    for (uint32_t i = 0; i < p->nblocks; i++) {
        struct block *b = block_at(p, i);
        if (__atomic_load_n(&b->owner, __ATOMIC_ACQUIRE) != pid)
            continue;
        lock(&b->wlock);
        if (b->owner == pid) {
            __atomic_store_n(&b->owner, 0, __ATOMIC_RELEASE);
            m0_presence_reset_block(p, b);
            n++;
        }
        pthread_mutex_unlock(&b->wlock);
    }
    if (n > 0)
        __atomic_add_fetch(&p->reaped, 1, __ATOMIC_RELEASE);
    return n;
}

/* -------------------------------------------------------------- reading */

/* An entry as a reader saw it, whole. */
struct seen {
    struct entry h;
    char name[NAME_MAX_];
};

/* Copy entry idx (with its name when name): 1 when the copy is whole and
 * plausible, 0 when a writer was at it (or the index is garbage). */
static int r_copy(const struct m0_presence *p, const struct block *b, uint32_t idx, struct seen *out, int name)
{
    if (idx >= p->cells)
        return 0;
    const struct entry *e = entry_at(p, b, idx);
    uint32_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
    if (s1 & 1)
        return 0;
    memcpy(&out->h, e, sizeof out->h);
    size_t n = out->h.nlen;
    if (n > NAME_MAX_ || (size_t)idx * CELL + HDR + n > (size_t)p->cells * CELL)
        return 0;
    if (name)
        memcpy(out->name, entry_name(e), n);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&e->seq, __ATOMIC_RELAXED) == s1;
}

static void backoff(int attempt)
{
    if (attempt >= 8)
        sched_yield();              /* a writer preempted mid-entry: let it finish */
}

/* One walk of (kind, link, name)'s bucket (hash h) in block b, validating
 * every step: 1 found (*idx, *out), 0 absent, -1 a writer was at it. */
static int find_once(const struct m0_presence *p, const struct block *b, int kind, uint32_t link, const char *name,
                     size_t n, uint32_t h, uint32_t *idx, struct seen *out)
{
    uint32_t bucket = h & (p->nbuckets - 1);
    uint32_t at = load32(&buckets(p, b)[bucket]);
    uint64_t newer = UINT64_MAX;
    uint32_t steps = 0;
    while (at != NONE) {
        if (++steps > p->cells || !r_copy(p, b, at, out, 1) || out->h.kind == K_FREE ||
            (out->h.hash & (p->nbuckets - 1)) != bucket || out->h.birth >= newer)
            return -1;
        newer = out->h.birth;
        if (out->h.kind == kind && out->h.hash == h && out->h.nlen == n && (kind != K_SUB || out->h.link == link) &&
            memcmp(out->name, name, n) == 0) {
            *idx = at;
            return 1;
        }
        at = out->h.hnext;
    }
    return 0;
}

/* A reader that met a writer TRIES times running: the writer was preempted
 * mid-entry (a loaded host), and spinning on would not bring it back. It
 * waits for the block's lock (the writer's), so it reads with no writer at
 * work instead of giving up and counting the block as empty. A writer that
 * died holding it (the robust mutex) left its block to the master's reap:
 * its odd counters still read as torn (not counted). Never called with a
 * block's lock held: writers do not read. */
static void r_lock(const struct block *b)
{
    lock(&((struct block *)b)->wlock);
}

static void r_unlock(const struct block *b)
{
    pthread_mutex_unlock(&((struct block *)b)->wlock);
}

/* Look up (kind, link, name) in block b: 1 found (*idx, *out), 0 absent,
 * -1 never a clean walk (only when its writer died mid-entry). */
static int r_find(const struct m0_presence *p, const struct block *b, int kind, uint32_t link, const char *name,
                  size_t n, uint32_t *idx, struct seen *out)
{
    uint32_t h = key_hash(kind, link, name, n);
    for (int attempt = 0; attempt < TRIES; attempt++) {
        int rc = find_once(p, b, kind, link, name, n, h, idx, out);
        if (rc >= 0)
            return rc;
        backoff(attempt);
    }
    r_lock(b);
    int rc = find_once(p, b, kind, link, name, n, h, idx, out);
    r_unlock(b);
    return rc;
}

/* Run fn over each live block of the span, again while its epoch moved
 * under it (a reset: its answer would mix two owners). */
typedef uint64_t (*block_fn)(const struct m0_presence *p, const struct block *b, void *ctx);

static uint64_t each_block(const struct m0_presence *p, struct m0_presence_span span, block_fn fn, void *ctx)
{
    uint64_t sum = 0;
    uint32_t first = span.n == 0 ? 0 : span.first, n = span.n == 0 ? p->nblocks : span.n;
    for (uint32_t i = first; i < first + n && i < p->nblocks; i++) {
        const struct block *b = block_at(p, i);
        for (int attempt = 0; attempt < 8; attempt++) {
            uint32_t e1 = __atomic_load_n(&b->epoch, __ATOMIC_ACQUIRE);
            if (__atomic_load_n(&b->owner, __ATOMIC_ACQUIRE) == 0)
                break;                   /* nobody's: not counted */
            uint64_t v = fn(p, b, ctx);
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (__atomic_load_n(&b->epoch, __ATOMIC_RELAXED) == e1) {
                sum += v;
                break;
            }
        }
    }
    return sum;
}

struct key {
    const char *channel, *sub;
    size_t clen, slen;
};

static uint64_t count_in(const struct m0_presence *p, const struct block *b, void *ctx)
{
    const struct key *k = ctx;
    struct seen s;
    uint32_t c;
    if (r_find(p, b, K_CHAN, NONE, k->channel, k->clen, &c, &s) != 1)
        return 0;
    if (k->sub == NULL)
        return s.h.count;
    if (r_find(p, b, K_SUB, c, k->sub, k->slen, &c, &s) != 1)
        return 0;
    return s.h.count;
}

uint64_t m0_presence_count(const struct m0_presence *p, const char *channel, size_t clen,
                           struct m0_presence_span span)
{
    struct key k = {.channel = channel, .clen = clen};
    return p == NULL ? 0 : each_block(p, span, count_in, &k);
}

/* The most of the blocks' last ids: each_block sums, so this one keeps
 * its maximum in the key. */
struct newest {
    struct key k;
    uint64_t max;
};

static uint64_t last_in(const struct m0_presence *p, const struct block *b, void *ctx)
{
    struct newest *n = ctx;
    struct seen s;
    uint32_t c;
    if (r_find(p, b, K_CHAN, NONE, n->k.channel, n->k.clen, &c, &s) == 1) {
        uint64_t id = __atomic_load_n(&entry_at(p, b, c)->aux, __ATOMIC_ACQUIRE);
        if (id > n->max)
            n->max = id;
    }
    return 0;
}

uint64_t m0_presence_last_id(const struct m0_presence *p, const char *channel, size_t clen,
                             struct m0_presence_span span)
{
    struct newest n = {.k = {.channel = channel, .clen = clen}};
    if (p != NULL)
        each_block(p, span, last_in, &n);
    return n.max;
}

uint64_t m0_presence_sub_count(const struct m0_presence *p, const char *channel, size_t clen, const char *sub,
                               size_t slen, struct m0_presence_span span)
{
    if (p == NULL || sub == NULL || slen == 0 || slen > M0_PRESENCE_SUB_MAX)
        return 0;
    struct key k = {.channel = channel, .clen = clen, .sub = sub, .slen = slen};
    return each_block(p, span, count_in, &k);
}

/* The distinct subs a listing gathered: an open-addressing set of
 * indices into them; their names in one buffer, in the order gathered. */
struct gathered {
    size_t limit, n, cap;
    uint32_t *slots;                     /* 1 + index, 0: empty */
    uint32_t *off;                       /* by index: its offset into names */
    unsigned char *announced;            /* by index: announced (listed even with no connection) */
    char *names;                         /* [len byte][name] ... */
    size_t used;
};

/* The sub's index in the set (added when new and the set is not full),
 * or -1 (full). */
static long gather(struct gathered *g, const char *name, size_t n)
{
    uint32_t h = fnv(2166136261u, name, n);
    for (size_t i = h & (g->cap - 1);; i = (i + 1) & (g->cap - 1)) {
        uint32_t at = g->slots[i];
        if (at == 0) {
            if (g->n == g->limit)
                return -1;
            g->names[g->used] = (char)n;
            memcpy(g->names + g->used + 1, name, n);
            g->off[g->n] = (uint32_t)g->used;
            g->slots[i] = (uint32_t)++g->n;
            g->used += 1 + n;
            return (long)g->n - 1;
        }
        const char *q = g->names + g->off[at - 1];
        if ((unsigned char)q[0] == n && memcmp(q + 1, name, n) == 0)
            return (long)at - 1;
    }
}

/* Phase one and a half: a sub announced on the channel (its join
 * published, its leave not yet) is listed even when held nowhere right now
 * (its leave pending): the list is the state the join/leave events
 * describe. Walked until the set is full: those already in it do not
 * count, so the walk is O(limit) too. */
static int gather_announced(void *ctx, const char *sub, size_t slen)
{
    struct gathered *g = ctx;
    if (slen == 0 || slen > M0_PRESENCE_SUB_MAX)
        return 1;
    long k = gather(g, sub, slen);
    if (k >= 0)
        g->announced[k] = 1;
    return g->n < g->limit;
}

/* A listing: the set gathered so far and the channel it lists. */
struct listing {
    struct gathered g;
    struct key k;
};

/* One walk of the channel's subs in b (entry c, as s holds it) until the
 * set is full: 1 clean, 0 a writer was at it. */
static int subs_once(const struct m0_presence *p, const struct block *b, uint32_t c, struct seen *s,
                     struct gathered *g)
{
    uint32_t at = s->h.link, steps = 0;
    uint64_t newer = UINT64_MAX;
    while (at != NONE && g->n < g->limit) {
        if (++steps > p->cells || !r_copy(p, b, at, s, 1) || s->h.kind != K_SUB || s->h.link != c ||
            s->h.birth >= newer)
            return 0;
        newer = s->h.birth;
        if (s->h.count > 0)
            gather(g, s->name, s->h.nlen);
        at = s->h.next;
    }
    return 1;
}

/* Phase one: walk the channel's subs in b until the set is full (after
 * TRIES torn walks, once more under the block's lock: r_lock). */
static uint64_t walk_subs(const struct m0_presence *p, const struct block *b, void *ctx)
{
    struct listing *l = ctx;
    struct gathered *g = &l->g;
    const struct key *k = &l->k;
    struct seen s;
    uint32_t c;
    for (int attempt = 0; attempt < TRIES && g->n < g->limit; attempt++) {
        if (r_find(p, b, K_CHAN, NONE, k->channel, k->clen, &c, &s) != 1)
            return 0;
        if (subs_once(p, b, c, &s, g))
            return 0;
        backoff(attempt);
    }
    if (g->n < g->limit) {
        r_lock(b);
        if (find_once(p, b, K_CHAN, NONE, k->channel, k->clen, key_hash(K_CHAN, NONE, k->channel, k->clen), &c,
                      &s) == 1)
            subs_once(p, b, c, &s, g);
        r_unlock(b);
    }
    return 0;
}

size_t m0_presence_list(const struct m0_presence *p, const char *channel, size_t clen, size_t limit,
                        struct m0_presence_span span, m0_presence_sub_cb cb, void *ctx)
{
    if (p == NULL || limit == 0)
        return 0;
    struct listing w = {.k = {.channel = channel, .clen = clen}};
    w.g.limit = limit;
    w.g.cap = 16;
    while (w.g.cap < limit * 2)
        w.g.cap <<= 1;
    w.g.slots = calloc(w.g.cap, sizeof *w.g.slots);
    w.g.off = malloc(limit * sizeof *w.g.off);
    w.g.announced = calloc(limit, 1);
    w.g.names = malloc(limit * (M0_PRESENCE_SUB_MAX + 1));
    if (w.g.slots == NULL || w.g.off == NULL || w.g.announced == NULL || w.g.names == NULL) {
        free(w.g.slots);
        free(w.g.off);
        free(w.g.announced);
        free(w.g.names);
        return 0;
    }
    each_block(p, span, walk_subs, &w);
    if (span.n == 0 && w.g.n < limit)   /* the whole host: its announcements too */
        m0_presence_announced_subs((struct m0_presence *)p, channel, clen, gather_announced, &w.g);
    /* Phase two: each listed sub's connections, summed over the blocks:
     * per block the channel is found once, then each sub under it (a
     * block reset meanwhile: that block's counts are taken again). */
    uint64_t *sum = calloc(w.g.n + 1, sizeof *sum), *mine = calloc(w.g.n + 1, sizeof *mine);
    uint32_t first = span.n == 0 ? 0 : span.first, nb = span.n == 0 ? p->nblocks : span.n;
    for (uint32_t i = first; sum != NULL && mine != NULL && i < first + nb && i < p->nblocks; i++) {
        const struct block *b = block_at(p, i);
        for (int attempt = 0; attempt < 8; attempt++) {
            uint32_t e1 = __atomic_load_n(&b->epoch, __ATOMIC_ACQUIRE);
            if (__atomic_load_n(&b->owner, __ATOMIC_ACQUIRE) == 0)
                break;
            struct seen sn;
            uint32_t c, at;
            if (r_find(p, b, K_CHAN, NONE, channel, clen, &c, &sn) != 1)
                break;                   /* nobody there (or never a clean walk) */
            size_t k = 0;
            for (size_t off = 0; off < w.g.used; k++) {
                size_t n = (unsigned char)w.g.names[off];
                mine[k] = r_find(p, b, K_SUB, c, w.g.names + off + 1, n, &at, &sn) == 1 ? sn.h.count : 0;
                off += 1 + n;
            }
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (__atomic_load_n(&b->epoch, __ATOMIC_RELAXED) == e1) {
                for (size_t j = 0; j < k; j++)
                    sum[j] += mine[j];
                break;
            }
        }
    }
    size_t listed = 0, k = 0;
    for (size_t off = 0; sum != NULL && mine != NULL && off < w.g.used; k++) {
        size_t n = (unsigned char)w.g.names[off];
        if (sum[k] > 0 || w.g.announced[k]) {
            cb(ctx, w.g.names + off + 1, n, sum[k]);
            listed++;
        }
        off += 1 + n;
    }
    free(sum);
    free(mine);
    free(w.g.slots);
    free(w.g.off);
    free(w.g.announced);
    free(w.g.names);
    return listed;
}

struct each_ctx {
    m0_presence_key_cb cb;
    void *ctx;
};

static uint64_t each_entry(const struct m0_presence *p, const struct block *b, void *ctx)
{
    const struct each_ctx *ec = ctx;
    uint32_t top = load32(&((struct block *)b)->top);
    struct seen s, c;
    for (uint32_t at = 0; at < top && at < p->cells;) {
        const struct entry *e = entry_at(p, b, at);
        uint32_t k = __atomic_load_n(&e->ncells, __ATOMIC_RELAXED);
        if (k < MIN_CELLS || k > MAX_CELLS)
            break;                       /* torn (a reset under us): the epoch check redoes it */
        if (r_copy(p, b, at, &s, 1) && s.h.count > 0) {
            if (s.h.kind == K_CHAN)
                ec->cb(ec->ctx, s.name, s.h.nlen, NULL, 0);
            else if (s.h.kind == K_SUB && r_copy(p, b, s.h.link, &c, 1) && c.h.kind == K_CHAN)
                ec->cb(ec->ctx, c.name, c.h.nlen, s.name, s.h.nlen);
        }
        at += k;
    }
    return 0;
}

void m0_presence_each(const struct m0_presence *p, struct m0_presence_span span, m0_presence_key_cb cb, void *ctx)
{
    struct each_ctx ec = {.cb = cb, .ctx = ctx};
    if (p != NULL)
        each_block(p, span, each_entry, &ec);
}

