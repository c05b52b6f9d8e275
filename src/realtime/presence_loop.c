/*
 * presence_loop.c — a loop's side of occupancy and presence (see
 * presence_loop.h): per slot, the entries its subscription counts on in
 * the loop's block, so that the unsubscribe takes exactly those back.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "m0/buf.h"
#include "m0/config.h"
#include "m0/log.h"
#include "m0/presence.h"
#include "m0/presence_announce.h"
#include "m0/presence_agent.h"
#include "m0/presence_loop.h"
#include "m0/registry.h"
#include "m0/rt.h"
#include "presence_int.h"

#define LIST_MAX M0_REGISTRY_LIST_MAX

/* A slot's counts: its first channel's entries inline, the rest of a
 * list in more ([n, chan, sub, chan, sub, ...]). */
struct pslot {
    uint32_t chan, sub;
    uint32_t *more;
    char *name;                  /* the sub to join with, NUL-terminated; NULL: none */
    uint8_t nlen;
    uint8_t joined;
};

struct m0_presence_loop {
    const struct m0_config *cfg;
    struct m0_presence *p;       /* NULL: nothing is counted */
    int32_t pid;
    uint32_t blk;                /* NONE until the loop reads events */
    uint32_t nslots;
    struct pslot *slots;         /* calloc'd: a slot's page is touched when it holds */
    const char *events;          /* --presence-events */
    int broker;                  /* the agent keeps every count in Redis */
    void *agent;                 /* NULL: nobody listens */
    uint64_t warned;             /* the block's refusals already logged */
};

struct m0_presence_loop *m0_presence_loop_new(const struct m0_config *cfg, uint32_t nslots)
{
    struct m0_presence_loop *pl = m0_xcalloc(sizeof *pl);
    pl->cfg = cfg;
    pl->blk = NONE;
    pl->nslots = nslots;
    pl->events = cfg->presence_events != NULL && cfg->presence_events[0] ? cfg->presence_events : NULL;
    pl->broker = cfg->broker != NULL;
    pl->p = m0_presence_current;
    if (pl->p != NULL) {
        pl->slots = calloc(nslots, sizeof *pl->slots);
        if (pl->slots == NULL)
            pl->p = NULL;
    }
    return pl;
}

void m0_presence_loop_free(struct m0_presence_loop *pl)
{
    if (pl == NULL)
        return;
    for (uint32_t i = 0; pl->slots != NULL && i < pl->nslots; i++) {
        free(pl->slots[i].more);
        free(pl->slots[i].name);
    }
    free(pl->slots);
    free(pl);
}

void m0_presence_loop_start(struct m0_presence_loop *pl, int blk)
{
    if (pl->p == NULL || blk < 0 || (uint32_t)blk >= m0_presence_blocks(pl->p)) {
        if (pl->p != NULL)
            m0_warn("presence: no block for bus endpoint %d (--max-workers): this loop's holds are not counted", blk);
        return;
    }
    pl->pid = (int32_t)getpid();
    pl->blk = (uint32_t)blk;
    m0_presence_claim(pl->p, pl->blk, pl->pid);
    if (pl->broker || pl->events != NULL)
        pl->agent = m0_presence_agent_start(pl->cfg);
}

void m0_presence_loop_sub(struct m0_presence_loop *pl, uint32_t slot, const char *sub, size_t slen)
{
    if (pl->p == NULL || slot >= pl->nslots)
        return;
    struct pslot *ps = &pl->slots[slot];
    if (ps->joined)
        return;
    free(ps->name);
    ps->name = NULL;
    ps->nlen = 0;
    if (sub != NULL && slen > 0 && slen <= M0_PRESENCE_SUB_MAX) {
        ps->name = m0_xstrndup(sub, slen);
        ps->nlen = (uint8_t)slen;
    }
}

/* Tell the agent about one changed entry pair (before a leave removes
 * them: the names are read from the block). */
static void note(struct m0_presence_loop *pl, const struct m0_presence_delta *d, const char *channel, size_t clen,
                 const char *sub, size_t slen)
{
    if (pl->agent == NULL || !d->counted)
        return;
    int ev = d->sub_first && sub != NULL && pl->events != NULL && m0_presence_events_match(pl->events, channel, clen);
    if (pl->broker)
        m0_presence_agent_note(pl->agent, 'c', 0, channel, clen, NULL, 0);
    if (sub != NULL && (pl->broker || ev))
        m0_presence_agent_note(pl->agent, 's', ev, channel, clen, sub, slen);
}

static void check_full(struct m0_presence_loop *pl)
{
    uint32_t entries;
    uint64_t full;
    m0_presence_block_stats(pl->p, pl->blk, &entries, &full);
    if (full > pl->warned) {
        if (pl->warned == 0)
            m0_warn("presence: this loop's table is full (%u entries): connections beyond are not counted "
                    "(raise --max-connections)", entries);
        pl->warned = full;
    }
}

void m0_presence_loop_event(struct m0_presence_loop *pl, const char *channel, size_t clen, uint64_t id)
{
    if (pl->p != NULL && pl->blk != NONE)
        m0_presence_event(pl->p, pl->blk, pl->pid, channel, clen, id);
}

void m0_presence_loop_join(struct m0_presence_loop *pl, uint32_t slot, const char *channel, size_t clen,
                           uint64_t (*last)(void *ctx, const char *name, size_t len), void *ctx)
{
    if (pl->p == NULL || pl->blk == NONE || slot >= pl->nslots || pl->slots[slot].joined)
        return;
    struct pslot *ps = &pl->slots[slot];
    const char *name[LIST_MAX];
    size_t nlen[LIST_MAX];
    size_t n = m0_registry_split(channel, clen, name, nlen, LIST_MAX);
    if (n == 0)
        return;
    ps->joined = 1;
    if (n > 1) {
        ps->more = m0_xmalloc((1 + 2 * (n - 1)) * sizeof *ps->more);
        ps->more[0] = (uint32_t)(n - 1);
    }
    for (size_t i = 0; i < n; i++) {
        struct m0_presence_delta d;
        m0_presence_join(pl->p, pl->blk, pl->pid, name[i], nlen[i], ps->name, ps->nlen, &d);
        if (i == 0) {
            ps->chan = d.chan;
            ps->sub = d.sub;
        } else {
            ps->more[2 * i - 1] = d.chan;
            ps->more[2 * i] = d.sub;
        }
        if (!d.counted || (ps->name != NULL && d.sub == NONE))
            check_full(pl);
        if (d.counted && last != NULL)
            m0_presence_event(pl->p, pl->blk, pl->pid, name[i], nlen[i], last(ctx, name[i], nlen[i]));
        note(pl, &d, name[i], nlen[i], d.sub != NONE ? ps->name : NULL, ps->nlen);
    }
}

/* Take one (chan, sub) pair back, telling the agent with the names the
 * entries had. */
static void leave_pair(struct m0_presence_loop *pl, uint32_t chan, uint32_t sub)
{
    if (chan == NONE || chan >= pl->p->cells)
        return;
    const struct block *b = block_at(pl->p, pl->blk);
    const struct entry *ce = entry_at(pl->p, b, chan);
    char cname[NAME_MAX_], sname[M0_PRESENCE_SUB_MAX];
    size_t cl = ce->nlen <= NAME_MAX_ ? ce->nlen : 0, sl = 0;
    memcpy(cname, entry_name(ce), cl);
    if (sub != NONE && sub < pl->p->cells) {
        const struct entry *se = entry_at(pl->p, b, sub);
        sl = se->nlen <= M0_PRESENCE_SUB_MAX ? se->nlen : 0;
        memcpy(sname, entry_name(se), sl);
    }
    struct m0_presence_delta d;
    m0_presence_leave(pl->p, pl->blk, pl->pid, chan, sub, &d);
    note(pl, &d, cname, cl, sl > 0 ? sname : NULL, sl);
}

void m0_presence_loop_leave(struct m0_presence_loop *pl, uint32_t slot)
{
    if (pl->p == NULL || slot >= pl->nslots)
        return;
    struct pslot *ps = &pl->slots[slot];
    if (ps->joined && pl->blk != NONE) {
        leave_pair(pl, ps->chan, ps->sub);
        for (uint32_t i = 0; ps->more != NULL && i < ps->more[0]; i++)
            leave_pair(pl, ps->more[1 + 2 * i], ps->more[2 + 2 * i]);
    }
    free(ps->more);
    free(ps->name);
    *ps = (struct pslot){0};
}

/* ------------------------------------------------- the engine's watcher */

static void watch_start(void *ctx, int blk)
{
    m0_presence_loop_start(ctx, blk);
}

static void watch_stop(void *ctx)
{
    (void)ctx;
    m0_presence_agent_stop();     /* the worker's part leaves the broker; no more join/leave from it */
}

static void watch_sub(void *ctx, uint32_t slot, const char *sub, size_t slen)
{
    m0_presence_loop_sub(ctx, slot, sub, slen);
}

static void watch_join(void *ctx, uint32_t slot, const char *channel, size_t clen,
                       uint64_t (*last)(void *lctx, const char *name, size_t len), void *lctx)
{
    m0_presence_loop_join(ctx, slot, channel, clen, last, lctx);
}

static void watch_leave(void *ctx, uint32_t slot)
{
    m0_presence_loop_leave(ctx, slot);
}

static void watch_event(void *ctx, const char *channel, size_t clen, uint64_t id)
{
    m0_presence_loop_event(ctx, channel, clen, id);
}

const struct m0_rt_watch_ops m0_presence_loop_watch = {
    .start = watch_start,
    .stop = watch_stop,
    .sub = watch_sub,
    .join = watch_join,
    .leave = watch_leave,
    .event = watch_event,
};
