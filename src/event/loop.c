/*
 * loop.c — the event loop proper (see loop.h).
 *
 * Level-triggered epoll. epoll data tells the two kinds of registration
 * apart: a connection slot carries (gen << 32 | slot) with gen's top bit
 * clear; a registered descriptor carries (1 << 63 | fd) and its handler sits
 * in a table indexed by fd. A slot event whose generation no longer matches
 * is the connection module's to drop (the nginx "instance bit", widened).
 *
 * The completion queue is a mutex-guarded array plus one eventfd: a poster
 * writes the eventfd only when no wakeup is pending, and the loop drains the
 * whole queue at once (nginx's thread-pool done queue; h2o's receiver).
 * Within one pass completions are handled before other events are
 * dispatched again, in the order they were posted.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "m0/buf.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/timer.h"

#define FD_TAG (1ull << 63)

struct handler {
    m0_fd_cb cb;
    void *ctx;
};

struct m0_loop {
    int ep;
    int wake_fd;                  /* the completion queue's eventfd */
    int stop;
    uint64_t now;
    _Atomic uint64_t awake_since; /* loop clock when it last woke; 0 while it sleeps (any thread reads) */
    uint64_t wake_at;             /* 0: no deadline this pass */
    struct handler *fds;          /* by fd */
    size_t nfds;
    m0_slot_cb slot_cb;
    void *slot_ctx;
    m0_complete_cb done_cb;
    void *done_ctx;
    struct hook {
        m0_hook_cb cb;
        void *ctx;
    } *hooks;                     /* grown as added: one per ASGI mount, the bus, … */
    unsigned nhooks, cap_hooks;

    /* Completions, any thread → loop. */
    pthread_mutex_t lock;
    struct m0_completion *done;   /* guarded by lock */
    size_t ndone, cap_done;
    int wake_pending;             /* guarded by lock */
    struct m0_completion *batch;  /* loop only: the batch being handled */
    size_t cap_batch;
};

struct m0_loop *m0_loop_new(void)
{
    struct m0_loop *l = m0_xmalloc(sizeof *l);
    memset(l, 0, sizeof *l);
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    l->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->ep == -1 || l->wake_fd == -1) {
        int saved = errno;
        m0_loop_free(l);
        errno = saved;
        return NULL;
    }
    pthread_mutex_init(&l->lock, NULL);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = FD_TAG | (uint64_t)l->wake_fd};
    if (epoll_ctl(l->ep, EPOLL_CTL_ADD, l->wake_fd, &ev) == -1) {
        int saved = errno;
        m0_loop_free(l);
        errno = saved;
        return NULL;
    }
    l->now = m0_clock_ms();
    return l;
}

void m0_loop_free(struct m0_loop *l)
{
    if (l == NULL)
        return;
    if (l->ep != -1)
        close(l->ep);
    if (l->wake_fd != -1)
        close(l->wake_fd);
    pthread_mutex_destroy(&l->lock);
    free(l->fds);
    free(l->hooks);
    free(l->done);
    free(l->batch);
    free(l);
}

void m0_loop_close_in_child(struct m0_loop *l)
{
    close(l->ep);
    close(l->wake_fd);
    l->ep = l->wake_fd = -1;
}

int m0_loop_add_fd(struct m0_loop *l, int fd, uint32_t events, m0_fd_cb cb, void *ctx)
{
    if ((size_t)fd >= l->nfds) {
        size_t n = (size_t)fd + 64;
        l->fds = m0_xrealloc(l->fds, n * sizeof *l->fds);
        memset(l->fds + l->nfds, 0, (n - l->nfds) * sizeof *l->fds);
        l->nfds = n;
    }
    struct epoll_event ev = {.events = events, .data.u64 = FD_TAG | (uint64_t)fd};
    if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) == -1)
        return M0_ERR;
    l->fds[fd] = (struct handler){.cb = cb, .ctx = ctx};
    return M0_OK;
}

int m0_loop_mod_fd(struct m0_loop *l, int fd, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.u64 = FD_TAG | (uint64_t)fd};
    return epoll_ctl(l->ep, EPOLL_CTL_MOD, fd, &ev) == -1 ? M0_ERR : M0_OK;
}

void m0_loop_del_fd(struct m0_loop *l, int fd)
{
    epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
    if ((size_t)fd < l->nfds)
        l->fds[fd] = (struct handler){0};
}

static uint64_t slot_tag(uint32_t slot, uint32_t gen)
{
    return ((uint64_t)(gen & 0x7fffffffu) << 32) | slot;
}

void m0_loop_on_slot(struct m0_loop *l, m0_slot_cb cb, void *ctx)
{
    l->slot_cb = cb;
    l->slot_ctx = ctx;
}

int m0_loop_add_slot(struct m0_loop *l, int fd, uint32_t slot, uint32_t gen, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.u64 = slot_tag(slot, gen)};
    return epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) == -1 ? M0_ERR : M0_OK;
}

int m0_loop_mod_slot(struct m0_loop *l, int fd, uint32_t slot, uint32_t gen, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.u64 = slot_tag(slot, gen)};
    return epoll_ctl(l->ep, EPOLL_CTL_MOD, fd, &ev) == -1 ? M0_ERR : M0_OK;
}

void m0_loop_on_complete(struct m0_loop *l, m0_complete_cb cb, void *ctx)
{
    l->done_cb = cb;
    l->done_ctx = ctx;
}

/* This thread's deferred completions (m0_loop_defer). */
static __thread struct {
    int on;
    struct m0_completion *c;
    size_t n, cap;
} deferred;

void m0_loop_defer(struct m0_loop *l, int on)
{
    if (!on) {
        /* Flushed, the thread's buffer goes too: a thread that stops
         * deferring (the executor, as it ends) leaves nothing behind. */
        m0_loop_flush(l);
        free(deferred.c);
        deferred.c = NULL;
        deferred.cap = 0;
    }
    deferred.on = on;
}

void m0_loop_flush(struct m0_loop *l)
{
    if (deferred.n == 0)
        return;
    int wake;
    pthread_mutex_lock(&l->lock);
    if (l->ndone + deferred.n > l->cap_done) {
        while (l->ndone + deferred.n > l->cap_done)
            l->cap_done = l->cap_done ? l->cap_done * 2 : 64;
        l->done = m0_xrealloc(l->done, l->cap_done * sizeof *l->done);
    }
    memcpy(l->done + l->ndone, deferred.c, deferred.n * sizeof *deferred.c);
    l->ndone += deferred.n;
    wake = !l->wake_pending;
    l->wake_pending = 1;
    pthread_mutex_unlock(&l->lock);
    deferred.n = 0;
    if (wake) {
        uint64_t one = 1;
        while (write(l->wake_fd, &one, sizeof one) == -1 && errno == EINTR) {
        }
    }
}

void m0_loop_post(struct m0_loop *l, const struct m0_completion *c)
{
    int wake;
    if (deferred.on) {
        if (deferred.n == deferred.cap) {
            deferred.cap = deferred.cap ? deferred.cap * 2 : 64;
            deferred.c = m0_xrealloc(deferred.c, deferred.cap * sizeof *deferred.c);
        }
        deferred.c[deferred.n++] = *c;
        return;
    }
    pthread_mutex_lock(&l->lock);
    if (l->ndone == l->cap_done) {
        l->cap_done = l->cap_done ? l->cap_done * 2 : 64;
        l->done = m0_xrealloc(l->done, l->cap_done * sizeof *l->done);
    }
    l->done[l->ndone++] = *c;
    wake = !l->wake_pending;
    l->wake_pending = 1;
    pthread_mutex_unlock(&l->lock);
    if (wake) {
        uint64_t one = 1;
        while (write(l->wake_fd, &one, sizeof one) == -1 && errno == EINTR) {
        }
    }
}

/* Take every queued completion in one swap and handle them in order. */
static void drain_completions(struct m0_loop *l)
{
    uint64_t v;
    while (read(l->wake_fd, &v, sizeof v) == -1 && errno == EINTR) {
    }
    pthread_mutex_lock(&l->lock);
    struct m0_completion *batch = l->done;
    size_t n = l->ndone, cap = l->cap_done;
    l->done = l->batch;
    l->cap_done = l->cap_batch;
    l->ndone = 0;
    l->wake_pending = 0;
    pthread_mutex_unlock(&l->lock);
    l->batch = batch;
    l->cap_batch = cap;
    for (size_t i = 0; i < n; i++)
        l->done_cb(l, &batch[i], l->done_ctx);
}

void m0_loop_add_hook(struct m0_loop *l, m0_hook_cb cb, void *ctx)
{
    if (l->nhooks == l->cap_hooks) {
        /* Safe while the hooks run: m0_loop_run indexes the table afresh. */
        l->cap_hooks = l->cap_hooks ? l->cap_hooks * 2 : 8;
        l->hooks = m0_xrealloc(l->hooks, l->cap_hooks * sizeof *l->hooks);
    }
    l->hooks[l->nhooks].cb = cb;
    l->hooks[l->nhooks].ctx = ctx;
    l->nhooks++;
}

void m0_loop_wake_at(struct m0_loop *l, uint64_t at)
{
    if (l->wake_at == 0 || at < l->wake_at)
        l->wake_at = at;
}

uint64_t m0_loop_awake_since(const struct m0_loop *l)
{
    return atomic_load_explicit(&l->awake_since, memory_order_relaxed);
}

uint64_t m0_loop_now(const struct m0_loop *l)
{
    return l->now;
}

void m0_loop_stop(struct m0_loop *l)
{
    l->stop = 1;
}

int m0_loop_run(struct m0_loop *l)
{
    struct epoll_event events[256];
    l->stop = 0;
    while (!l->stop) {
        l->wake_at = 0;
        for (unsigned i = 0; i < l->nhooks && !l->stop; i++)
            l->hooks[i].cb(l, l->hooks[i].ctx);
        if (l->stop)
            break;
        int timeout = -1;
        if (l->wake_at != 0)
            timeout = l->wake_at > l->now ? (int)(l->wake_at - l->now) : 0;
        atomic_store_explicit(&l->awake_since, 0, memory_order_relaxed);
        int n = epoll_wait(l->ep, events, (int)M0_ARRAY_LEN(events), timeout);
        if (n == -1 && errno != EINTR) {
            m0_log_errno("epoll_wait");
            return M0_ERR;
        }
        l->now = m0_clock_ms();
        atomic_store_explicit(&l->awake_since, l->now, memory_order_relaxed);
        for (int i = 0; i < n; i++) {
            uint64_t t = events[i].data.u64;
            if (t & FD_TAG) {
                int fd = (int)(t & 0xffffffffu);
                if (fd == l->wake_fd) {
                    drain_completions(l);
                } else if ((size_t)fd < l->nfds && l->fds[fd].cb != NULL) {
                    l->fds[fd].cb(l, fd, events[i].events, l->fds[fd].ctx);
                }
                continue;
            }
            l->slot_cb(l, (uint32_t)t, (uint32_t)(t >> 32), events[i].events, l->slot_ctx);
        }
    }
    return M0_OK;
}
