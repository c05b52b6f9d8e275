/*
 * resize.c — SIGTTIN/SIGTTOU, as gunicorn's: the master adds or removes a
 * worker while serving (master_int.h), one more or less, never fewer than
 * one nor more than --max-workers (what the metrics are sized for). Slots
 * change one at a time, at the end of the table, so the listener slot of
 * every other worker stays as it is.
 *
 * Adding: a new SO_REUSEPORT socket joins the port's group, its worker
 * boots, and only once it serves does the kernel hand it connections
 * (listeners.h, m0_listeners_steer). If it cannot load the application,
 * the slot goes again and the server stays at its size.
 *
 * The processes at once are bounded too: every worker needs a block of the
 * metrics' shared mapping (metrics.h), sized for --max-workers; a spawn
 * that finds none waits until the master has reaped a process.
 *
 * Removing: new connections are steered away from the last slot's socket
 * first; its worker keeps accepting what is already queued there, and is
 * told to drain only when the queue is empty (or after REMOVE_MAX_MS if its
 * loop does not accept), then the socket closes. Shared sockets (unix:,
 * systemd) need none of this. With --realtime the broadcast bus has one
 * pair per worker, made before the first fork, so the count is fixed.
 */
#include <signal.h>

#include "m0/listeners.h"
#include "m0/log.h"
#include "m0/metrics.h"
#include "master_int.h"
#include "m0/timer.h"
#include "m0/worker.h"

#define REMOVE_SETTLE_MS 500       /* handshakes begun before the steering complete */
#define REMOVE_MAX_MS 10000

static int per_slot(const struct m0_master *m)
{
    for (int l = 0; l < m->ls.n; l++) {
        if (m->ls.l[l].per_slot)
            return 1;
    }
    return 0;
}

void m0_master_ask_resize(struct m0_master *m, int delta)
{
    const char *sig = delta > 0 ? "SIGTTIN" : "SIGTTOU";
    if (m->cfg->realtime) {
        m0_warn("%s: ignored: with --realtime the number of workers is fixed at start (the broadcast bus "
                "has one socket pair per worker); restart with --workers N", sig);
        return;
    }
    int want = m->want + delta;
    if (want < 1) {
        m0_warn("%s: ignored: already down to 1 worker", sig);
        return;
    }
    if (want > m->cfg->max_workers) {
        m0_warn("%s: ignored: already at %d workers, the most --max-workers allows", sig, m->want);
        return;
    }
    m->want = want;
    m0_info("%s: %s a worker (%d asked for)", sig, delta > 0 ? "adding" : "removing", want);
}

int m0_master_claim_block(struct m0_master *m, int idx)
{
    int blk = m0_metrics_claim(idx);
    if (blk != M0_MX_NO_ROOM) {
        m->mx_waiting = 0;
        return blk;
    }
    /* Every metrics block is a live process's (reloads whose old workers
     * still drain): a worker forked now would go uncounted. */
    if (!m->mx_waiting) {
        int alive = 0;
        for (int i = 0; i < m->cap; i++)
            alive += m->w[i].pid != 0;
        m0_warn("metrics: %d worker processes hold every metrics block: worker %d starts once one of them has "
                "exited", alive, idx);
    }
    m->mx_waiting = 1;
    m->respawn_at[idx] = m0_clock_ms() + 100;
    return M0_MX_NO_ROOM;
}

static int slot_alive(const struct m0_master *m, int idx)
{
    for (int i = 0; i < m->cap; i++) {
        if (m->w[i].pid != 0 && m->w[i].idx == idx)
            return 1;
    }
    return 0;
}

/* From the main loop, when not stopping: the next step of a resize. */
void m0_master_resize(struct m0_master *m, uint64_t now)
{
    int last = m->nworkers - 1;
    if (m->adding) {
        if (m0_master_find(m, last, M0_W_SERVING, 1) == NULL)
            return;
        m->adding = 0;
        if (per_slot(m))
            m0_listeners_steer(&m->ls, m->nworkers);
        m0_info("worker %d added: %d worker(s)", last, m->nworkers);
    }
    if (m->removing) {
        if (!m->remove_draining) {
            uint64_t waited = now - m->remove_since;
            if (waited < REMOVE_SETTLE_MS || (waited < REMOVE_MAX_MS && m0_listeners_pending(&m->ls, last)))
                return;
            m->remove_draining = 1;
            m->respawn_at[last] = 0;
            for (int i = 0; i < m->cap; i++) {
                struct m0_master_worker *w = &m->w[i];
                if (w->pid == 0 || w->idx != last || w->state == M0_W_RETIRING)
                    continue;
                if (w->state == M0_W_SERVING)
                    m0_master_tell(w, M0_CTL_DRAIN);
                else
                    m0_master_close_ctl(w);         /* a successor that never served: nothing to drain */
                w->state = M0_W_RETIRING;
                kill(w->pid, SIGTERM);
            }
        }
        if (slot_alive(m, last))
            return;
        m0_listeners_drop_slot(&m->ls, last);
        m->fails[last] = 0;
        m->respawn_at[last] = 0;
        m->nworkers--;
        m->removing = m->remove_draining = 0;
        m0_info("worker %d removed: %d worker(s)", last, m->nworkers);
    }
    if (m->reloading)
        return;
    if (m->hup_pending) {
        m->hup_pending = 0;
        m0_master_reload(m);
        return;
    }
    if (m->want > m->nworkers) {
        int idx = m->nworkers;
        if (per_slot(m)) {
            /* Before the new socket joins, pin the group's traffic to the
             * slots that serve: the new one gets none until its worker does. */
            if (m0_listeners_steer(&m->ls, m->nworkers) != M0_OK || m0_listeners_add_slot(&m->ls, idx) != M0_OK) {
                m0_error("SIGTTIN: cannot add a worker: staying at %d", m->nworkers);
                m->want = m->nworkers;
                return;
            }
        }
        m->nworkers++;
        m->adding = 1;
        m->fails[idx] = 0;
        m0_master_spawn(m, idx);
    } else if (m->want < m->nworkers) {
        if (per_slot(m) && m0_listeners_steer(&m->ls, m->nworkers - 1) != M0_OK) {
            m0_error("SIGTTOU: cannot remove a worker: staying at %d", m->nworkers);
            m->want = m->nworkers;
            return;
        }
        m->removing = 1;
        m->remove_since = now;
        m0_info("worker %d gets no new connections; it drains once it has accepted the queued ones", last);
    }
}

