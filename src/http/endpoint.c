/*
 * endpoint.c — the loop's table of endpoints and the one decision of who
 * answers a request (see endpoint.h).
 *
 * Why a table rather than the protocol naming each endpoint: the HTTP/1.1
 * file decided twice before (its routing and its Expect: 100-continue
 * branch), and the two disagreed for a listener answered in C; now it asks
 * here once and keeps the answer, and what an endpoint may do is a flag of
 * its entry.
 */
#include <string.h>

#include "m0/config.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/endpoint.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/target.h"

void m0_endpoint_add(struct m0_server *s, const struct m0_endpoint *ep)
{
    if (s->nroutes >= M0_MAX_ENDPOINTS) {
        m0_error("endpoint table full: %s not added", ep->name);
        return;
    }
    s->routes[s->nroutes++] = ep;
    if (!(ep->flags & M0_EP_OWN_LISTENER))
        return;
    int l = ep->listener(s->cfg);
    if (l < 0 || l >= s->accept.n)
        return;
    s->accept.owned |= 1u << l;             /* answered in C: never handed round the loops */
    s->accept.limits[l] = ep->limits;
}

const struct m0_endpoint *m0_endpoint_route(struct m0_server *s, struct m0_conn *c, unsigned *flags)
{
    int l = c->job->lidx;
    int owned = l >= 0 && l < M0_MAX_LISTENERS && ((s->accept.owned >> l) & 1);
    for (unsigned i = 0; i < s->nroutes; i++) {
        const struct m0_endpoint *ep = s->routes[i];
        /* On a listener an endpoint owns, only that one answers. */
        if (owned && !((ep->flags & M0_EP_OWN_LISTENER) && ep->listener(s->cfg) == l))
            continue;
        unsigned f = ep->claims(s, c);
        if (f != 0) {
            *flags = f;
            return ep;
        }
    }
    *flags = 0;
    return NULL;
}

const struct m0_target *m0_endpoint_mount(struct m0_conn *c)
{
    struct m0_job *job = c->job;
    if (!job->route_matched) {
        job->route_target = m0_target_match(&m0_targets, job->req.path, job->req.path_len);
        job->route_matched = 1;
    }
    return job->route_target;
}
