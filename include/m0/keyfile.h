/*
 * keyfile.h — the secret files named by flags: --grant-key-file (grant.h)
 * and --grip-key-file. One rule for both, at start and on SIGHUP:
 *
 *   a regular file (a FIFO or a directory is refused; opened O_NONBLOCK so
 *   a FIFO cannot hang the start), at most max bytes, and no access at all
 *   for group or other users (st_mode & 077: "chmod 600"), whoever owns it.
 *
 * A refused file is a configuration error, not a flag's syntax: the server
 * exits M0_EXIT_CONFIG (78, EX_CONFIG) at start, and on SIGHUP keeps the
 * key it has, with one warning. Every message is one line, shaped
 *   m0serve: error: FLAG: PATH: why
 * (or "FLAG: cannot open PATH: strerror"), and never shows a secret.
 */
#ifndef M0_KEYFILE_H
#define M0_KEYFILE_H

#include <stddef.h>

/* Read the file at path under the rule above (flag names it in err, cap
 * bytes). Returns its bytes (malloc'd, NUL-terminated, *n of them; wipe and
 * free with m0_keyfile_free) or NULL. */
char *m0_keyfile_read(const char *flag, const char *path, size_t max, size_t *n, char *err, size_t cap);

/* Wipe (OPENSSL_cleanse) and free n bytes at p; NULL is fine. */
void m0_keyfile_free(void *p, size_t n);

#define M0_GRIP_KEY_FILE_MAX 4096   /* bytes of a --grip-key-file */

/* --grip-key-file: the first line (without its line end) is the key, its
 * bytes as written (gripcontrol's key= string). Refused like any key file,
 * and when that line is empty. M0_OK with *key (malloc'd; m0_keyfile_free)
 * and *len, or M0_ERR with err. */
int m0_keyfile_grip(const char *path, unsigned char **key, size_t *len, char *err, size_t cap);

#endif
