/*
 * registry.c — channel → subscriber lists and per-channel journals.
 *
 * Subscribers are slots linked through per-slot arrays (next/prev by slot
 * number), so a held stream costs the registry 24 bytes, not an allocation.
 * A slot subscribed to several channels (a list: names separated by '\n',
 * which no channel name contains) is linked into its first channel as
 * itself and into each other one through an extra node: node ids from
 * nslots up, their links in the same next/prev arrays (grown on demand),
 * chained per slot from xfirst[slot] (allocated with the first list). The
 * delivery filter last[slot] is per slot, so an event reaches a slot once,
 * and in id order, whichever of its channels carried it.
 * Channels are hashed by name (FNV-1a, chained) and kept on an activity
 * list; past a global cap the least recently active channel without
 * subscribers is forgotten, and its newest id raises the floor below which
 * resumes are reported as gaps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/buf.h"
#include "m0/registry.h"

#define NONE 0xffffffffu
#define MAX_CHANNELS 65536

struct jentry {
    struct jentry *next;
    uint64_t id;
    size_t len;
    char data[];
};

struct fanout;

struct chan {
    struct chan *hnext;              /* hash chain */
    struct chan *aprev, *anext;      /* activity list, most recent first */
    char *name;
    size_t len;
    uint32_t nsubs;
    uint32_t first;                  /* first subscriber slot or NONE */
    struct jentry *jhead, *jtail;    /* journal, oldest first */
    unsigned jcount;
    size_t jbytes;
    uint64_t evicted_max;            /* newest id dropped from the journal */
    unsigned pending;                /* queued fan-outs pointing here (not evictable) */
};

/* An event still being delivered: its subscribers are visited in slices of
 * the loop's budget, in publication order. */
struct fanout {
    struct fanout *next;
    struct chan *chan;
    uint32_t cursor;                 /* next subscriber slot to visit, or NONE */
    uint64_t id;
    size_t flen;
    char frame[];
};

/* An extra node: one more channel of a slot's list. */
struct xnode {
    struct chan *chan;               /* NULL: on the free list */
    uint32_t slot;                   /* its slot; on the free list: the next free node */
    uint32_t chain;                  /* the slot's next extra node, or NONE */
};

struct m0_registry {
    uint32_t nslots;
    struct chan **of;                /* slot → channel or NULL */
    uint32_t *next, *prev;           /* subscriber links by node (a slot, or nslots + extra) */
    uint32_t *xfirst;                /* slot → its first extra node, or NONE; NULL until a list */
    struct xnode *x;                 /* extra nodes */
    uint32_t nx, capx, xfree;        /* extra nodes made, room, the free list (NONE: empty) */
    uint64_t *last;                  /* slot → last event id it has */
    struct chan **buckets;
    size_t nbuckets, nchans;
    struct chan *active_head, *active_tail;
    unsigned replay_events;
    size_t replay_bytes;
    uint64_t floor;                  /* resumes below this are not provable */
    uint32_t held;
    size_t budget;                   /* deliveries per fan-out slice; 0: unlimited */
    struct fanout *fhead, *ftail;    /* fan-outs in progress, oldest first */
    size_t nfanouts;
    size_t jtotal, jtotal_cap;       /* journal bytes of all channels, and their cap */
};

static uint64_t hash(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

struct m0_registry *m0_registry_new(uint32_t nslots, unsigned replay_events, size_t replay_bytes,
                                    uint64_t floor)
{
    struct m0_registry *r = m0_xmalloc(sizeof *r);
    memset(r, 0, sizeof *r);
    r->nslots = nslots;
    r->of = calloc(nslots, sizeof *r->of);
    r->next = m0_xmalloc(nslots * sizeof *r->next);
    r->prev = m0_xmalloc(nslots * sizeof *r->prev);
    r->last = calloc(nslots, sizeof *r->last);
    r->nbuckets = 1024;
    r->buckets = calloc(r->nbuckets, sizeof *r->buckets);
    if (r->of == NULL || r->last == NULL || r->buckets == NULL)
        abort();
    r->replay_events = replay_events;
    r->replay_bytes = replay_bytes;
    r->floor = floor;
    r->xfree = NONE;
    return r;
}

/* The slot a list node belongs to. */
static uint32_t owner(const struct m0_registry *r, uint32_t node)
{
    return node < r->nslots ? node : r->x[node - r->nslots].slot;
}

/* A new extra node of slot on chan (its links unset). */
static uint32_t xnode_new(struct m0_registry *r, uint32_t slot, struct chan *c)
{
    uint32_t k;
    if (r->xfree != NONE) {
        k = r->xfree;
        r->xfree = r->x[k].slot;
    } else {
        if (r->nx == r->capx) {
            uint32_t cap = r->capx ? r->capx * 2 : 64;
            r->x = realloc(r->x, cap * sizeof *r->x);
            r->next = realloc(r->next, ((size_t)r->nslots + cap) * sizeof *r->next);
            r->prev = realloc(r->prev, ((size_t)r->nslots + cap) * sizeof *r->prev);
            if (r->x == NULL || r->next == NULL || r->prev == NULL)
                abort();
            r->capx = cap;
        }
        k = r->nx++;
    }
    r->x[k] = (struct xnode){.chan = c, .slot = slot, .chain = NONE};
    return k;
}

static void journal_drop_head(struct m0_registry *r, struct chan *c)
{
    struct jentry *e = c->jhead;
    r->jtotal -= e->len;
    c->jhead = e->next;
    if (c->jhead == NULL)
        c->jtail = NULL;
    c->jcount--;
    c->jbytes -= e->len;
    if (e->id > c->evicted_max)
        c->evicted_max = e->id;
    free(e);
}

static void chan_free(struct m0_registry *r, struct chan *c)
{
    while (c->jhead != NULL)
        journal_drop_head(r, c);
    free(c->name);
    free(c);
}

void m0_registry_free(struct m0_registry *r)
{
    if (r == NULL)
        return;
    while (r->fhead != NULL) {
        struct fanout *f = r->fhead;
        r->fhead = f->next;
        free(f);
    }
    for (size_t i = 0; i < r->nbuckets; i++) {
        struct chan *c = r->buckets[i];
        while (c != NULL) {
            struct chan *n = c->hnext;
            chan_free(r, c);
            c = n;
        }
    }
    free(r->buckets);
    free(r->of);
    free(r->next);
    free(r->prev);
    free(r->last);
    free(r->xfirst);
    free(r->x);
    free(r);
}

static struct chan *find(const struct m0_registry *r, const char *name, size_t len)
{
    struct chan *c = r->buckets[hash(name, len) & (r->nbuckets - 1)];
    while (c != NULL && !(c->len == len && memcmp(c->name, name, len) == 0))
        c = c->hnext;
    return c;
}

static void active_unlink(struct m0_registry *r, struct chan *c)
{
    if (c->aprev)
        c->aprev->anext = c->anext;
    else
        r->active_head = c->anext;
    if (c->anext)
        c->anext->aprev = c->aprev;
    else
        r->active_tail = c->aprev;
    c->aprev = c->anext = NULL;
}

static void touch(struct m0_registry *r, struct chan *c)
{
    if (r->active_head == c)
        return;
    if (c->aprev || c->anext || r->active_tail == c)
        active_unlink(r, c);
    c->anext = r->active_head;
    if (r->active_head)
        r->active_head->aprev = c;
    r->active_head = c;
    if (r->active_tail == NULL)
        r->active_tail = c;
}

static void forget(struct m0_registry *r, struct chan *c)
{
    struct chan **pp = &r->buckets[hash(c->name, c->len) & (r->nbuckets - 1)];
    while (*pp != c)
        pp = &(*pp)->hnext;
    *pp = c->hnext;
    active_unlink(r, c);
    uint64_t newest = c->jtail ? c->jtail->id : 0;
    if (c->evicted_max > newest)
        newest = c->evicted_max;
    if (newest > r->floor)
        r->floor = newest;
    r->nchans--;
    chan_free(r, c);
}

static void grow(struct m0_registry *r)
{
    size_t nb = r->nbuckets * 2;
    struct chan **b = calloc(nb, sizeof *b);
    if (b == NULL)
        abort();
    for (size_t i = 0; i < r->nbuckets; i++) {
        struct chan *c = r->buckets[i];
        while (c != NULL) {
            struct chan *n = c->hnext;
            size_t k = hash(c->name, c->len) & (nb - 1);
            c->hnext = b[k];
            b[k] = c;
            c = n;
        }
    }
    free(r->buckets);
    r->buckets = b;
    r->nbuckets = nb;
}

static struct chan *find_or_add(struct m0_registry *r, const char *name, size_t len)
{
    struct chan *c = find(r, name, len);
    if (c != NULL)
        return c;
    if (r->nchans >= MAX_CHANNELS) {
        /* Forget the least recently active channel nobody holds. */
        struct chan *v = r->active_tail;
        while (v != NULL && (v->nsubs > 0 || v->pending > 0))
            v = v->aprev;
        if (v != NULL)
            forget(r, v);
    }
    if (r->nchans >= r->nbuckets * 2)
        grow(r);
    c = m0_xmalloc(sizeof *c);
    memset(c, 0, sizeof *c);
    c->name = m0_xstrndup(name, len);
    c->len = len;
    c->first = NONE;
    size_t k = hash(name, len) & (r->nbuckets - 1);
    c->hnext = r->buckets[k];
    r->buckets[k] = c;
    r->nchans++;
    return c;
}

/* Over the worker-wide journal cap: drop the oldest entries of the least
 * recently active channels first (never the one just published to, unless
 * it is all there is), forgetting channels left with nothing. Each drop
 * raises that channel's gap floor, so resumes stay honest. */
static void trim_journals(struct m0_registry *r, struct chan *keep)
{
    struct chan *c = r->active_tail;
    while (c != NULL && r->jtotal > r->jtotal_cap) {
        struct chan *prev = c->aprev;
        if (c != keep) {
            while (c->jhead != NULL && r->jtotal > r->jtotal_cap)
                journal_drop_head(r, c);
            if (c->jhead == NULL && c->nsubs == 0 && c->pending == 0)
                forget(r, c);
        }
        c = prev;
    }
    while (keep->jhead != NULL && keep->jhead != keep->jtail && r->jtotal > r->jtotal_cap)
        journal_drop_head(r, keep);
}

static void deliver_gap(uint32_t slot, uint64_t last_id, uint64_t floor, m0_deliver_cb cb, void *ctx)
{
    char gap[160];
    int n = snprintf(gap, sizeof gap,
                     "event: m0-gap\ndata: {\"last_event_id\": %llu, \"replay_from\": %llu}\n\n",
                     (unsigned long long)last_id, (unsigned long long)floor + 1);
    cb(ctx, slot, 0, gap, (size_t)n);
}

/* Deliver to slot the journal entries from the cursors at[0..n) on (each
 * a channel's, or NULL), merged in id order (ids are unique across
 * channels), each once: what the slot's filter (r->last) passed is
 * skipped, and the filter follows what is delivered. */
static void replay_merged(struct m0_registry *r, uint32_t slot, struct jentry **at, size_t n, m0_deliver_cb cb,
                          void *ctx)
{
    for (;;) {
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (at[i] != NULL && (best == n || at[i]->id < at[best]->id))
                best = i;
        if (best == n)
            break;
        struct jentry *e = at[best];
        at[best] = e->next;
        if (e->id <= r->last[slot])
            continue;
        cb(ctx, slot, e->id, e->data, e->len);
        r->last[slot] = e->id;
    }
}

/* Link node into c's subscribers, first. */
static void link_node(struct m0_registry *r, struct chan *c, uint32_t node)
{
    touch(r, c);
    r->prev[node] = NONE;
    r->next[node] = c->first;
    if (c->first != NONE)
        r->prev[c->first] = node;
    c->first = node;
    c->nsubs++;
}

size_t m0_registry_split(const char *list, size_t len, const char **name, size_t *nlen, size_t max)
{
    size_t n = 0;
    const char *p = list, *end = list + len;
    while (p <= end && n < max) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = (size_t)((nl != NULL ? nl : end) - p);
        int dup = l == 0;
        for (size_t i = 0; i < n && !dup; i++)
            dup = nlen[i] == l && memcmp(name[i], p, l) == 0;
        if (!dup) {
            name[n] = p;
            nlen[n++] = l;
        }
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return n;
}

#define LIST_MAX M0_REGISTRY_LIST_MAX

/* Subscribe slot (not subscribed) to every channel of the list channel
 * (len bytes; m0_registry_split), first in each channel's subscribers,
 * its filter left to the caller: the channels in cs, their count returned
 * (0: an empty list, nothing linked). */
static size_t link_list(struct m0_registry *r, uint32_t slot, const char *channel, size_t len, struct chan **cs)
{
    const char *name[LIST_MAX];
    size_t nlen[LIST_MAX];
    size_t n = m0_registry_split(channel, len, name, nlen, LIST_MAX);
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        cs[i] = find_or_add(r, name[i], nlen[i]);
    r->of[slot] = cs[0];
    link_node(r, cs[0], slot);
    if (n > 1 && r->xfirst == NULL) {
        r->xfirst = m0_xmalloc(r->nslots * sizeof *r->xfirst);
        memset(r->xfirst, 0xff, r->nslots * sizeof *r->xfirst);
    }
    if (r->xfirst != NULL)
        r->xfirst[slot] = NONE;
    for (size_t i = n - 1; i >= 1; i--) {
        uint32_t k = xnode_new(r, slot, cs[i]);
        r->x[k].chain = r->xfirst[slot];
        r->xfirst[slot] = k;
        link_node(r, cs[i], r->nslots + k);
    }
    r->held++;
    return n;
}

void m0_registry_subscribe(struct m0_registry *r, uint32_t slot, const char *channel, size_t len,
                           uint64_t last_id, int quiet, m0_deliver_cb cb, void *ctx)
{
    if (slot >= r->nslots || r->of[slot] != NULL)
        return;
    struct chan *cs[LIST_MAX];
    size_t n = link_list(r, slot, channel, len, cs);
    if (n == 0)
        return;
    r->last[slot] = last_id;
    if (last_id == 0 && !quiet)
        return;
    /* Resume: everything after last_id that we still have, and a gap marker
     * when something after it may be gone (in any of the channels). */
    uint64_t proven = r->floor;
    for (size_t i = 0; i < n; i++)
        if (cs[i]->evicted_max > proven)
            proven = cs[i]->evicted_max;
    if (last_id < proven && !quiet)
        deliver_gap(slot, last_id, proven, cb, ctx);
    /* The journals merged in id order (ids are unique across channels). */
    struct jentry *at[LIST_MAX];
    for (size_t i = 0; i < n; i++) {
        at[i] = cs[i]->jhead;
        while (at[i] != NULL && at[i]->id <= last_id)
            at[i] = at[i]->next;
    }
    replay_merged(r, slot, at, n, cb, ctx);
}

size_t m0_registry_history(const struct m0_registry *r, const char *channel, size_t len, uint64_t since, int tail,
                           size_t limit, m0_history_cb cb, void *ctx, int *complete, uint64_t *last_id)
{
    const struct chan *c = find(r, channel, len);
    uint64_t proven = r->floor;
    *last_id = 0;
    if (c != NULL) {
        if (c->evicted_max > proven)
            proven = c->evicted_max;
        *last_id = c->jtail != NULL && c->jtail->id > c->evicted_max ? c->jtail->id : c->evicted_max;
    }
    size_t given = 0, skip = 0;
    const struct jentry *e = c != NULL ? c->jhead : NULL;
    if (tail) {
        size_t taken = 0;
        for (const struct jentry *x = e; x != NULL; x = x->next)
            taken += (size_t)cb(NULL, x->id, x->data, x->len);      /* a count: ctx NULL takes nothing */
        skip = taken > limit ? taken - limit : 0;
        since = 0;
    }
    uint64_t first = 0;
    for (; e != NULL && given < limit; e = e->next) {
        if (e->id <= since)
            continue;
        if (skip > 0) {
            skip -= (size_t)cb(NULL, e->id, e->data, e->len);
            continue;
        }
        if (cb(ctx, e->id, e->data, e->len)) {
            if (given++ == 0)
                first = e->id;
        }
    }
    if (tail)
        *complete = given > 0 ? first > proven : proven == 0;
    else
        *complete = since >= proven;
    return given;
}

int m0_registry_resumable(const struct m0_registry *r, const char *channel, size_t len, uint64_t last_id)
{
    const char *name[LIST_MAX];
    size_t nlen[LIST_MAX];
    size_t n = m0_registry_split(channel, len, name, nlen, LIST_MAX);
    uint64_t proven = r->floor;
    for (size_t i = 0; i < n; i++) {
        const struct chan *c = find(r, name[i], nlen[i]);
        if (c != NULL && c->evicted_max > proven)
            proven = c->evicted_max;
    }
    return last_id >= proven;
}

void m0_registry_raise_floor(struct m0_registry *r, uint64_t id)
{
    if (id > r->floor)
        r->floor = id;
}

/* Unlink node from c's subscribers (a fan-out about to visit it moves on). */
static void unlink_node(struct m0_registry *r, struct chan *c, uint32_t node)
{
    uint32_t p = r->prev[node], n = r->next[node];
    if (c->pending > 0) {
        for (struct fanout *f = r->fhead; f != NULL; f = f->next) {
            if (f->chan == c && f->cursor == node)
                f->cursor = n;
        }
    }
    if (p != NONE)
        r->next[p] = n;
    else
        c->first = n;
    if (n != NONE)
        r->prev[n] = p;
    c->nsubs--;
}

void m0_registry_unsubscribe(struct m0_registry *r, uint32_t slot)
{
    if (slot >= r->nslots || r->of[slot] == NULL)
        return;
    unlink_node(r, r->of[slot], slot);
    if (r->xfirst != NULL) {
        uint32_t k = r->xfirst[slot];
        while (k != NONE) {
            uint32_t next = r->x[k].chain;
            unlink_node(r, r->x[k].chan, r->nslots + k);
            r->x[k].chan = NULL;
            r->x[k].slot = r->xfree;
            r->xfree = k;
            k = next;
        }
        r->xfirst[slot] = NONE;
    }
    r->held--;
    r->of[slot] = NULL;
}

size_t m0_registry_notice_all(struct m0_registry *r, const char *frame, size_t flen, m0_deliver_cb cb,
                              void *ctx)
{
    size_t n = 0;
    for (struct chan *c = r->active_head; c != NULL; c = c->anext) {
        for (uint32_t s = c->first; s != NONE; s = r->next[s]) {
            if (s >= r->nslots)
                continue;             /* a list's other channels: the slot is reached once */
            cb(ctx, s, 0, frame, flen);
            n++;
        }
    }
    return n;
}

int m0_registry_is_subscribed(const struct m0_registry *r, uint32_t slot)
{
    return slot < r->nslots && r->of[slot] != NULL;
}

size_t m0_registry_publish(struct m0_registry *r, const char *channel, size_t len, uint64_t id,
                           const char *frame, size_t flen, m0_deliver_cb cb, void *ctx)
{
    struct chan *c = r->replay_events ? find_or_add(r, channel, len) : find(r, channel, len);
    if (c == NULL)
        return 0;
    touch(r, c);
    if (r->replay_events && flen <= r->replay_bytes) {
        struct jentry *e = m0_xmalloc(sizeof *e + flen);
        e->next = NULL;
        e->id = id;
        e->len = flen;
        memcpy(e->data, frame, flen);
        if (c->jtail)
            c->jtail->next = e;
        else
            c->jhead = e;
        c->jtail = e;
        c->jcount++;
        c->jbytes += flen;
        r->jtotal += flen;
        while (c->jcount > r->replay_events || c->jbytes > r->replay_bytes)
            journal_drop_head(r, c);
        if (r->jtotal_cap != 0 && r->jtotal > r->jtotal_cap)
            trim_journals(r, c);
    } else if (id > c->evicted_max) {
        c->evicted_max = id;       /* not journaled: a resume across it is a gap */
    }
    if (c->first == NONE)
        return 0;
    /* Queue the delivery; it starts now unless earlier ones are unfinished
     * (per-stream order is publication order). */
    struct fanout *f = m0_xmalloc(sizeof *f + flen);
    f->next = NULL;
    f->chan = c;
    f->cursor = c->first;
    f->id = id;
    f->flen = flen;
    memcpy(f->frame, frame, flen);
    c->pending++;
    r->nfanouts++;
    if (r->ftail)
        r->ftail->next = f;
    else
        r->fhead = f;
    r->ftail = f;
    /* Without a budget, deliver now; with one, the loop's next slice does
     * (one budget per loop pass, however many events arrived in it). */
    return r->budget == 0 ? m0_registry_fanout(r, cb, ctx) : 0;
}

size_t m0_registry_fanout(struct m0_registry *r, m0_deliver_cb cb, void *ctx)
{
    size_t delivered = 0, visited = 0;
    while (r->fhead != NULL) {
        struct fanout *f = r->fhead;
        while (f->cursor != NONE) {
            if (r->budget != 0 && visited >= r->budget)
                return delivered;          /* the rest on the next pass */
            uint32_t node = f->cursor;
            f->cursor = r->next[node];
            uint32_t s = owner(r, node);
            visited++;
            if (f->id <= r->last[s])
                continue;                  /* it has this one already (resume filter) */
            r->last[s] = f->id;
            cb(ctx, s, f->id, f->frame, f->flen);
            delivered++;
        }
        r->fhead = f->next;
        if (r->fhead == NULL)
            r->ftail = NULL;
        f->chan->pending--;
        r->nfanouts--;
        free(f);
    }
    return delivered;
}

int m0_registry_fanout_pending(const struct m0_registry *r)
{
    return r->fhead != NULL;
}

size_t m0_registry_fanout_backlog(const struct m0_registry *r)
{
    return r->nfanouts;
}

void m0_registry_set_budget(struct m0_registry *r, size_t budget)
{
    r->budget = budget;
}

void m0_registry_set_journal_cap(struct m0_registry *r, size_t bytes)
{
    r->jtotal_cap = bytes;
}

uint32_t m0_registry_subscribers(const struct m0_registry *r)
{
    return r->held;
}

size_t m0_registry_top(const struct m0_registry *r, struct m0_channel_stat *out, size_t max)
{
    size_t n = 0;
    for (struct chan *c = r->active_head; c != NULL; c = c->anext) {
        if (c->nsubs == 0)
            continue;
        /* Insertion into a small sorted array, busiest first. */
        size_t i = n < max ? n++ : max;
        if (i == max && (max == 0 || out[max - 1].subscribers >= c->nsubs))
            continue;
        if (i == max)
            i = max - 1;
        while (i > 0 && out[i - 1].subscribers < c->nsubs) {
            out[i] = out[i - 1];
            i--;
        }
        out[i] = (struct m0_channel_stat){.name = c->name, .len = c->len, .subscribers = c->nsubs};
    }
    return n;
}

void m0_registry_set_channels(struct m0_registry *r, uint32_t slot, const char *channel, size_t len,
                              uint64_t start, m0_deliver_cb cb, void *ctx)
{
    if (slot >= r->nslots)
        return;
    if (r->of[slot] == NULL) {
        if (len > 0)
            m0_registry_subscribe(r, slot, channel, len, start, 1, cb, ctx);
        return;
    }
    /* The channels it had, to tell the kept ones from the new ones. */
    struct chan *had[LIST_MAX];
    size_t nhad = 0;
    had[nhad++] = r->of[slot];
    for (uint32_t k = r->xfirst != NULL ? r->xfirst[slot] : NONE; k != NONE && nhad < LIST_MAX; k = r->x[k].chain)
        had[nhad++] = r->x[k].chan;
    uint64_t keep = r->last[slot];
    m0_registry_unsubscribe(r, slot);
    struct chan *cs[LIST_MAX];
    size_t n = link_list(r, slot, channel, len, cs);
    if (n == 0)
        return;
    r->last[slot] = keep;
    /* Relinked first in each list, the slot is behind the cursor of an
     * event of a kept channel still being fanned out: what the kept
     * channels' journals hold after its filter is delivered now, in id
     * order (the fan-out then finds it has them). A new channel starts
     * now: its journal is not replayed. */
    struct jentry *at[LIST_MAX];
    for (size_t i = 0; i < n; i++) {
        int kept = 0;
        for (size_t j = 0; j < nhad && !kept; j++)
            kept = had[j] == cs[i];
        at[i] = kept ? cs[i]->jhead : NULL;
        while (at[i] != NULL && at[i]->id <= keep)
            at[i] = at[i]->next;
    }
    replay_merged(r, slot, at, n, cb, ctx);
}
