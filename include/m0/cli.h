/*
 * cli.h — the command line and the environment into a struct m0_config
 * (cli.c): defaults, parsing, the machine-dependent defaults, usage.
 */
#ifndef M0_CLI_H
#define M0_CLI_H

#include <stddef.h>

struct m0_config;

/* Fill defaults. */
void m0_config_defaults(struct m0_config *cfg);

/* Parse environment then argv. Returns M0_OK, or M0_ERR with a one-line
 * message in err (cap bytes) naming the flag.
 *
 * Mounts: --mount PREFIX=SPEC and --static PREFIX=DIR may repeat; their
 * twins M0_MOUNTS and M0_STATIC hold lists separated by M0_MOUNT_LIST_SEP.
 * As for every flag, the command line wins: one --mount on argv replaces
 * all of M0_MOUNTS (and --static, M0_STATIC). PREFIX is normalised ("/" is
 * the root, a trailing '/' is dropped) and must be a plain path: segments
 * of RFC 3986 pchar without '%', ',' or '=', no empty, "." or ".."
 * segment. Two mounts on one prefix are an error; so is a server with no
 * mount at all. The positional MODULE is the root mount (prefix ""). */
int m0_config_parse(struct m0_config *cfg, int argc, char **argv, char *err, size_t cap);

/* Resolve defaults that depend on the machine: --blocking-threads
 * defaults to min(cores, 8) unless given explicitly (0 included); an
 * explicit value pins the pool's size. */
void m0_config_resolve(struct m0_config *cfg);

/* Print usage to stdout. */
void m0_config_usage(void);

#endif
