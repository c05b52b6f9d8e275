/*
 * health.h — /health, answered in C on the loop (health.c; DESIGN
 * capability 11): the worker's numbers (every loop's summed with
 * --threads), its mounts and busiest channels, as JSON (health_json.h).
 * Loop thread only.
 */
#ifndef M0_HEALTH_H
#define M0_HEALTH_H

struct m0_endpoint;

/* The /health endpoint (endpoint.h): the --health-path on any listener no
 * endpoint owns, whatever the method, answered from the head (200,
 * application/json, Cache-Control: no-store). */
extern const struct m0_endpoint m0_health_endpoint;

#endif
