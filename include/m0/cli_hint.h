/*
 * cli_hint.h — what to say about a flag m0serve does not know: the nearest
 * known one ("did you mean '--workers'?"), or what a gunicorn flag that
 * m0serve spells differently or lacks becomes. Pure functions (no state).
 */
#ifndef M0_CLI_HINT_H
#define M0_CLI_HINT_H

#include <stddef.h>

/* The flag of known[0..n-1] nearest to given (len bytes, e.g. "--worker"),
 * or NULL when none is near enough to be a slip: a known flag that given
 * begins (the shortest such, given at least 4 letters after "--"), else the
 * one at the smallest optimal-string-alignment distance (a transposition
 * counts one edit) if that is at most a third of given's letters (at least
 * one). The result is one of known's pointers. */
const char *m0_cli_nearest(const char *given, size_t len, const char *const *known, size_t n);

/* For a gunicorn flag that m0serve spells differently or lacks (given,
 * len bytes: "--chdir", "-t", ...), the rest of the error line: "did you
 * mean '--app-dir'? (...)" or an explanation; NULL for any other flag. A
 * static string. */
const char *m0_cli_gunicorn_hint(const char *given, size_t len);

#endif
