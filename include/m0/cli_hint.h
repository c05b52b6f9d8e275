/*
 * cli_hint.h — what to say about a flag m0serve does not know: what a flag
 * of gunicorn, uvicorn or Granian that m0serve spells differently or lacks
 * becomes, or the nearest known one ("did you mean '--workers'?") when it
 * is a slip of the keyboard. Pure functions (no state).
 */
#ifndef M0_CLI_HINT_H
#define M0_CLI_HINT_H

#include <stddef.h>

/* The flag of known[0..n-1] nearest to given (len bytes, e.g. "--worker"),
 * or NULL when none is near enough to be a slip: a known flag that given
 * begins (the shortest such, given at least 4 letters after "--"), else the
 * one at the smallest optimal-string-alignment distance (a transposition
 * counts one edit) if that is at most a third of given's letters (at least
 * one) and, beyond one edit, leaves every '-'-separated word within one
 * edit (two for words over five letters) — a near spelling that is not a
 * near meaning ("--proxy-headers", "--max-headers") is no slip. The result
 * is one of known's pointers. */
const char *m0_cli_nearest(const char *given, size_t len, const char *const *known, size_t n);

/* What to say about given (len bytes), a flag that is none of known[0..n-1]:
 * *hint, the rest of the error line for a flag of gunicorn, uvicorn or
 * Granian that m0serve spells differently or lacks ("--chdir", "-t",
 * "--uds", any "--ssl-..."): "did you mean '--app-dir'? (...)" or one line
 * on what m0serve does instead (a static string) — also for a slip one edit
 * away from one of them ("--proxy-header") unless a known flag is as near;
 * else *near, m0_cli_nearest's answer for a long flag. Both NULL: nothing
 * to say. */
void m0_cli_explain(const char *given, size_t len, const char *const *known, size_t n, const char **hint,
                    const char **near);

#endif
