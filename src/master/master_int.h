/*
 * master_int.h — the master's state, shared by master.c (worker lifecycle),
 * resize.c (SIGTTIN/SIGTTOU) and master_keys.c (key files across a reload). Nothing else includes it: the master's
 * contract is master.h.
 */
#ifndef M0_MASTER_INT_H
#define M0_MASTER_INT_H

#include <stdint.h>
#include <sys/types.h>

#include "m0/bus.h"
#include "m0/config.h"
#include "m0/listeners.h"

enum m0_wstate { M0_W_EMPTY, M0_W_BOOTING, M0_W_BOOTED, M0_W_SERVING, M0_W_RETIRING };

struct m0_master_worker {
    pid_t pid;
    enum m0_wstate state;
    int idx;             /* listener slot */
    unsigned gen;        /* generation (SIGHUP count) */
    int ctl;             /* master's end of the control socket, -1 once closed */
    int served;          /* it said go at least once: a later exit is never a boot failure */
    uint64_t started;    /* ms */
    int replace;         /* a successor boots for its slot; it drains when that one has booted */
    uint64_t replace_after;  /* ms: do not try another replacement before (one failed) */
    int ping_pending;    /* pinged, no answer yet */
    int ping_missed;     /* it missed the last round (logged once) */
    uint32_t conns;      /* open connections, from its last pong */
    const struct m0_grant_keys *keys;   /* the grant keys it verifies with (NULL: none) */
    int sign;            /* the index of keys it signs with, as last told (master_keys.c) */
};

/* A listening socket: TCP sockets we bind are one per worker slot
 * (SO_REUSEPORT); a unix socket and sockets systemd passes are shared. */
struct m0_master {
    const struct m0_config *cfg;
    struct m0_listeners ls;   /* listeners.h */
    int nworkers;
    struct m0_master_worker *w;
    int cap;
    unsigned gen;            /* the generation new workers belong to */
    unsigned dismissed;      /* a reload generation that could not boot (its exits are expected) */
    int reloading;           /* a new generation is booting */
    uint64_t reload_deadline;
    int *fails;              /* consecutive early deaths per slot */
    uint64_t *respawn_at;    /* per slot: when to restart, 0 = not pending */
    int stopping;
    int exit_code;
    int abandoned;           /* a worker left requests unfinished */
    int crashed;             /* a worker died of a signal of its own while stopping */
    uint64_t kill_at;        /* SIGKILL stragglers at this time when stopping */
    int sfd;                 /* signalfd */
    struct m0_bus bus;       /* with --realtime */
    int want_ready;          /* READY=1 is owed once every slot serves the current generation */
    uint64_t next_tick;      /* ms */
    uint64_t tick_ms;
    char status[160];        /* the last STATUS= sent */
    /* SIGTTIN/SIGTTOU: one slot added or removed at a time, at the end. */
    int want;                /* the slot count asked for */
    int adding;              /* the last slot was added; its worker has not served yet */
    int removing;            /* the last slot is being removed */
    int remove_draining;     /* ... and its workers were told to drain */
    uint64_t remove_since;   /* ms: new connections were steered away from it */
    int hup_pending;         /* a reload waits for the resize in progress */
    /* The serving generation's keys while a reload's new ones boot, and the
     * grant key sets live workers of earlier generations verify with (master_keys.c). */
    struct m0_grant_keys *prev_grant_keys;
    struct m0_grant_keys **old_keys;
    int nold_keys;
    unsigned char *prev_grip_key;
    size_t prev_grip_key_len;
    struct m0_tlsd *prev_tls;   /* the serving generation's TLS context while a reload's boots (master_tls.c) */
    int mx_waiting;          /* a spawn waits for a free metrics block (logged once) */
};

/* master.c. find: the live worker of slot idx in state st (of the current
 * generation if current_gen), or NULL. tell: one control byte to w (dropped
 * if its socket is closed or full). close_ctl: close w's control socket.
 * spawn: fork a worker for slot idx (on failure, a retry is scheduled; the
 * worker table may move). reload: SIGHUP's new generation (deferred while a
 * resize is in progress). */
struct m0_master_worker *m0_master_find(struct m0_master *m, int idx, enum m0_wstate st, int current_gen);
void m0_master_tell(struct m0_master_worker *w, char what);
void m0_master_close_ctl(struct m0_master_worker *w);
void m0_master_spawn(struct m0_master *m, int idx);
void m0_master_reload(struct m0_master *m);

#include "master_keys.h"
#include "master_tls.h"

#include "resize.h"

#endif
