/*
 * master_keys.h — the master's keys re-read on SIGHUP (master_keys.c, of
 * the master module, private to it: master_int.h).
 */
#ifndef M0_MASTER_KEYS_H
#define M0_MASTER_KEYS_H

#include "master_int.h"

/* master_keys.c. keys_reread: SIGHUP re-reads --grant-key-file and
 * --grip-key-file for the new generation (a bad file: one warning, the key
 * in use stays); the serving generation's keys are kept until keys_commit
 * (the new generation serves) or put back by keys_restore (it could not
 * boot), so a worker replacing a serving one gets its siblings' keys.
 * keys_fork: just before a worker is forked, the key it signs grants with
 * at first (cfg->grant_sign): its newest key that every live worker
 * verifies. keys_settle: after a worker was forked or reaped, each live
 * worker whose signing key that rule now moves is told ('K'), and the key
 * sets no live worker holds are freed. */
void m0_master_keys_reread(struct m0_master *m);
void m0_master_keys_commit(struct m0_master *m);
void m0_master_keys_restore(struct m0_master *m);
void m0_master_keys_fork(struct m0_master *m);
void m0_master_keys_settle(struct m0_master *m);

#endif
