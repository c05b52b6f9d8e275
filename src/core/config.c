/*
 * config.c — what every layer may read of the configuration once it is
 * parsed (config.h; the parser itself is cli.c, at the top: the process
 * layer). Pure: no I/O, no Python.
 *
 * Per process, read-only after boot: struct m0_config is filled once by
 * m0_config_parse and m0_config_resolve before anything serves;
 * m0_config_bind_parts and m0_config_addr_parts split into storage its
 * caller owns.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/config.h"

/* A decimal port 0..65535 and nothing else. */
static int port_number(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 65535)
        return 0;
    *out = v;
    return 1;
}

const char *m0_config_addr_scheme(const char *addr, int *scheme)
{
    *scheme = -1;
    if (strncmp(addr, "http://", 7) == 0) {
        *scheme = 0;
        return addr + 7;
    }
    if (strncmp(addr, "https://", 8) == 0) {
        *scheme = 1;
        return addr + 8;
    }
    return addr;
}

int m0_config_bind_parts(const struct m0_config *cfg, struct m0_bind_parts *out, char *err, size_t cap)
{
    return m0_config_addr_parts(cfg->bind, "--bind", out, err, cap);
}

int m0_config_addr_parts(const char *addr, const char *flag, struct m0_bind_parts *out, char *err, size_t cap)
{
    char *copy = out->text;
    out->host = NULL;
    out->path = NULL;
    out->port = 0;
    const char *rest = m0_config_addr_scheme(addr, &out->scheme);
    if ((size_t)snprintf(copy, sizeof out->text, "%s", rest) >= sizeof out->text)
        goto bad;
    if (out->scheme < 0 && strncmp(copy, "unix:", 5) == 0) {
        if (copy[5] == '\0' || strlen(copy + 5) >= 108)
            goto bad;
        out->path = copy + 5;
        return M0_OK;
    }
    char *colon = strrchr(copy, ':');
    if (colon == NULL)
        goto bad;
    *colon = '\0';
    long v;
    if (!port_number(colon + 1, &v))
        goto bad;
    out->port = (int)v;
    char *h = copy;
    if (h[0] == '[') {
        size_t n = strlen(h);
        if (n < 3 || h[n - 1] != ']')
            goto bad;
        h[n - 1] = '\0';
        h++;
    }
    out->host = h[0] ? h : "0.0.0.0";
    return M0_OK;
bad:
    snprintf(err, cap, "m0serve: error: %s: invalid address '%.200s' (want HOST:PORT, https://HOST:PORT or unix:PATH)",
             flag, addr);
    return M0_ERR;
}
