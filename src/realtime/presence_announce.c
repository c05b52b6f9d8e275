/*
 * presence_announce.c — the announcements' block of the shared occupancy
 * table (presence.h): which subs have had a join published on a channel
 * with --presence-events, and their pending leaves. Shared by every
 * worker's agent (presence_agent.c) under the block's lock; a loop never
 * touches it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "m0/buf.h"
#include "m0/presence.h"
#include "m0/presence_announce.h"
#include "presence_int.h"

/* -------------------------------------------------------- announcements */

int m0_presence_events_match(const char *prefixes, const char *channel, size_t clen)
{
    if (prefixes == NULL)
        return 0;
    for (const char *p = prefixes;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
        while (n > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if ((n == 1 && *p == '*') || (n > 0 && n <= clen && memcmp(channel, p, n) == 0))
            return 1;
        if (comma == NULL)
            return 0;
        p = comma + 1;
    }
}

static struct block *ann(struct m0_presence *p)
{
    return block_at(p, p->nblocks);
}

void m0_presence_announce_lock(struct m0_presence *p)
{
    struct block *b = ann(p);
    if (pthread_mutex_lock(&b->wlock) == EOWNERDEAD) {
        /* An agent died mid-change: what it left cannot be trusted. The
         * subs present now are announced again by the next reconcile. */
        pthread_mutex_consistent(&b->wlock);
        m0_presence_reset_block(p, b);
    }
}

void m0_presence_announce_unlock(struct m0_presence *p)
{
    pthread_mutex_unlock(&ann(p)->wlock);
}

uint32_t m0_presence_announced(struct m0_presence *p, const char *channel, size_t clen, const char *sub, size_t slen)
{
    struct block *b = ann(p);
    uint32_t c = m0_presence_find(p, b, M0_PRESENCE_K_CHAN, NONE, channel, clen);
    return c == NONE ? NONE : m0_presence_find(p, b, M0_PRESENCE_K_SUB, c, sub, slen);
}

uint32_t m0_presence_announce(struct m0_presence *p, const char *channel, size_t clen, const char *sub, size_t slen)
{
    struct block *b = ann(p);
    if (clen == 0 || clen > NAME_MAX_ || slen == 0 || slen > M0_PRESENCE_SUB_MAX)
        return NONE;
    uint32_t c = m0_presence_find(p, b, M0_PRESENCE_K_CHAN, NONE, channel, clen);
    if (c == NONE && (c = m0_presence_add(p, b, M0_PRESENCE_K_CHAN, NONE, channel, clen, 0)) == NONE)
        return NONE;
    uint32_t s = m0_presence_find(p, b, M0_PRESENCE_K_SUB, c, sub, slen);
    if (s != NONE)
        return s;
    s = m0_presence_add(p, b, M0_PRESENCE_K_SUB, c, sub, slen, 1);       /* listed: presence() walks them */
    struct entry *ce = entry_at(p, b, c);
    if (s == NONE) {
        if (ce->count == 0)
            m0_presence_remove(p, b, c, 0);
        return NONE;
    }
    m0_presence_set_count(ce, ce->count + 1);
    m0_presence_set_count(entry_at(p, b, s), 1);
    return s;
}

void m0_presence_set_due(struct m0_presence *p, uint32_t e, uint64_t due)
{
    struct block *b = ann(p);
    struct entry *x = entry_at(p, b, e);
    if ((x->aux != 0) == (due != 0)) {
        x->aux = due;
        return;
    }
    if (due != 0) {                      /* onto the pending list */
        x->pend.prev = NONE;
        x->pend.next = b->pending;
        if (b->pending != NONE)
            entry_at(p, b, b->pending)->pend.prev = e;
        b->pending = e;
    } else {
        if (x->pend.prev != NONE)
            entry_at(p, b, x->pend.prev)->pend.next = x->pend.next;
        else
            b->pending = x->pend.next;
        if (x->pend.next != NONE)
            entry_at(p, b, x->pend.next)->pend.prev = x->pend.prev;
    }
    x->aux = due;
}

uint64_t m0_presence_due(struct m0_presence *p, uint32_t e)
{
    return entry_at(p, ann(p), e)->aux;
}

void m0_presence_unannounce(struct m0_presence *p, uint32_t e)
{
    struct block *b = ann(p);
    struct entry *x = entry_at(p, b, e);
    if (x->kind != M0_PRESENCE_K_SUB)
        return;
    m0_presence_set_due(p, e, 0);
    uint32_t c = x->link;
    m0_presence_remove(p, b, e, 1);
    struct entry *ce = entry_at(p, b, c);
    m0_presence_set_count(ce, ce->count - 1);
    if (ce->count == 0)
        m0_presence_remove(p, b, c, 0);
}

void m0_presence_announced_each(struct m0_presence *p, int pending_only, uint64_t now, m0_presence_ann_cb cb,
                                void *ctx)
{
    struct block *b = ann(p);
    /* Collected first: the callback may remove the entry (and its channel). */
    size_t n = 0, cap = 64;
    uint32_t *list = m0_xmalloc(cap * sizeof *list);
    if (pending_only) {
        for (uint32_t at = b->pending; at != NONE; at = entry_at(p, b, at)->pend.next) {
            if (now != 0 && entry_at(p, b, at)->aux > now)
                continue;
            if (n == cap)
                list = m0_xrealloc(list, (cap *= 2) * sizeof *list);
            list[n++] = at;
        }
    } else {
        for (uint32_t i = 0; i < p->nbuckets; i++) {
            for (uint32_t at = buckets(p, b)[i]; at != NONE; at = entry_at(p, b, at)->hnext) {
                if (entry_at(p, b, at)->kind != M0_PRESENCE_K_SUB)
                    continue;
                if (n == cap)
                    list = m0_xrealloc(list, (cap *= 2) * sizeof *list);
                list[n++] = at;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        const struct entry *x = entry_at(p, b, list[i]);
        if (x->kind != M0_PRESENCE_K_SUB)
            continue;
        const struct entry *c = entry_at(p, b, x->link);
        cb(ctx, list[i], entry_name(c), c->nlen, entry_name(x), x->nlen);
    }
    free(list);
}

void m0_presence_announced_subs(struct m0_presence *p, const char *channel, size_t clen, m0_presence_name_cb cb,
                                void *ctx)
{
    if (p == NULL || clen == 0 || clen > NAME_MAX_)
        return;
    struct block *b = ann(p);
    m0_presence_announce_lock(p);
    uint32_t c = m0_presence_find(p, b, M0_PRESENCE_K_CHAN, NONE, channel, clen);
    for (uint32_t at = c != NONE ? entry_at(p, b, c)->link : NONE; at != NONE; at = entry_at(p, b, at)->next) {
        const struct entry *x = entry_at(p, b, at);
        if (!cb(ctx, entry_name(x), x->nlen))
            break;
    }
    m0_presence_announce_unlock(p);
}
