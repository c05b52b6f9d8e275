/*
 * resize.h — SIGTTIN/SIGTTOU and --max-workers (resize.c, of the master
 * module, private to it: master_int.h).
 */
#ifndef M0_RESIZE_H
#define M0_RESIZE_H

#include "master_int.h"

void m0_master_resize(struct m0_master *m, uint64_t now);

void m0_master_ask_resize(struct m0_master *m, int delta);

/* resize.c. claim_block: before a fork for slot idx, its metrics block
 * (m0_metrics_claim; -1 without metrics), or M0_MX_NO_ROOM when every block
 * is a live process's: the spawn is then retried shortly (respawn_at),
 * logged once per wait. ask_resize: SIGTTIN (+1) or SIGTTOU (-1), logged;
 * refused under --realtime, below 1 or above --max-workers. resize: from the main loop
 * while not stopping, the next step towards the count asked for. */
int m0_master_claim_block(struct m0_master *m, int idx);

#endif
