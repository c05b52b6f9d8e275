/*
 * origin.c — origins of RFC 6454 for the same-origin check (see origin.h).
 */
#include <strings.h>

#include "m0/origin.h"
#include "m0/types.h"

/* A byte a host may hold: reg-name (RFC 3986 §3.2.2: unreserved,
 * pct-encoded, sub-delims) and the hex digits, dots and colons of an
 * IP-literal. Never '/', '?', '#', '@', '[', ']', white space or a
 * control byte. */
static int host_byte(unsigned char c, int literal)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    switch (c) {
    case '-': case '.': case '_': case '~': case '%':
    case '!': case '$': case '&': case '\'': case '(': case ')':
    case '*': case '+': case ',': case ';': case '=':
        return 1;
    case ':':
        return literal;
    default:
        return 0;
    }
}

/* host [ ":" port ] at s (n bytes) into o; an empty port is the default
 * when empty_port, else refused. */
static int authority(const char *s, size_t n, int empty_port, struct m0_origin *o)
{
    size_t i = 0;
    if (n > 0 && s[0] == '[') {                     /* IP-literal: up to its ']' */
        for (i = 1; i < n && s[i] != ']'; i++) {
            if (!host_byte((unsigned char)s[i], 1))
                return M0_ERR;
        }
        if (i == n || i == 1)
            return M0_ERR;
        i++;
    } else {
        while (i < n && s[i] != ':') {
            if (!host_byte((unsigned char)s[i], 0))
                return M0_ERR;
            i++;
        }
        if (i == 0)
            return M0_ERR;
    }
    o->host = s;
    o->host_len = i;
    o->port = o->https ? 443 : 80;
    if (i == n)
        return M0_OK;
    if (s[i] != ':')
        return M0_ERR;
    i++;
    if (i == n)
        return empty_port ? M0_OK : M0_ERR;
    unsigned long port = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return M0_ERR;
        port = port * 10 + (unsigned long)(s[i] - '0');
        if (port > 65535)
            return M0_ERR;
    }
    if (port == 0)
        return M0_ERR;
    o->port = (unsigned)port;
    return M0_OK;
}

int m0_origin_parse(const char *s, size_t n, struct m0_origin *o)
{
    size_t sl;
    if (n >= 7 && strncasecmp(s, "http://", 7) == 0) {
        o->https = 0;
        sl = 7;
    } else if (n >= 8 && strncasecmp(s, "https://", 8) == 0) {
        o->https = 1;
        sl = 8;
    } else {
        return M0_ERR;                              /* "null", another scheme, no "://" */
    }
    return authority(s + sl, n - sl, 0, o);
}

int m0_origin_of_host(const char *s, size_t n, int https, struct m0_origin *o)
{
    o->https = https != 0;
    return authority(s, n, 1, o);
}

int m0_origin_same(const char *origin, size_t on, const char *host, size_t hn, int https)
{
    struct m0_origin a, b;
    if (origin == NULL || host == NULL || m0_origin_parse(origin, on, &a) != M0_OK ||
        m0_origin_of_host(host, hn, https, &b) != M0_OK)
        return 0;
    return a.https == b.https && a.port == b.port && a.host_len == b.host_len &&
           strncasecmp(a.host, b.host, a.host_len) == 0;
}
