/*
 * handoff.h — --threads: the connections of a listening socket the loops
 * share (a unix path, systemd's sockets), spread over the loops in turn.
 *
 * A shared socket wakes one waiting loop per connection (EPOLLEXCLUSIVE),
 * and the kernel wakes the first loop that waits: an idle first loop would
 * take nearly every connection of a light load, and its pool all the
 * work. So the loop that accepts passes every n-th connection on: the
 * descriptor and the peer's address go over the receiving loop's inbox (a
 * SOCK_SEQPACKET pair, SCM_RIGHTS; unix(7)), and that loop serves it as if
 * it had accepted it (m0_conn_take). TCP --bind needs none of this: each
 * loop has a SO_REUSEPORT socket of its own (listeners.c).
 */
#ifndef M0_HANDOFF_H
#define M0_HANDOFF_H

#include "m0/types.h"

struct m0_ext;
struct m0_server;

/* Open s's inbox and register it with its loop — the hand-off's extension
 * (server.h: its state the inbox; s->accept.hand_off set); s->loops set.
 * Before the loop serves. M0_OK, or M0_ERR (logged). When the loop ends
 * the extension closes the inbox (connections still in it are closed:
 * their clients see a reset, as a listener's queue at exit). */
int m0_handoff_open(struct m0_server *s);
extern const struct m0_ext m0_handoff_ext;

/* s->accept.hand_off: pass the accepted fd (from s's shared listener lidx, peer
 * address addr of addr_len bytes) to the loop whose turn it is (a loop
 * busy for 50 ms without waiting for events — a view inline on it — or
 * draining is passed over). M0_OK: sent, fd closed here; M0_AGAIN: it is
 * this loop's turn, or the other loop's inbox is full: the caller serves
 * it. Loop thread. */
int m0_handoff_send(struct m0_server *s, int fd, int lidx, const void *addr, unsigned addr_len);

/* In a child forked by the application (fork.h, serve.c's hook): close
 * s's inbox descriptors. */
void m0_handoff_in_child(struct m0_server *s);

#endif
