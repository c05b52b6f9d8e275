/*
 * grip_hold_link.h — a GRIP stream's recovery through its next link
 * (grip_hold_link.c), for grip_hold.c: private to the GRIP hold's files.
 */
#ifndef M0_GRIP_HOLD_LINK_H
#define M0_GRIP_HOLD_LINK_H

#include "grip_hold_int.h"

/*
 * grip_hold_link.c. m0_griphold_take: the instructions of g (a view's, or
 * its next link's answer) into gh — channels, prev-ids, filters, the
 * id_format and user meta, a stream's keep-alive, the next link resolved
 * against base (bl bytes). m0_griphold_fetch: ask the application for the
 * link (at a tick, never inside a fan-out pass). m0_griphold_complete: a
 * runner's completion for the held connection (the link's answer).
 */
void m0_griphold_take(struct m0_griphold *gh, const struct m0_grip *g, const char *base, size_t bl);
void m0_griphold_fetch(struct m0_server *s, struct m0_conn *c);
void m0_griphold_complete(struct m0_server *s, struct m0_conn *c, const struct m0_completion *done);

#endif
