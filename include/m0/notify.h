/*
 * notify.h — the service manager's notification protocol (sd_notify(3)):
 * one datagram of "KEY=VALUE\n" lines to the AF_UNIX socket named by
 * $NOTIFY_SOCKET (a path, or an abstract name written with a leading '@'),
 * and the watchdog's interval from $WATCHDOG_USEC/$WATCHDOG_PID.
 *
 * Written on the documented socket protocol rather than linking
 * libsystemd: a dozen lines, no new dependency, and the same behaviour
 * under systemd, under systemd-socket-activate or with any supervisor that
 * speaks the protocol. Used by the master only (NotifyAccess=main).
 */
#ifndef M0_NOTIFY_H
#define M0_NOTIFY_H

#include "m0/types.h"

/* Read $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID once and remove
 * them from the environment, so neither the workers nor the application
 * (which would be refused by NotifyAccess=main anyway) try to use them.
 * Returns M0_OK, or M0_ERR with err when NOTIFY_SOCKET is set but unusable
 * (not absolute nor '@', too long). Without NOTIFY_SOCKET every other call
 * is a no-op. */
int m0_notify_init(char *err, size_t cap);

/* Is a service manager listening? */
int m0_notify_enabled(void);

/* The watchdog interval in microseconds the manager asked for (0: none).
 * Only set when WATCHDOG_PID is absent or names this process. */
uint64_t m0_notify_watchdog_usec(void);

/* Send one notification made of printf-formatted "KEY=VALUE" lines
 * ("READY=1\nSTATUS=..."), as one datagram, without blocking. Returns
 * M0_OK, M0_ERR (errno set) when it could not be sent, or M0_OK without
 * sending when notifications are off. */
int m0_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* CLOCK_MONOTONIC in microseconds, as RELOADING=1's MONOTONIC_USEC wants. */
uint64_t m0_notify_monotonic_usec(void);

#endif
