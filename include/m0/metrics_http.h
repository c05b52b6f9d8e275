/*
 * metrics_http.h — the worker's side of the metrics (metrics_http.c): its
 * loop samples itself into this process's block (metrics.h), and the
 * metrics endpoint is answered in C. Loop thread only.
 */
#ifndef M0_METRICS_HTTP_H
#define M0_METRICS_HTTP_H

struct m0_endpoint;
struct m0_ext;
struct m0_server;

/* After m0_serve_new: the loop samples the worker's totals and gauges into
 * this process's block (metrics.h: m0_metrics_block) before every sleep —
 * the metrics' extension (server.h), registered and started here. */
void m0_metrics_attach(struct m0_server *s);
extern const struct m0_ext m0_metrics_ext;

/*
 * The metrics endpoint (endpoint.h): it owns --metrics-bind's listener
 * (another path there gets 404), and on the main listener it claims
 * --metrics-path — for a peer in --forwarded-allow-ips; any other peer gets
 * a 404, as if nothing were there (the application never sees it either).
 * Its answer, from the head alone (no body is read): the sum over every
 * process, in the Prometheus text format 0.0.4, or OpenMetrics 1.0.0 when
 * the Accept header asks for application/openmetrics-text; 405 (Allow:
 * GET, HEAD) for another method.
 */
extern const struct m0_endpoint m0_metrics_endpoint;

#endif
