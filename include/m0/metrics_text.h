/*
 * metrics_text.h — the exposition writer: summed cells (metrics.h) to the
 * Prometheus text format 0.0.4 or OpenMetrics 1.0.0; and the pure rules of
 * the metrics flags. No I/O, no shared memory: the caller snapshots.
 */
#ifndef M0_METRICS_TEXT_H
#define M0_METRICS_TEXT_H

#include <stddef.h>
#include "m0/types.h"
#include "m0/buf.h"
#include "m0/metrics.h"

struct m0_config;

#define M0_MX_CT_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define M0_MX_CT_OPENMETRICS "application/openmetrics-text; version=1.0.0; charset=utf-8"

/* One server process, for the process_* families (from /proc). */
struct m0_mx_proc {
    int worker;                  /* listener slot, -1 for the master */
    double cpu_seconds;          /* user + system */
    uint64_t resident_bytes;
    uint64_t virtual_bytes;
    uint64_t open_fds;
    uint64_t max_fds;            /* 0: unknown (not written) */
    double start_time;           /* seconds since the epoch */
};

/* What one scrape renders. */
struct m0_mx_view {
    const uint64_t *v;                  /* M0_MX_NCELLS cells, summed over every process */
    const char *mounts[M0_MX_MOUNTS];   /* label value per mount index (prefix, "/" for the root);
                                           NULL: no such mount (its cells are skipped) */
    const char *version;                /* m0serve */
    const char *python;                 /* the embedded interpreter's version */
    int free_threaded;
    long workers;                       /* --workers */
    const struct m0_mx_proc *procs;
    size_t nprocs;
    const char *broker_engine;          /* the broker's engine ("redis"), or NULL: no broker */
    const char *broker_primary;         /* where its writes go, as the answering worker sees it ("" unknown) */
};

/* Append the whole exposition of v to b: HELP and TYPE for every family,
 * label values escaped (\\, \", \n). openmetrics: OpenMetrics 1.0.0 (counter
 * families named without _total, info type, "# EOF" last); else 0.0.4. */
void m0_mx_render(struct m0_buf *b, const struct m0_mx_view *v, int openmetrics);

/* Does an Accept field value (len bytes) prefer OpenMetrics? 1 when it
 * lists application/openmetrics-text with a q above 0 and above any
 * text/plain's (RFC 9110 §12.5.1; Prometheus asks so). */
int m0_mx_wants_openmetrics(const char *accept, size_t len);

/* The method's label index: GET HEAD POST PUT DELETE CONNECT OPTIONS TRACE
 * PATCH, else "other" (M0_MX_METHODS - 1). */
unsigned m0_mx_method_index(const char *method);
extern const char *const m0_mx_method_names[M0_MX_METHODS];

/* The histogram bucket of a duration in µs (M0_MX_NBUCKETS - 1: +Inf). */
unsigned m0_mx_bucket(uint64_t us);

/* Split a --metrics-bind value: "unix:PATH" (*path set) or "HOST:PORT" /
 * "[V6]:PORT" (host into hostbuf, *port). Returns M0_OK or M0_ERR. */
int m0_mx_addr_split(const char *addr, char *hostbuf, size_t hostcap, int *port, const char **path);

/* The flags' rules, for the CLI: --metrics-bind is an address, and
 * --metrics-path is empty or an absolute path without '?' or '#'. Returns
 * M0_OK, or M0_ERR with one line in err naming the flag. */
int m0_metrics_check_flags(const struct m0_config *cfg, char *err, size_t cap);

#endif
