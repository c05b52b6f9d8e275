/*
 * proxy.h — the client behind a trusted reverse proxy: which peers may
 * speak for their clients (--forwarded-allow-ips), and the effective client
 * address, port and scheme of a request (X-Forwarded-For,
 * X-Forwarded-Proto, RFC 7239 Forwarded).
 *
 * Pure: no I/O, no Python, no globals. The loop calls m0_proxy_client()
 * once per request for the WSGI environ (REMOTE_ADDR, REMOTE_PORT,
 * wsgi.url_scheme) and the access log; an ASGI runner calls it for the
 * scope's client and scheme.
 */
#ifndef M0_PROXY_H
#define M0_PROXY_H

#include <netinet/in.h>
#include "m0/types.h"

#define M0_PROXY_MAX_NETS 32

struct m0_proxy_net {
    uint8_t family;           /* AF_INET or AF_INET6 */
    uint8_t bits;             /* prefix length */
    uint8_t addr[16];         /* network address, host bits cleared */
};

/* The trusted peers. All zero trusts nobody. */
struct m0_proxy_trust {
    uint8_t all;              /* "*": every peer, and every hop of a chain */
    uint8_t unix_peers;       /* "unix": peers on a unix socket */
    unsigned n;
    struct m0_proxy_net nets[M0_PROXY_MAX_NETS];
};

/* The default of --forwarded-allow-ips: the loopback addresses and unix
 * sockets, where a proxy on the same host connects from. */
#define M0_PROXY_DEFAULT "127.0.0.1,::1,unix"

/*
 * Parse spec, a comma-separated list of IPv4/IPv6 addresses, CIDR networks
 * ("10.0.0.0/8", "fd00::/8"), "unix" (peers on a unix socket) and "*"
 * (everyone), into t. An empty spec trusts nobody. Returns M0_OK, or M0_ERR
 * with one line in err (cap bytes) naming the bad element.
 */
int m0_proxy_parse(struct m0_proxy_trust *t, const char *spec, char *err, size_t cap);

/* Is the peer at addr (text, as accept() reported it; "" or NULL for a
 * unix-socket peer) trusted? IPv4-mapped IPv6 addresses match as IPv4. */
int m0_proxy_trusted(const struct m0_proxy_trust *t, const char *addr);

struct m0_client {
    char addr[INET6_ADDRSTRLEN];  /* "" for a unix-socket peer without proxy headers */
    uint16_t port;                /* 0 when a proxy named the client without a port */
    uint8_t https;                /* the client spoke https (to the proxy) */
    uint8_t forwarded;            /* addr/port/scheme came from proxy headers */
    uint8_t scheme_given;         /* https came from a trusted proxy's header (not the default) */
};

/*
 * The effective client of request r received from peer_addr:peer_port.
 *
 * From an untrusted peer: the peer itself, scheme http, headers ignored
 * (they stay in the request, untouched, for the application to see).
 * From a trusted peer:
 *   1. X-Forwarded-For / X-Forwarded-Proto, if either is present (every
 *      field line, combined in order, RFC 9110 §5.3): the client is the
 *      rightmost hop that is not itself trusted; if every hop is trusted,
 *      the leftmost. An element that is not an IP address ("unknown",
 *      garbage) stops the walk: the client is then the hop to its right,
 *      the last one a trusted party vouched for. The scheme is the
 *      rightmost X-Forwarded-Proto element when it is "http" or "https".
 *   2. Otherwise RFC 7239 Forwarded (§4, §5.2, §5.4, §6): the same walk
 *      over the elements' for= nodes ("[v6]:port" and "v4:port" included);
 *      the scheme is the chosen element's proto=.
 * Addresses are re-printed from their binary form (inet_ntop), so nothing
 * a client wrote reaches REMOTE_ADDR or the log verbatim. Never fails.
 */
void m0_proxy_client(const struct m0_proxy_trust *t, const char *peer_addr, uint16_t peer_port,
                     const struct m0_req *r, struct m0_client *out);

#endif
