/*
 * broker_conn.c — one connection of a worker's loop to the broker (see
 * broker_int.h): where it goes (broker_sentinel.c decides), its dial, its
 * handshake and its backoff.
 *
 * A connection is up once Redis answered its handshake (AUTH and SELECT
 * when configured, then PING — or, with Sentinel, ROLE, which must say the
 * node is what the connection needs): a socket that accepts and then
 * refuses (a wrong password, maxclients) is a failed attempt like a refused
 * connect. A connection to a sentinel is up once it answered its queries.
 *
 * Faults: a connection that fails or drops is retried with a backoff (100
 * ms doubling to 5 s) by the broker's before-sleep hook; the backoff starts
 * over only after a connection stayed up for STABLE_MS, so one that is
 * accepted and then dropped backs off too. An outage is logged once per
 * connection (and its end). A reply that does not fit the command it
 * answers, or that answers none (the reader's guard, broker_reply.h), is a
 * protocol error: logged each time, the connection dropped and redialled
 * with the backoff. A connection moved to a new primary (a failover) is
 * redialled at once. Nothing here blocks: connects are non-blocking, with
 * a deadline.
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

#define STABLE_MS (2 * M0_BC_BACKOFF_MAX_MS) /* up this long: the next outage's backoff starts over */
#define QUICK_MS 250                /* the wrong node (ROLE): the next candidate after this long */

static const char *const state_names[] = {"down", "connecting", "connecting", "up"};

const char *m0_bconn_state_name(int state)
{
    return state_names[state];
}

void m0_bconn_init(struct bconn *bc, struct broker *b, const char *role, int sentinel)
{
    memset(bc, 0, sizeof *bc);
    bc->b = b;
    bc->role = role;
    bc->sentinel = sentinel;
}

/* The error /health shows: printable ASCII only (a broker's reply text is
 * whatever the peer sent). */
void m0_bconn_note_error(struct broker *b, const char *what)
{
    size_t n = 0;
    for (; *what && n + 1 < sizeof b->last_error; what++)
        b->last_error[n++] = *what >= 0x20 && *what < 0x7f ? *what : '?';
    b->last_error[n] = '\0';
}

/* " at HOST:PORT" for the log when the place varies (Sentinel). */
static void where(const struct bconn *bc, char *out, size_t cap)
{
    out[0] = '\0';
    if (bc->b->cfg->sentinel && bc->at.port != 0)
        snprintf(out, cap, strchr(bc->at.host, ':') ? " at [%s]:%d" : " at %s:%d", bc->at.host, bc->at.port);
}

/* The attempt failed or the connection went (state becomes DOWN): the next
 * attempt waits 100 ms doubling to 5 s per attempt since the last
 * connection that stayed up STABLE_MS. why (NULL: already noted) becomes
 * last_error; the outage is logged once, when it begins. */
static void schedule_retry(struct bconn *bc, const char *why)
{
    struct broker *b = bc->b;
    uint64_t now = m0_loop_now(b->loop);
    if (bc->state == M0_BC_UP && now - bc->up_since >= STABLE_MS)
        bc->failures = 0;
    bc->state = M0_BC_DOWN;
    bc->up_since = 0;
    unsigned shift = bc->failures < 6 ? bc->failures : 6;
    uint64_t delay = (uint64_t)M0_BC_BACKOFF_MIN_MS << shift;
    if (delay > M0_BC_BACKOFF_MAX_MS)
        delay = M0_BC_BACKOFF_MAX_MS;
    bc->failures++;
    bc->retry_at = now + delay;
    if (why != NULL)
        m0_bconn_note_error(b, why);
    char at[300];
    where(bc, at, sizeof at);
    m0_debug("broker %s: %s%s: %s; next attempt in %llu ms", b->cfg->shown, bc->role, at, b->last_error,
             (unsigned long long)delay);
    if (!bc->logged_down && !b->stopped) {
        bc->logged_down = 1;
        m0_warn("broker %s unreachable (%s%s: %s): retrying with backoff up to %d s; held streams stay open",
                b->cfg->shown, bc->role, at, why ? why : b->last_error, M0_BC_BACKOFF_MAX_MS / 1000);
    }
    if (!bc->sentinel)
        m0_sentinel_failed(b, bc);
}

/* Close now (pending callbacks run with a NULL reply; inside a callback of
 * this connection, it closes once the callback returns). */
void m0_bconn_hang_up(struct bconn *bc)
{
    struct m0_rconn *rc = bc->rc;
    bc->rc = NULL;
    if (rc != NULL)
        m0_rconn_close(rc);
}

/* Drop this connection for why (last_error) and redial with the backoff.
 * Logged as an error once per outage, or every time when always (a
 * protocol error: each one is news). */
void m0_bconn_fail(struct bconn *bc, const char *why, int always)
{
    struct broker *b = bc->b;
    m0_bconn_note_error(b, why);
    if ((always || !bc->logged_down) && !b->stopped) {
        char at[300];
        where(bc, at, sizeof at);
        m0_error("broker %s: %s connection%s: %s: dropped, retrying with backoff up to %d s; held streams stay open",
                 b->cfg->shown, bc->role, at, why, M0_BC_BACKOFF_MAX_MS / 1000);
    }
    bc->logged_down = 1;
    if (bc->state != M0_BC_DOWN)
        schedule_retry(bc, NULL);
    m0_bconn_hang_up(bc);
}

/* A reply that does not fit its command: the connection is out of step. */
void m0_bconn_out_of_step(struct bconn *bc, const char *cmd)
{
    char why[120];
    snprintf(why, sizeof why, "protocol error: an unexpected reply to %s", cmd);
    m0_bconn_fail(bc, why, 1);
}

/* Reconnect now, elsewhere (the primary moved): not an outage to back off
 * from, though /health shows the connection down until it is up again. */
void m0_bconn_move(struct bconn *bc, const char *why)
{
    struct broker *b = bc->b;
    if (b->stopped)
        return;
    m0_bconn_hang_up(bc);
    if (bc->state == M0_BC_UP)
        m0_debug("broker %s: %s connection: %s", b->cfg->shown, bc->role, why);
    bc->state = M0_BC_DOWN;
    bc->up_since = 0;
    bc->retry_at = m0_loop_now(b->loop);
    m0_loop_wake_at(b->loop, bc->retry_at);
}

static void on_connected(struct m0_rconn *c, void *ctx);
static void on_closed(struct m0_rconn *c, void *ctx, const char *why);

static const struct m0_rconn_ops data_ops = {.connected = on_connected, .closed = on_closed};
static const struct m0_rconn_ops sentinel_ops = {.connected = on_connected, .closed = on_closed,
                                                 .push = m0_sentinel_push};

static void dial(struct bconn *bc)
{
    struct broker *b = bc->b;
    char why[200];
    const char *path = NULL;
    struct m0_hostport to;
    if (m0_sentinel_where(b, bc, &to, &path, why, sizeof why) != M0_OK) {
        /* Nowhere to go yet: look again soon (the sentinel connection
         * brings it forward when it learns something). */
        if (!bc->waiting)
            m0_debug("broker %s: %s: %s", b->cfg->shown, bc->role, why);
        bc->waiting = 1;
        bc->retry_at = m0_loop_now(b->loop) + M0_BC_BACKOFF_MIN_MS;
        if (b->snt.state == M0_BC_UP)
            m0_bconn_note_error(b, why);   /* else the sentinel connection's own error says more */
        return;
    }
    bc->waiting = 0;
    bc->at = to;
    /* The TLS name: the URL's host (connected to at its address looked up
     * before the loop ran), or the node's address as the sentinels gave it. */
    const char *name = !b->cfg->sentinel ? b->cfg->host : to.host;
    struct m0_xconn_target t = {.host = to.host, .port = to.port, .path = path, .name = name};
    struct m0_rconn *rc = m0_rconn_open(b->loop, &t, b->cfg->tls ? m0_broker_redis_tls : NULL,
                                        bc->sentinel ? &sentinel_ops : &data_ops, bc, why, sizeof why);
    if (rc == NULL) {
        schedule_retry(bc, why);
        return;
    }
    bc->rc = rc;
    bc->state = M0_BC_CONNECTING;
    bc->deadline = m0_loop_now(b->loop) + M0_BC_CONNECT_MS;
}

/* A refusal's text, for the log and last_error: credentials get their name. */
void m0_bconn_refusal(char *out, size_t cap, const char *cmd, const redisReply *r)
{
    if (m0_breply_auth_failed(r->str, r->len))
        snprintf(out, cap, "authentication failed (%s: %.100s)", cmd, r->str);
    else
        snprintf(out, cap, "refused %s: %.100s", cmd, r->str);
}

static void on_hello(struct m0_rconn *c, redisReply *r, void *priv)
{
    struct bconn *bc = m0_rconn_ctx(c);
    const char *cmd = priv;
    if (r == NULL || bc->b->stopped || bc->state != M0_BC_HELLO || bc->rc != c)
        return;
    int ping = strcmp(cmd, "PING") == 0, role = strcmp(cmd, "ROLE") == 0;
    enum m0_breply k = m0_breply_classify(r, ping ? M0_BCMD_PING : role ? M0_BCMD_ROLE : M0_BCMD_STATUS);
    char why[200];
    if (k == M0_BREPLY_ERROR) {
        m0_bconn_refusal(why, sizeof why, cmd, r);
        m0_bconn_fail(bc, why, 0);
    } else if (k == M0_BREPLY_UNEXPECTED) {
        m0_bconn_out_of_step(bc, cmd);
    } else if (ping) {
        m0_bconn_ready(bc);
    } else if (role) {
        if (m0_sentinel_check_role(bc->b, bc, r, why, sizeof why) == M0_OK) {
            m0_bconn_ready(bc);
        } else {
            /* A node that is not (yet) what it should be: the topology is
             * moving (a failover, a replica catching up). The next
             * candidate is tried soon, not after the whole backoff. */
            m0_bconn_fail(bc, why, 0);
            uint64_t soon = m0_loop_now(bc->b->loop) + QUICK_MS;
            if (bc->retry_at > soon)
                bc->retry_at = soon;
        }
    }
}

static void on_connected(struct m0_rconn *c, void *ctx)
{
    struct bconn *bc = ctx;
    const struct m0_broker_cfg *cfg = bc->b->cfg;
    (void)c;
    bc->state = M0_BC_HELLO;
    if (bc->sentinel) {
        m0_sentinel_hello(bc);
        return;
    }
    /* Pipelined, answered in order: the last reply says the rest passed. */
    if (cfg->password[0] && cfg->username[0])
        m0_rconn_commandf(bc->rc, on_hello, (void *)"AUTH", "AUTH %s %s", cfg->username, cfg->password);
    else if (cfg->password[0])
        m0_rconn_commandf(bc->rc, on_hello, (void *)"AUTH", "AUTH %s", cfg->password);
    if (cfg->db != 0)
        m0_rconn_commandf(bc->rc, on_hello, (void *)"SELECT", "SELECT %d", cfg->db);
    if (cfg->sentinel)
        m0_rconn_commandf(bc->rc, on_hello, (void *)"ROLE", "ROLE");
    else
        m0_rconn_commandf(bc->rc, on_hello, (void *)"PING", "PING");
}

static void on_closed(struct m0_rconn *c, void *ctx, const char *why)
{
    struct bconn *bc = ctx;
    struct broker *b = bc->b;
    (void)c;
    bc->rc = NULL;
    if (bc == &b->rd)
        b->reading = 0;
    else if (bc == &b->cmd)
        b->probing = 0;
    if (b->stopped) {
        bc->state = M0_BC_DOWN;
        return;
    }
    if (strncmp(why, "protocol error", 14) == 0) {
        /* The reader refused a reply nobody asked for (hiredis would abort). */
        m0_bconn_fail(bc, why, 1);
        return;
    }
    if (bc->state != M0_BC_DOWN)
        schedule_retry(bc, why);
}

/* The handshake was answered: the connection serves. */
void m0_bconn_ready(struct bconn *bc)
{
    struct broker *b = bc->b;
    bc->state = M0_BC_UP;
    bc->up_since = m0_loop_now(b->loop);
    if (bc->failures > 0)
        b->reconnects += bc == &b->rd;
    char at[300];
    where(bc, at, sizeof at);
    if (bc->logged_down)
        m0_info("broker %s: %s connection restored%s", b->cfg->shown, bc->role, at);
    else
        m0_debug("broker %s: %s connected%s", b->cfg->shown, bc->role, at);
    bc->logged_down = 0;
    if (b->rd.state == M0_BC_UP && b->cmd.state == M0_BC_UP && m0_sentinel_ok(b))
        b->last_error[0] = '\0';       /* /health: the error was the outage's */
    if (!bc->sentinel)
        m0_broker_conn_up(bc);
}

void m0_bconn_tend(struct bconn *bc, uint64_t now)
{
    struct broker *b = bc->b;
    if (bc->state == M0_BC_DOWN && now >= bc->retry_at)
        dial(bc);
    if ((bc->state == M0_BC_CONNECTING || bc->state == M0_BC_HELLO) && now >= bc->deadline)
        m0_bconn_fail(bc, bc->state == M0_BC_CONNECTING ? "connect timed out" : "no answer to the handshake in time", 0);
    if (bc->state == M0_BC_DOWN)
        m0_loop_wake_at(b->loop, bc->retry_at);
    else if (bc->state == M0_BC_CONNECTING || bc->state == M0_BC_HELLO)
        m0_loop_wake_at(b->loop, bc->deadline);
}
