/*
 * metrics.c — the shared blocks of metrics.h: made by the master before the
 * first fork, claimed per worker process, folded when the master reaps one;
 * the loop's sampling of a worker's totals; and the sum a scrape reads.
 *
 * Ordering: every cell is a relaxed atomic. A fold (the master, after a
 * worker died: no writer is left on its block) is bracketed by a sequence
 * count, odd while it runs; a reader that saw it change sums again.
 */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "m0/config.h"
#include "m0/log.h"
#include "m0/metrics.h"
#include "m0/metrics_text.h"

struct shared {
    _Atomic uint64_t seq;            /* odd while the master folds */
    int32_t master_pid;
    int32_t nblocks;
    uint64_t spawned;                /* master only: the next block's birth order */
    struct m0_mx_block retired;      /* the counters of every process that ended */
    struct m0_mx_block master;       /* the master's own (starts, exits, reloads) */
    struct m0_mx_block blocks[];     /* one per live worker process */
};

/* Process-wide, written once each: `sh` by the master before its first
 * fork (every worker inherits the pointer, the mapping shared), `mine` in
 * a worker right after fork, `multiproc_dir` by the master at start. No
 * loop state lives here; a loop reaches its block through m0_metrics_block. */
static struct shared *sh;
static int mine = -1;
static const char *multiproc_dir;

int m0_metrics_create(const struct m0_config *cfg)
{
    const char *dir = getenv("PROMETHEUS_MULTIPROC_DIR");
    if (dir == NULL)
        dir = getenv("prometheus_multiproc_dir");    /* the older spelling prometheus_client still reads */
    multiproc_dir = dir != NULL && dir[0] != '\0' ? dir : NULL;
    if (cfg->metrics_bind == NULL && (cfg->metrics_path == NULL || cfg->metrics_path[0] == '\0'))
        return M0_OK;
    /* The most processes at once: --max-workers slots (SIGTTIN's ceiling),
     * each with room for a reload's successor and retirees still draining;
     * past that the master waits for a block before it forks (master.c). */
    int n = (int)cfg->max_workers * 4 + 4;
    size_t size = sizeof(struct shared) + (size_t)n * sizeof(struct m0_mx_block);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        m0_log_errno("metrics: cannot map %zu bytes", size);
        return M0_ERR;
    }
    sh = p;
    sh->nblocks = n;
    sh->master_pid = (int32_t)getpid();
    sh->retired.worker = sh->master.worker = -1;
    return M0_OK;
}

struct m0_mx_block *m0_metrics_master(void)
{
    return sh != NULL ? &sh->master : NULL;
}

static void fold_begin(void)
{
    atomic_fetch_add(&sh->seq, 1);
}

static void fold_end(void)
{
    atomic_fetch_add(&sh->seq, 1);
}

int m0_metrics_claim(int idx)
{
    if (sh == NULL)
        return -1;
    for (int i = 0; i < sh->nblocks; i++) {
        struct m0_mx_block *b = &sh->blocks[i];
        if (atomic_load(&b->pid) == 0) {
            fold_begin();
            atomic_store(&b->pid, -1);
            b->worker = idx;
            b->born = ++sh->spawned;
            fold_end();
            m0_mx_add(&sh->master, M0_MX_WORKER_STARTS, 1);
            return i;
        }
    }
    return M0_MX_NO_ROOM;
}

/* Fold block b into the retired one and free it (master). */
static void retire(struct m0_mx_block *b)
{
    fold_begin();
    for (unsigned i = 0; i < M0_MX_NCOUNTERS; i++) {
        uint64_t v = atomic_load_explicit(&b->v[i], memory_order_relaxed);
        if (v != 0)
            atomic_fetch_add_explicit(&sh->retired.v[i], v, memory_order_relaxed);
    }
    /* Tests only (test_metrics.py): hold the fold open, counted in the
     * retired sum and not yet cleared, for M0_TEST_FOLD_PAUSE_US µs; a
     * fold lasts microseconds, too short for a test to catch a reader
     * that does not wait for it. */
    const char *pause = getenv("M0_TEST_FOLD_PAUSE_US");
    if (pause != NULL)
        usleep((useconds_t)strtoul(pause, NULL, 10));
    for (unsigned i = 0; i < M0_MX_NCELLS; i++)
        atomic_store_explicit(&b->v[i], 0, memory_order_relaxed);
    atomic_store(&b->pid, 0);
    fold_end();
}

void m0_metrics_owned(int blk, pid_t pid)
{
    if (sh == NULL || blk < 0 || pid == 0)     /* pid 0: the child itself */
        return;
    if (pid == -1)
        retire(&sh->blocks[blk]);
    else
        atomic_store(&sh->blocks[blk].pid, (int32_t)pid);
}

void m0_metrics_adopt(int blk)
{
    mine = blk;
}

/* prometheus_client's mark_process_dead: the dead process's live gauges
 * (gauge_liveall_PID.db, gauge_livesum_PID.db, livemax, livemin,
 * livemostrecent — every "live" mode) go; its counters and histograms stay,
 * their totals outlive the process. */
static void mark_dead(pid_t pid)
{
    DIR *d = opendir(multiproc_dir);
    if (d == NULL) {
        m0_debug("PROMETHEUS_MULTIPROC_DIR %s: %s", multiproc_dir, strerror(errno));
        return;
    }
    char tail[32];
    int tn = snprintf(tail, sizeof tail, "_%d.db", (int)pid);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n > 10 + (size_t)tn && strncmp(e->d_name, "gauge_live", 10) == 0 &&
            strcmp(e->d_name + n - (size_t)tn, tail) == 0 && memchr(e->d_name + 10, '_', n - 10 - (size_t)tn) == NULL) {
            if (unlinkat(dirfd(d), e->d_name, 0) == -1 && errno != ENOENT)
                m0_warn("PROMETHEUS_MULTIPROC_DIR: cannot remove %s: %s", e->d_name, strerror(errno));
        }
    }
    closedir(d);
}

void m0_metrics_reaped(pid_t pid, int wait_status)
{
    if (multiproc_dir != NULL)
        mark_dead(pid);
    if (sh == NULL)
        return;
    unsigned cause = M0_MX_EXIT_ERROR;
    if (WIFSIGNALED(wait_status))
        cause = M0_MX_EXIT_SIGNAL;
    else if (WEXITSTATUS(wait_status) == M0_EXIT_OK)
        cause = M0_MX_EXIT_CLEAN;
    else if (WEXITSTATUS(wait_status) == M0_EXIT_BOOT)
        cause = M0_MX_EXIT_BOOT;
    else if (WEXITSTATUS(wait_status) == M0_EXIT_ABANDONED)
        cause = M0_MX_EXIT_ABANDONED;
    m0_mx_add(&sh->master, cause, 1);
    for (int i = 0; i < sh->nblocks; i++) {
        if (atomic_load(&sh->blocks[i].pid) == (int32_t)pid) {
            retire(&sh->blocks[i]);
            break;
        }
    }
}

/* ------------------------------------------------------------- worker */

struct m0_mx_block *m0_metrics_block(void)
{
    return sh != NULL && mine >= 0 ? &sh->blocks[mine] : NULL;
}

void m0_metrics_request(struct m0_mx_block *b, int mount, const char *method, int status, uint64_t us, int held)
{
    if (b == NULL || status < 100 || status > 599)
        return;
    unsigned m = mount >= 0 && mount < M0_MX_MOUNTS - 1 ? (unsigned)mount : M0_MX_MOUNTS - 1;
    m0_mx_add(b, M0_MX_REQ(m, m0_mx_method_index(method), (unsigned)(status / 100 - 1)), 1);
    if (held)
        return;
    m0_mx_add(b, M0_MX_HIST(m, m0_mx_bucket(us)), 1);
    m0_mx_add(b, M0_MX_SUM_US(m), us);
}

/* Per process, as the block is: m0.publish runs on any thread of it (the
 * application's own threads included, which reach no loop), and /health
 * shows the count without --metrics-* too. */
static atomic_uint_least64_t published;

void m0_metrics_publish(struct m0_mx_block *b, int ok)
{
    if (ok)
        atomic_fetch_add_explicit(&published, 1, memory_order_relaxed);
    m0_mx_add(b, ok ? M0_MX_PUBLISHES : M0_MX_PUBLISH_ERRORS, 1);
}

uint64_t m0_metrics_published(void)
{
    return atomic_load_explicit(&published, memory_order_relaxed);
}

/* -------------------------------------------------------------- scrape */

int m0_mx_sum(uint64_t *out, struct m0_mx_who *who, size_t *nwho, size_t maxwho)
{
    if (sh == NULL)
        return M0_ERR;
    for (int attempt = 0;; attempt++) {
        uint64_t s1 = atomic_load(&sh->seq);
        if (s1 & 1) {
            sched_yield();         /* a fold takes microseconds */
            continue;
        }
        memset(out, 0, M0_MX_NCELLS * sizeof *out);
        size_t n = 0;
        const struct m0_mx_block *all[2] = {&sh->retired, &sh->master};
        for (int k = 0; k < 2; k++) {
            for (unsigned i = 0; i < M0_MX_NCELLS; i++)
                out[i] += atomic_load_explicit(&all[k]->v[i], memory_order_relaxed);
        }
        if (maxwho > 0)
            who[n++] = (struct m0_mx_who){.pid = sh->master_pid, .worker = -1};
        for (int j = 0; j < sh->nblocks; j++) {
            const struct m0_mx_block *b = &sh->blocks[j];
            int32_t pid = atomic_load(&b->pid);
            if (pid == 0)
                continue;
            for (unsigned i = 0; i < M0_MX_NCELLS; i++) {
                uint64_t v = atomic_load_explicit(&b->v[i], memory_order_relaxed);
                if (i == M0_MX_BROKER_LAG)
                    out[i] = v > out[i] ? v : out[i];     /* the worst worker's, not a sum */
                else
                    out[i] += v;
            }
            if (pid <= 0)
                continue;
            /* One process per slot is labelled: the newest (a reload's
             * old worker still draining is left out). */
            size_t k = 1;
            while (k < n && who[k].worker != b->worker)
                k++;
            if (k < n) {
                if (b->born > who[k].born)
                    who[k] = (struct m0_mx_who){.pid = pid, .worker = b->worker, .born = b->born};
            } else if (n < maxwho) {
                who[n++] = (struct m0_mx_who){.pid = pid, .worker = b->worker, .born = b->born};
            }
        }
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load(&sh->seq) == s1 || attempt > 1000) {
            *nwho = n;
            return M0_OK;
        }
    }
}
