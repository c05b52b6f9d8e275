/*
 * cli_hint.c — the nearest known flag, and gunicorn's flags that m0serve
 * spells differently or lacks (see cli_hint.h).
 */
#include <string.h>

#include "m0/cli_hint.h"
#include "m0/types.h"

#define MAX_FLAG 64

/* Optimal string alignment distance between a (na) and b (nb), both at
 * most MAX_FLAG bytes: insertions, deletions, substitutions and swaps of
 * two neighbours cost one each. */
static size_t distance(const char *a, size_t na, const char *b, size_t nb)
{
    static const size_t W = MAX_FLAG + 1;
    size_t d[(MAX_FLAG + 1) * (MAX_FLAG + 1)];
    for (size_t i = 0; i <= na; i++)
        d[i * W] = i;
    for (size_t j = 0; j <= nb; j++)
        d[j] = j;
    for (size_t i = 1; i <= na; i++) {
        for (size_t j = 1; j <= nb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = d[(i - 1) * W + j] + 1;
            if (d[i * W + j - 1] + 1 < v)
                v = d[i * W + j - 1] + 1;
            if (d[(i - 1) * W + j - 1] + cost < v)
                v = d[(i - 1) * W + j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[(i - 2) * W + j - 2] + 1 < v)
                v = d[(i - 2) * W + j - 2] + 1;
            d[i * W + j] = v;
        }
    }
    return d[na * W + nb];
}

const char *m0_cli_nearest(const char *given, size_t len, const char *const *known, size_t n)
{
    size_t letters = len;
    while (letters > 0 && given[len - letters] == '-')
        letters--;
    if (letters == 0 || len > MAX_FLAG)
        return NULL;
    const char *best = NULL;
    if (letters >= 4) {
        for (size_t i = 0; i < n; i++) {
            size_t kn = strlen(known[i]);
            if (kn > len && strncmp(known[i], given, len) == 0 && (best == NULL || kn < strlen(best)))
                best = known[i];
        }
        if (best != NULL)
            return best;
    }
    size_t limit = letters / 3 > 1 ? letters / 3 : 1, bestd = limit + 1;
    for (size_t i = 0; i < n; i++) {
        size_t kn = strlen(known[i]);
        if (kn > MAX_FLAG)
            continue;
        size_t dd = distance(given, len, known[i], kn);
        if (dd < bestd) {
            bestd = dd;
            best = known[i];
        }
    }
    return best;
}

static const struct {
    const char *flag;
    const char *hint;
} gunicorn[] = {
    {"--chdir", "did you mean '--app-dir'? (it puts DIR first on sys.path; m0serve does not change directory)"},
    {"--pythonpath", "did you mean '--app-dir'? (or set PYTHONPATH)"},
    {"--keep-alive", "did you mean '--timeout-keep-alive'?"},
    {"--access-logfile", "did you mean '--access-log'? (it logs to stdout)"},
    {"--access-logformat", "did you mean '--access-log-format'?"},
    {"--error-logfile", "m0serve logs to stderr"},
    {"--log-file", "m0serve logs to stderr"},
    {"--limit-request-fields", "did you mean '--max-headers'?"},
    {"--limit-request-field_size", "did you mean '--max-header-size'?"},
    {"-t", "m0serve has no worker timeout (gunicorn's restarts a silent worker): see --request-timeout"},
    {"--timeout", "m0serve has no worker timeout (gunicorn's restarts a silent worker): see --request-timeout"},
    {"-k", "m0serve has one kind of worker: it detects WSGI or ASGI by itself (see --protocol)"},
    {"--worker-class", "m0serve has one kind of worker: it detects WSGI or ASGI by itself (see --protocol)"},
    {"-c", "m0serve reads no configuration file: flags and their M0_* environment variables (see --help)"},
    {"--config", "m0serve reads no configuration file: flags and their M0_* environment variables (see --help)"},
    {"-D", "m0serve stays in the foreground: run it under systemd or another supervisor (see --pid)"},
    {"--daemon", "m0serve stays in the foreground: run it under systemd or another supervisor (see --pid)"},
};

const char *m0_cli_gunicorn_hint(const char *given, size_t len)
{
    for (size_t i = 0; i < M0_ARRAY_LEN(gunicorn); i++) {
        if (strlen(gunicorn[i].flag) == len && strncmp(gunicorn[i].flag, given, len) == 0)
            return gunicorn[i].hint;
    }
    return NULL;
}
