/*
 * pidfile.h — --pid FILE: the master's pid, for init scripts and
 * `kill -HUP $(cat FILE)`.
 */
#ifndef M0_PIDFILE_H
#define M0_PIDFILE_H

#include "m0/types.h"

/* Write getpid() and a newline to path, atomically (a temporary file
 * renamed over it). Refuses when path names a live process other than
 * this one (another server runs). Returns M0_OK or M0_ERR with err. */
int m0_pidfile_write(const char *path, char *err, size_t cap);

/* Remove path if it still holds this process's pid; a failure is logged. */
void m0_pidfile_remove(const char *path);

#endif
