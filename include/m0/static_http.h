/*
 * static_http.h — the mount table's endpoints answered on the loop
 * (static_http.c; endpoint.h). Loop thread only.
 */
#ifndef M0_STATIC_HTTP_H
#define M0_STATIC_HTTP_H

struct m0_endpoint;

/* A static mount (static.h): the files under the path's mount, answered
 * from the head (GET and HEAD; 405 otherwise), with ranges and
 * conditionals; the file range sent by the connection's writer. */
extern const struct m0_endpoint m0_static_endpoint;
/* The last resort: a path no mount claims, 404 "No application is mounted
 * at this path" (counted as /health's "unmounted"); the connection is kept
 * like any other answer's. */
extern const struct m0_endpoint m0_unmounted_endpoint;

#endif
