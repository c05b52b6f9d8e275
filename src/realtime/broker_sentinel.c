/*
 * broker_sentinel.c — where a worker loop's broker connections go (see
 * broker_int.h): the URL's server, or, with redis+sentinel://, the node
 * the sentinels name.
 *
 * One connection per loop talks to a sentinel (the next one after a
 * failure): SENTINEL get-master-addr-by-name, SENTINEL replicas (when the
 * reader reads a replica) and SUBSCRIBE to the primary's events, pipelined
 * — a sentinel runs them in one pass, so no switch can fall between the
 * answer and the subscription. Then:
 *
 *   +switch-master   the primary moved: the connections that must be on it
 *                    move at once (and the sentinel is asked again for the
 *                    new primary's replicas); the reader continues from its
 *                    position in the log, which is replicated;
 *   +sdown, +odown   the sentinels see the primary down: /health says
 *                    degraded until -sdown/-odown or the switch.
 *
 * Who reads what: with --broker-min-replicas 0 the reader and the command
 * connection use the primary. With N >= 1 (the default with Sentinel) they
 * use one of its replicas, checked with ROLE (a replica of the current
 * primary, its link up): a worker then delivers only what reached a
 * replica, which is what a failover keeps — an event the old primary took
 * and lost with it was never delivered, so a keyed retry after the
 * failover appends it once, and no id the new primary issues again was
 * ever seen. (Sentinel promotes the replica with the most data it knows
 * of; docs/broker.md says when that is not enough.)
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "m0/broker_reply.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/rconn.h"
#include "m0/xconn.h"
#include "broker_int.h"

/* Per process, written once by m0_sentinel_prepare before the loop runs:
 * the URL host's address (hiredis resolved names on each connect, which
 * would block the loop). */
static char resolved[64];

void m0_sentinel_prepare(void)
{
    const struct m0_broker_cfg *cfg = m0_broker;
    const char *why;
    if (cfg->is_unix || cfg->sentinel)
        return;             /* sentinels and the nodes they name are addresses (resolve-hostnames off) */
    if (m0_xconn_resolve(cfg->host, resolved, sizeof resolved, &why) != M0_OK)
        m0_warn("broker host %s does not resolve now (%s): it is looked up at each connect", cfg->host, why);
}

int m0_sentinel_ok(const struct broker *b)
{
    return !b->cfg->sentinel || (b->snt.state == M0_BC_UP && !b->primary_down);
}

static int same_node(const struct m0_hostport *a, const struct m0_hostport *b)
{
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

int m0_sentinel_where(struct broker *b, struct bconn *bc, struct m0_hostport *to, const char **path, char *why,
                      size_t cap)
{
    const struct m0_broker_cfg *cfg = b->cfg;
    *path = NULL;
    if (bc->sentinel) {
        *to = cfg->hosts[b->sentinel_at % (unsigned)cfg->nhosts];
        return M0_OK;
    }
    if (!cfg->sentinel) {
        if (cfg->is_unix) {
            *path = cfg->path;
            snprintf(to->host, sizeof to->host, "%s", cfg->path);
            to->port = 0;
        } else {
            snprintf(to->host, sizeof to->host, "%s", resolved[0] ? resolved : cfg->host);
            to->port = cfg->port;
        }
        return M0_OK;
    }
    if (b->primary.port == 0) {
        snprintf(why, cap, "waiting for the sentinels to name the primary of %s", cfg->master);
        return M0_AGAIN;
    }
    if (!b->read_replica) {
        *to = b->primary;
        return M0_OK;
    }
    if (b->nreplicas == 0) {
        snprintf(why, cap, "no replica of the primary %s:%d to read from", b->primary.host, b->primary.port);
        return M0_AGAIN;
    }
    *to = b->replicas[((unsigned)getpid() + bc->pick) % b->nreplicas];
    return M0_OK;
}

void m0_sentinel_failed(struct broker *b, struct bconn *bc)
{
    if (bc->sentinel)
        b->sentinel_at++;
    else
        bc->pick++;
}

#define ASK_MS 500          /* the sentinels are asked again at most this often (while nothing else moves) */

/* Ask the sentinels again (a fresh connection: its answers, then its
 * subscription). */
static void ask_again(struct broker *b)
{
    if (b->cfg->sentinel && b->snt.state != M0_BC_DOWN)
        m0_bconn_move(&b->snt, "asking the sentinels again");
}

/* The same, unless they were asked less than ASK_MS ago. */
static void ask_again_soon(struct broker *b)
{
    if (b->snt.state == M0_BC_UP && m0_loop_now(b->loop) >= b->snt.up_since + ASK_MS)
        ask_again(b);
}

void m0_sentinel_tend(struct broker *b, uint64_t now)
{
    if (!b->read_replica || b->snt.state != M0_BC_UP || !(b->rd.waiting || b->cmd.waiting))
        return;
    /* Right after a failover a sentinel lists the new primary's replicas
     * before it has reached them (flagged disconnected): ask until one
     * is usable. */
    if (now >= b->snt.up_since + ASK_MS)
        ask_again_soon(b);
    else
        m0_loop_wake_at(b->loop, b->snt.up_since + ASK_MS);
}

/* Is bc where it should be now? */
static int placed(const struct broker *b, const struct bconn *bc)
{
    if (!b->read_replica)
        return same_node(&bc->at, &b->primary);
    for (size_t i = 0; i < b->nreplicas; i++)
        if (same_node(&bc->at, &b->replicas[i]))
            return 1;
    return 0;
}

/* Move the data connections that are not where they should be; bring
 * forward those that waited for a place. */
static void relocate(struct broker *b)
{
    struct bconn *each[] = {&b->rd, &b->cmd};
    uint64_t now = m0_loop_now(b->loop);
    for (size_t i = 0; i < M0_ARRAY_LEN(each); i++) {
        struct bconn *bc = each[i];
        if (bc->state == M0_BC_DOWN) {
            if (bc->waiting && bc->retry_at > now) {
                bc->retry_at = now;
                m0_loop_wake_at(b->loop, now);
            }
        } else if (!placed(b, bc)) {
            m0_bconn_move(bc, "the primary moved");
        }
    }
}

/* The sentinels name p as the primary. 1 when that is news. */
static int learn_primary(struct broker *b, const struct m0_hostport *p, const char *how)
{
    if (same_node(p, &b->primary))
        return 0;
    if (b->primary.port != 0)
        m0_warn("broker %s: the sentinels moved the primary from %s:%d to %s:%d (%s): the connections follow, "
                "reading on from id %llu", b->cfg->shown, b->primary.host, b->primary.port, p->host, p->port, how,
                (unsigned long long)__atomic_load_n(&b->position, __ATOMIC_SEQ_CST));
    else
        m0_info("broker %s: the primary is %s:%d", b->cfg->shown, p->host, p->port);
    b->primary = *p;
    b->nreplicas = 0;           /* the old primary's: asked again */
    b->primary_down = 0;
    return 1;
}

static void on_replicas(struct m0_rconn *c, redisReply *r, void *priv)
{
    struct broker *b = priv;
    struct bconn *bc = &b->snt;
    if (r == NULL || b->stopped || bc->rc != c || bc->state != M0_BC_HELLO)
        return;
    enum m0_breply k = m0_breply_classify(r, M0_BCMD_REPLICAS);
    if (k != M0_BREPLY_OK) {
        char why[200];
        if (k == M0_BREPLY_ERROR) {
            m0_bconn_refusal(why, sizeof why, "SENTINEL replicas", r);
            m0_bconn_fail(bc, why, 0);
        } else {
            m0_bconn_out_of_step(bc, "SENTINEL replicas");
        }
        return;
    }
    b->nreplicas = m0_breply_replicas(r, b->replicas, M0_BC_MAX_REPLICAS);
    b->asked = 1;
    m0_bconn_ready(bc);
    relocate(b);
}

static void on_addr(struct m0_rconn *c, redisReply *r, void *priv)
{
    struct broker *b = priv;
    struct bconn *bc = &b->snt;
    if (r == NULL || b->stopped || bc->rc != c || bc->state != M0_BC_HELLO)
        return;
    struct m0_hostport p;
    char why[200];
    int rc = m0_breply_addr(r, &p);
    if (rc == M0_AGAIN) {
        snprintf(why, sizeof why, "the sentinel does not know master %s", b->cfg->master);
        m0_bconn_fail(bc, why, 0);
        return;
    }
    if (rc != M0_OK) {
        if (r->type == REDIS_REPLY_ERROR) {
            m0_bconn_refusal(why, sizeof why, "SENTINEL get-master-addr-by-name", r);
            m0_bconn_fail(bc, why, 0);
        } else {
            m0_bconn_out_of_step(bc, "SENTINEL get-master-addr-by-name");
        }
        return;
    }
    learn_primary(b, &p, "as a sentinel answered");
    if (!b->read_replica) {
        b->asked = 1;
        m0_bconn_ready(bc);
        relocate(b);
    }
}

void m0_sentinel_hello(struct bconn *bc)
{
    struct broker *b = bc->b;
    const char *name = b->cfg->master;
    b->asked = 0;
    m0_rconn_commandf(bc->rc, on_addr, b, "SENTINEL get-master-addr-by-name %s", name);
    if (b->read_replica)
        m0_rconn_commandf(bc->rc, on_replicas, b, "SENTINEL replicas %s", name);
    /* Its first confirmation answers this; the others, and the events,
     * are pushed. */
    m0_rconn_commandf(bc->rc, NULL, NULL, "SUBSCRIBE +switch-master +sdown -sdown +odown -odown");
    m0_rconn_subscribed(bc->rc);
}

void m0_sentinel_push(struct m0_rconn *c, redisReply *r, void *ctx)
{
    struct bconn *bc = ctx;
    struct broker *b = bc->b;
    if (b->stopped || bc->rc != c)
        return;
    const redisReply *ch = NULL, *payload = NULL;
    switch (m0_breply_push(r, &ch, &payload)) {
    case M0_PUSH_BAD:
        m0_bconn_out_of_step(bc, "SUBSCRIBE");
        return;
    case M0_PUSH_CONFIRM:
        return;
    case M0_PUSH_MESSAGE:
        break;
    }
    struct m0_hostport at;
    switch (m0_sentinel_event(ch->str, ch->len, payload->str, payload->len, b->cfg->master, &at)) {
    case M0_SEV_SWITCH:
        if (learn_primary(b, &at, "+switch-master")) {
            b->switches++;
            if (b->read_replica)
                ask_again(b);   /* the new primary's replicas; the connections move once they are known */
            else
                relocate(b);
        }
        break;
    case M0_SEV_DOWN:
        if (same_node(&at, &b->primary) && !b->primary_down) {
            char why[320];
            snprintf(why, sizeof why, "the sentinels report the primary %s:%d down", at.host, at.port);
            m0_warn("broker %s: %s: publishes fail until they fail it over", b->cfg->shown, why);
            m0_bconn_note_error(b, why);
            b->primary_down = 1;
        }
        break;
    case M0_SEV_UP:
        if (same_node(&at, &b->primary) && b->primary_down) {
            m0_info("broker %s: the sentinels see the primary %s:%d again", b->cfg->shown, at.host, at.port);
            b->primary_down = 0;
            if (b->rd.state == M0_BC_UP && b->cmd.state == M0_BC_UP)
                b->last_error[0] = '\0';
        }
        break;
    case M0_SEV_NONE:
        break;
    }
}

int m0_sentinel_check_role(struct broker *b, struct bconn *bc, const redisReply *r, char *why, size_t cap)
{
    struct m0_role role;
    m0_breply_role(r, &role);          /* the shape was checked */
    const struct m0_hostport *at = &bc->at;
    if (!b->read_replica) {
        if (role.kind == M0_ROLE_PRIMARY)
            return M0_OK;
        snprintf(why, cap, "%s:%d is not the primary now (a failover?)", at->host, at->port);
    } else if (role.kind != M0_ROLE_REPLICA || !same_node(&role.primary, &b->primary)) {
        snprintf(why, cap, "%s:%d is not a replica of the primary %s:%d now", at->host, at->port, b->primary.host,
                 b->primary.port);
    } else if (!role.linked) {
        snprintf(why, cap, "%s:%d is not linked to the primary yet", at->host, at->port);
    } else {
        return M0_OK;
    }
    ask_again_soon(b);
    return M0_ERR;
}
