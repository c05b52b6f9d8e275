/*
 * bus.c — the broadcast bus: datagram codec, socketpairs and the shared
 * event-id counter.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "m0/buf.h"
#include "m0/bus.h"
#include "m0/sse.h"

/* Per process, read-only after fork: the bus the master made and this
 * worker's index in it (set by the master in the child, master.c). */
struct m0_bus *m0_bus_current;
int m0_bus_index = -1;
int m0_bus_loops = 1;

int m0_bus_endpoint(int loop)
{
    if (m0_bus_current == NULL || m0_bus_index < 0 || loop < 0 || loop >= m0_bus_loops)
        return -1;
    return m0_bus_index * m0_bus_loops + loop;
}

static uint16_t get16(const char *p)
{
    return (uint16_t)((unsigned char)p[0] | (unsigned char)p[1] << 8);
}

static uint32_t get32(const char *p)
{
    return (uint32_t)get16(p) | (uint32_t)get16(p + 2) << 16;
}

static uint64_t get64(const char *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put64(char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (char)(v >> (8 * i));
}

int m0_bus_decode(const char *p, size_t n, struct m0_bus_msg *msg)
{
    if (n < M0_BUS_HDR || p[0] != 'M' || p[1] != '0' || p[2] != 'p')
        return M0_ERR;
    msg->kind = p[2];
    msg->channel_len = get16(p + 4);
    if (M0_BUS_HDR + msg->channel_len > n)
        return M0_ERR;
    msg->id = get64(p + 8);
    msg->channel = p + M0_BUS_HDR;
    msg->payload = msg->channel + msg->channel_len;
    msg->payload_len = n - M0_BUS_HDR - msg->channel_len;
    if (msg->payload_len > M0_BUS_MAX_PAYLOAD)
        return M0_ERR;
    return M0_OK;
}

void m0_bus_encode(struct m0_buf *out, uint64_t id, const char *channel, size_t clen,
                   const char *frame, size_t flen)
{
    m0_buf_reset(out);
    char *h = m0_buf_reserve(out, M0_BUS_HDR);
    memset(h, 0, M0_BUS_HDR);
    h[0] = 'M';
    h[1] = '0';
    h[2] = 'p';
    h[4] = (char)(clen & 0xff);
    h[5] = (char)(clen >> 8);
    put64(h + 8, id);
    out->len = M0_BUS_HDR;
    m0_buf_append(out, channel, clen);
    m0_buf_append(out, frame, flen);
}

/* Undo a partial m0_bus_create (errno kept). */
static void bus_destroy(struct m0_bus *bus, size_t page_bytes)
{
    int saved = errno;
    for (int i = 0; i < bus->nworkers; i++) {
        if (bus->read_fds != NULL && bus->read_fds[i] > 0)
            close(bus->read_fds[i]);
        if (bus->write_fds != NULL && bus->write_fds[i] > 0)
            close(bus->write_fds[i]);
    }
    if (bus->shared != NULL)
        munmap(bus->shared, page_bytes);
    free(bus->read_fds);
    free(bus->write_fds);
    memset(bus, 0, sizeof *bus);
    errno = saved;
}

int m0_bus_create(struct m0_bus *bus, int n)
{
    memset(bus, 0, sizeof *bus);
    bus->nworkers = n;
    size_t bytes = (sizeof(struct m0_bus_shared) + (size_t)n * sizeof(uint64_t) + 4095) & ~(size_t)4095;
    bus->read_fds = calloc((size_t)n, sizeof *bus->read_fds);
    bus->write_fds = calloc((size_t)n, sizeof *bus->write_fds);
    if (bus->read_fds == NULL || bus->write_fds == NULL)
        goto fail;
    void *page = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        goto fail;
    bus->shared = page;               /* zero-filled by mmap */
    bus->counter = &bus->shared->counter;
    bus->lost = bus->shared->lost;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(&bus->shared->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    if (rc != 0) {
        errno = rc;
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == -1)
            goto fail;
        /* Room for bursts: a few hundred full-size frames queue per worker
         * before publishers start losing events for it. */
        int size = 8 * 1024 * 1024;
        /* net.core.wmem_max caps SO_SNDBUF (often at ~200 KB, a handful of
         * large events); the FORCE variants pass it when we may. */
        if (setsockopt(sv[1], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) == -1)
            setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        if (setsockopt(sv[0], SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) == -1)
            setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
        bus->read_fds[i] = sv[0];
        bus->write_fds[i] = sv[1];
    }
    return M0_OK;
fail:
    bus_destroy(bus, bytes);
    return M0_ERR;
}

uint64_t m0_bus_last_id(void)
{
    if (m0_bus_current == NULL)
        return 0;
    return __atomic_load_n(m0_bus_current->counter, __ATOMIC_SEQ_CST);
}

void m0_bus_mark_lost(int worker, uint64_t id)
{
    if (m0_bus_current == NULL || worker < 0 || worker >= m0_bus_current->nworkers)
        return;
    uint64_t *slot = &m0_bus_current->lost[worker];
    uint64_t seen = __atomic_load_n(slot, __ATOMIC_RELAXED);
    while (seen < id && !__atomic_compare_exchange_n(slot, &seen, id, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
}

uint64_t m0_bus_lost(int worker)
{
    if (m0_bus_current == NULL || worker < 0 || worker >= m0_bus_current->nworkers)
        return 0;
    return __atomic_load_n(&m0_bus_current->lost[worker], __ATOMIC_SEQ_CST);
}

/* The shared lock, if it can be had within 1 ms. A holder that is stopped
 * or preempted longer does not hold up the others: they publish without
 * it, and the workers' reorder window (order.h) puts ids back in order. */
static int lock_briefly(pthread_mutex_t *lock)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    int rc = pthread_mutex_timedlock(lock, &until);
    if (rc == EOWNERDEAD) {        /* a publisher died holding it: nothing to repair */
        pthread_mutex_consistent(lock);
        rc = 0;
    }
    return rc == 0;
}

/* A publishing thread's buffers, kept for its next publish (an event's
 * frame and its datagram) and freed when the thread ends: a thread-local
 * variable alone would leave them behind for every thread that ever
 * published (an application's short-lived threads, an elastic pool's
 * retired ones). */
struct pub_bufs {
    struct m0_buf frame, dgram;
};

static pthread_key_t pub_key;
static pthread_once_t pub_once = PTHREAD_ONCE_INIT;

static void pub_bufs_free(void *p)
{
    struct pub_bufs *b = p;
    m0_buf_free(&b->frame);
    m0_buf_free(&b->dgram);
    free(b);
}

static void pub_key_make(void)
{
    if (pthread_key_create(&pub_key, pub_bufs_free) != 0)
        abort();          /* PTHREAD_KEYS_MAX used up at boot: nothing sensible to do */
}

static struct pub_bufs *pub_bufs(void)
{
    pthread_once(&pub_once, pub_key_make);
    struct pub_bufs *b = pthread_getspecific(pub_key);
    if (b == NULL) {
        b = m0_xcalloc(sizeof *b);
        if (pthread_setspecific(pub_key, b) != 0)
            abort();
    }
    return b;
}

/* The publish of m0_bus_publish and m0_bus_publish_frame: raw, data is
 * the frame itself (a GRIP item); else it is framed as SSE with the id. */
static int publish(const char *channel, size_t clen, const char *event, const char *data, size_t dlen, int raw,
                   uint64_t *id_out)
{
    *id_out = 0;
    if (m0_bus_current == NULL)
        return M0_AGAIN;
    if (m0_sse_channel_error(channel, clen) != NULL)
        return M0_ERR;

    struct pub_bufs *b = pub_bufs();
    struct m0_buf *frame = &b->frame, *dgram = &b->dgram;
    pthread_mutex_t *lock = &m0_bus_current->shared->lock;
    int locked = lock_briefly(lock);
    uint64_t id = __atomic_add_fetch(m0_bus_current->counter, 1, __ATOMIC_SEQ_CST);
    m0_buf_reset(frame);
    if (raw)
        m0_buf_append(frame, data, dlen);
    else
        m0_sse_frame(frame, id, event, data, dlen);
    if (frame->len > M0_BUS_MAX_PAYLOAD) {
        if (locked)
            pthread_mutex_unlock(lock);
        return M0_ERR;         /* the caller checks the size first; belt and braces */
    }
    m0_bus_encode(dgram, id, channel, clen, frame->data, frame->len);
    for (int w = 0; w < m0_bus_current->nworkers; w++) {
        int fd = m0_bus_current->write_fds[w];
        ssize_t sent;
        do
            sent = send(fd, dgram->data, dgram->len, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (sent == -1 && errno == EINTR);
        if (sent != (ssize_t)dgram->len)
            m0_bus_mark_lost(w, id);     /* full (or gone): that worker is told, never waited for */
    }
    if (locked)
        pthread_mutex_unlock(lock);
    if (dgram->cap > 256 * 1024) {
        m0_buf_free(dgram);
        m0_buf_free(frame);
    }
    *id_out = id;
    return M0_OK;
}

int m0_bus_publish(const char *channel, size_t clen, const char *event, const char *data, size_t dlen,
                   uint64_t *id_out)
{
    return publish(channel, clen, event, data, dlen, 0, id_out);
}

int m0_bus_publish_frame(const char *channel, size_t clen, const char *frame, size_t flen, uint64_t *id_out)
{
    return publish(channel, clen, NULL, frame, flen, 1, id_out);
}
