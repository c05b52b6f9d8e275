/*
 * proxy.c — trusted proxies and the effective client of a request (see
 * proxy.h). Pure functions over the parsed request; called on the loop
 * thread once per request.
 *
 * Why "rightmost untrusted hop": each proxy appends the address it received
 * the request from, so a header reads "whatever the client wrote, then what
 * each proxy saw". Walking from the right over hops we trust, the first
 * hop we do not trust is the last address a trusted party vouched for;
 * everything to its left is the client's say-so.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "m0/http.h"
#include "m0/proxy.h"

#define MAX_HOPS 64

/* A parsed address. */
struct addr {
    int family;              /* AF_INET, AF_INET6, or 0: not an address */
    uint8_t b[16];
    uint16_t port;
};

/* IPv4-mapped IPv6 (::ffff:a.b.c.d, RFC 4291 §2.5.5.2) becomes IPv4, so a
 * dual-stack listener's peers match IPv4 networks. */
static void unmap(struct addr *a)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (a->family == AF_INET6 && memcmp(a->b, prefix, 12) == 0) {
        memmove(a->b, a->b + 12, 4);
        a->family = AF_INET;
    }
}

/* Parse exactly n bytes of s as a bare IPv4 or IPv6 address. */
static int parse_ip(const char *s, size_t n, struct addr *a)
{
    char tmp[INET6_ADDRSTRLEN + 1];
    memset(a, 0, sizeof *a);
    if (n == 0 || n >= sizeof tmp)
        return M0_ERR;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    if (inet_pton(AF_INET, tmp, a->b) == 1)
        a->family = AF_INET;
    else if (inet_pton(AF_INET6, tmp, a->b) == 1)
        a->family = AF_INET6;
    else
        return M0_ERR;
    unmap(a);
    return M0_OK;
}

static int parse_port(const char *s, size_t n, uint16_t *port)
{
    unsigned v = 0;
    if (n == 0 || n > 5)
        return M0_ERR;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return M0_ERR;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return M0_ERR;
    *port = (uint16_t)v;
    return M0_OK;
}

/* A node as proxies write it: "v4", "v6", "[v6]", "[v6]:port", "v4:port"
 * (RFC 7239 §6; X-Forwarded-For is the same without a standard). */
static int parse_node(const char *s, size_t n, struct addr *a)
{
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (close == NULL || parse_ip(s + 1, (size_t)(close - s - 1), a) != M0_OK)
            return M0_ERR;
        size_t rest = n - (size_t)(close - s) - 1;
        if (rest == 0)
            return M0_OK;
        if (close[1] != ':' || parse_port(close + 2, rest - 1, &a->port) != M0_OK)
            return M0_ERR;
        return M0_OK;
    }
    const char *colon = memchr(s, ':', n);
    if (colon != NULL && memchr(colon + 1, ':', n - (size_t)(colon - s) - 1) == NULL) {
        /* One colon: v4:port. */
        if (parse_ip(s, (size_t)(colon - s), a) != M0_OK || a->family != AF_INET)
            return M0_ERR;
        return parse_port(colon + 1, n - (size_t)(colon - s) - 1, &a->port);
    }
    return parse_ip(s, n, a);
}

static int in_net(const struct m0_proxy_net *net, const struct addr *a)
{
    if (net->family != a->family)
        return 0;
    unsigned full = net->bits / 8, rest = net->bits % 8;
    if (memcmp(net->addr, a->b, full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (net->addr[full] & mask) == (a->b[full] & mask);
}

static int trusted_addr(const struct m0_proxy_trust *t, const struct addr *a)
{
    if (t->all)
        return 1;
    for (unsigned i = 0; i < t->n; i++) {
        if (in_net(&t->nets[i], a))
            return 1;
    }
    return 0;
}

int m0_proxy_trusted(const struct m0_proxy_trust *t, const char *addr)
{
    if (addr == NULL || addr[0] == '\0')
        return t->all || t->unix_peers;
    struct addr a;
    if (parse_ip(addr, strlen(addr), &a) != M0_OK)
        return 0;
    return trusted_addr(t, &a);
}

int m0_proxy_parse(struct m0_proxy_trust *t, const char *spec, char *err, size_t cap)
{
    memset(t, 0, sizeof *t);
    const char *p = spec, *end = spec + strlen(spec), *item;
    size_t len;
    while (m0_http_list_next(&p, end, &item, &len)) {
        if (len == 1 && item[0] == '*') {
            t->all = 1;
            continue;
        }
        if (len == 4 && strncasecmp(item, "unix", 4) == 0) {
            t->unix_peers = 1;
            continue;
        }
        if (t->n == M0_PROXY_MAX_NETS) {
            snprintf(err, cap, "m0serve: error: --forwarded-allow-ips: more than %d networks", M0_PROXY_MAX_NETS);
            return M0_ERR;
        }
        const char *slash = memchr(item, '/', len);
        struct addr a;
        size_t alen = slash ? (size_t)(slash - item) : len;
        if (parse_ip(item, alen, &a) != M0_OK)
            goto bad;
        unsigned max = a.family == AF_INET ? 32 : 128, bits = max;
        if (slash != NULL) {
            uint16_t v;
            if (parse_port(slash + 1, len - alen - 1, &v) != M0_OK || v > max)
                goto bad;
            bits = v;
            /* A mapped IPv6 network ("::ffff:10.0.0.0/104") was unmapped
             * to IPv4: its prefix loses the 96 mapped bits. */
            if (a.family == AF_INET && memchr(item, ':', alen) != NULL) {
                if (bits < 96)
                    goto bad;
                bits -= 96;
            }
        }
        struct m0_proxy_net *net = &t->nets[t->n++];
        net->family = (uint8_t)a.family;
        net->bits = (uint8_t)bits;
        memset(net->addr, 0, sizeof net->addr);
        for (unsigned i = 0; i < bits / 8; i++)
            net->addr[i] = a.b[i];
        if (bits % 8)
            net->addr[bits / 8] = (uint8_t)(a.b[bits / 8] & (0xff << (8 - bits % 8)));
        continue;
    bad:
        snprintf(err, cap, "m0serve: error: --forwarded-allow-ips: invalid address or network '%.*s'",
                 (int)len, item);
        return M0_ERR;
    }
    return M0_OK;
}

/* ------------------------------------------------------------ headers */

struct span {
    const char *p;
    size_t n;
};

/* The rightmost MAX_HOPS elements of every field line named name, in
 * order: a ring, so a client cannot push the real hops out by sending
 * many of its own first. Returns how many (<= MAX_HOPS) are in out. */
static unsigned collect(const struct m0_req *r, const char *name, size_t nlen, struct span *out, int *present)
{
    unsigned total = 0;
    *present = 0;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (h->name_len != nlen || strncasecmp(h->name, name, nlen) != 0)
            continue;
        *present = 1;
        const char *p = h->value, *end = h->value + h->value_len, *item;
        size_t len;
        while (m0_http_list_next(&p, end, &item, &len)) {
            out[total % MAX_HOPS] = (struct span){item, len};
            total++;
        }
    }
    if (total <= MAX_HOPS)
        return total;
    /* Rotate the ring so out[0] is the oldest kept element. */
    struct span tmp[MAX_HOPS];
    for (unsigned i = 0; i < MAX_HOPS; i++)
        tmp[i] = out[(total + i) % MAX_HOPS];
    memcpy(out, tmp, sizeof tmp);
    return MAX_HOPS;
}

/* Walk hops right to left (see proxy.h); cur starts as the peer. */
static void walk(const struct m0_proxy_trust *t, const struct addr *hops, unsigned n, struct addr *cur, int *idx)
{
    *idx = -1;
    for (unsigned k = n; k-- > 0;) {
        if (hops[k].family == 0)
            return;
        *cur = hops[k];
        *idx = (int)k;
        if (!trusted_addr(t, cur))
            return;
    }
}

static int scheme_of(const char *s, size_t n)
{
    if (n == 5 && strncasecmp(s, "https", 5) == 0)
        return 1;
    if (n == 4 && strncasecmp(s, "http", 4) == 0)
        return 0;
    return -1;
}

/* One Forwarded element (RFC 7239 §4): pairs "name=value" separated by
 * ';', values tokens or quoted strings. Collects for= and proto=. */
struct fwd {
    struct addr node;
    int proto;               /* 1 https, 0 http, -1 absent/other */
};

static void parse_forwarded_element(const char *s, size_t n, struct fwd *f)
{
    const char *end = s + n;
    memset(&f->node, 0, sizeof f->node);
    f->proto = -1;
    while (s < end) {
        while (s < end && (*s == ' ' || *s == '\t' || *s == ';'))
            s++;
        const char *name = s;
        while (s < end && *s != '=' && *s != ';')
            s++;
        size_t name_len = (size_t)(s - name);
        while (name_len > 0 && (name[name_len - 1] == ' ' || name[name_len - 1] == '\t'))
            name_len--;
        if (s >= end || *s != '=')
            continue;
        s++;
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
        char val[128];
        size_t vl = 0;
        if (s < end && *s == '"') {
            for (s++; s < end && *s != '"'; s++) {
                if (*s == '\\' && s + 1 < end)
                    s++;                         /* quoted-pair */
                if (vl < sizeof val - 1)
                    val[vl++] = *s;
            }
            if (s < end)
                s++;
        } else {
            for (; s < end && *s != ';'; s++) {
                if (vl < sizeof val - 1)
                    val[vl++] = *s;
            }
            while (vl > 0 && (val[vl - 1] == ' ' || val[vl - 1] == '\t'))
                vl--;
        }
        if (name_len == 3 && strncasecmp(name, "for", 3) == 0) {
            if (parse_node(val, vl, &f->node) != M0_OK)
                memset(&f->node, 0, sizeof f->node);
        } else if (name_len == 5 && strncasecmp(name, "proto", 5) == 0) {
            f->proto = scheme_of(val, vl);
        }
    }
}

/* Split a Forwarded field value into elements at commas outside quoted
 * strings, appending to the ring out (as collect() does). */
static void split_forwarded(const char *s, size_t n, struct span *out, unsigned *total)
{
    const char *end = s + n, *start = s;
    int quoted = 0;
    for (const char *p = s; p <= end; p++) {
        if (p < end && *p == '"')
            quoted = !quoted;
        else if (p < end && *p == '\\' && quoted && p + 1 < end)
            p++;
        else if (p == end || (*p == ',' && !quoted)) {
            const char *a = start, *b = p;
            while (a < b && (*a == ' ' || *a == '\t'))
                a++;
            while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
                b--;
            if (b > a) {
                out[*total % MAX_HOPS] = (struct span){a, (size_t)(b - a)};
                (*total)++;
            }
            start = p + 1;
        }
    }
}

static void set_client(struct m0_client *out, const struct addr *a)
{
    if (inet_ntop(a->family, a->b, out->addr, sizeof out->addr) == NULL)
        out->addr[0] = '\0';
    out->port = a->port;
    out->forwarded = 1;
}

void m0_proxy_client(const struct m0_proxy_trust *t, const char *peer_addr, uint16_t peer_port,
                     const struct m0_req *r, struct m0_client *out)
{
    size_t pl = peer_addr != NULL ? strnlen(peer_addr, sizeof out->addr - 1) : 0;
    memcpy(out->addr, peer_addr != NULL ? peer_addr : "", pl);
    out->addr[pl] = '\0';
    out->port = peer_port;
    out->https = 0;
    out->forwarded = 0;
    out->scheme_given = 0;
    if (!m0_proxy_trusted(t, peer_addr))
        return;

    struct addr peer = {0};
    if (peer_addr != NULL && peer_addr[0] != '\0')
        parse_ip(peer_addr, strlen(peer_addr), &peer);

    static __thread struct span spans[MAX_HOPS];
    static __thread struct addr hops[MAX_HOPS];
    int xff_present, xfp_present;
    unsigned n = collect(r, "x-forwarded-for", 15, spans, &xff_present);
    for (unsigned k = 0; k < n; k++) {
        if (parse_node(spans[k].p, spans[k].n, &hops[k]) != M0_OK)
            hops[k].family = 0;
    }
    struct span proto[MAX_HOPS];
    unsigned np = collect(r, "x-forwarded-proto", 17, proto, &xfp_present);
    if (xff_present || xfp_present) {
        struct addr cur = peer;
        int idx;
        walk(t, hops, n, &cur, &idx);
        if (idx >= 0)
            set_client(out, &cur);
        if (np > 0) {
            int https = scheme_of(proto[np - 1].p, proto[np - 1].n);
            if (https >= 0) {
                out->https = (uint8_t)https;
                out->forwarded = 1;
                out->scheme_given = 1;
            }
        }
        return;
    }

    /* RFC 7239 Forwarded. */
    unsigned total = 0;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (h->name_len == 9 && strncasecmp(h->name, "forwarded", 9) == 0)
            split_forwarded(h->value, h->value_len, spans, &total);
    }
    if (total == 0)
        return;
    n = total;
    if (total > MAX_HOPS) {
        struct span tmp[MAX_HOPS];
        for (unsigned i = 0; i < MAX_HOPS; i++)
            tmp[i] = spans[(total + i) % MAX_HOPS];
        memcpy(spans, tmp, sizeof tmp);
        n = MAX_HOPS;
    }
    static __thread struct fwd el[MAX_HOPS];
    for (unsigned k = 0; k < n; k++) {
        parse_forwarded_element(spans[k].p, spans[k].n, &el[k]);
        hops[k] = el[k].node;
    }
    struct addr cur = peer;
    int idx;
    walk(t, hops, n, &cur, &idx);
    if (idx >= 0) {
        set_client(out, &cur);
        if (el[idx].proto >= 0) {
            out->https = (uint8_t)el[idx].proto;
            out->scheme_given = 1;
        }
    } else if (el[n - 1].proto >= 0) {
        /* No usable for= (obfuscated, "unknown"): the nearest proxy's
         * proto still says how the request reached it. */
        out->https = (uint8_t)el[n - 1].proto;
        out->forwarded = 1;
        out->scheme_given = 1;
    }
}
