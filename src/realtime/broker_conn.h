/*
 * broker_conn.h — one of the broker's connections and its life (broker_conn.c,
 * of the broker module, private to it: broker_int.h). Moved from
 * broker_int.h as they were, so that every source has a header of its own.
 */
#ifndef M0_BROKER_CONN_H
#define M0_BROKER_CONN_H

#include "broker_int.h"

/* broker_conn.c */
void m0_bconn_init(struct bconn *bc, struct broker *b, const char *role, int sentinel);

void m0_bconn_tend(struct bconn *bc, uint64_t now);

void m0_bconn_fail(struct bconn *bc, const char *why, int always);

void m0_bconn_out_of_step(struct bconn *bc, const char *cmd);

void m0_bconn_hang_up(struct bconn *bc);

void m0_bconn_move(struct bconn *bc, const char *why);

void m0_bconn_ready(struct bconn *bc);

void m0_bconn_refusal(char *out, size_t cap, const char *cmd, const struct redisReply *r);

void m0_bconn_note_error(struct broker *b, const char *what);

const char *m0_bconn_state_name(int state);

#endif
