/*
 * nofile.h — the descriptor limit a server needs: raised to the hard limit
 * at start (nginx's worker_rlimit_nofile, without the knob), and said once
 * when even that is short of --max-connections.
 */
#ifndef M0_NOFILE_H
#define M0_NOFILE_H

#include "m0/types.h"

/* Descriptors a worker uses besides its connections (listeners, epoll, the
 * bus, the pool's and executors' pipes, the spare for EMFILE, what the
 * application opens): what the check adds to --max-connections. */
#define M0_NOFILE_RESERVE 512

/* Raise the soft RLIMIT_NOFILE to the hard limit (capped by
 * /proc/sys/fs/nr_open when the hard limit is unlimited); the workers
 * inherit it. When the result is below max_connections + M0_NOFILE_RESERVE,
 * one warning line names both figures (connections beyond the limit are
 * refused, m0serve_connections_refused_total{reason="descriptors"}). Returns the
 * soft limit now in force, or -1 when it cannot be read. */
long m0_nofile_raise(long max_connections);

#endif
