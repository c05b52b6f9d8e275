/*
 * bus.c — the broadcast bus: datagram codec, socketpairs and the shared
 * event-id counter.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "m0/buf.h"
#include "m0/bus.h"
#include "m0/sse.h"

struct m0_bus *m0_bus_current;
int m0_bus_index = -1;

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

static void put32(char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (char)(v >> (8 * i));
}

static void put64(char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (char)(v >> (8 * i));
}

int m0_bus_decode(const char *p, size_t n, struct m0_bus_msg *msg)
{
    if (n < M0_BUS_HDR || p[0] != 'M' || p[1] != '0')
        return M0_ERR;
    msg->kind = p[2];
    if (msg->kind != 'p' && msg->kind != 'h')
        return M0_ERR;
    msg->channel_len = get16(p + 4);
    if (M0_BUS_HDR + msg->channel_len > n)
        return M0_ERR;
    msg->id = get64(p + 8);
    msg->slot = get32(p + 16);
    msg->gen = get32(p + 20);
    msg->channel = p + M0_BUS_HDR;
    msg->payload = msg->channel + msg->channel_len;
    msg->payload_len = n - M0_BUS_HDR - msg->channel_len;
    if (msg->payload_len > M0_BUS_MAX_PAYLOAD)
        return M0_ERR;
    msg->pid = 0;
    if (msg->kind == 'h') {
        if (msg->payload_len != 4)
            return M0_ERR;
        msg->pid = get32(msg->payload);
    }
    return M0_OK;
}

size_t m0_bus_encode_hold(char *out, uint32_t slot, uint32_t gen, uint64_t last_id,
                          const char *channel, size_t channel_len, uint32_t pid)
{
    memset(out, 0, M0_BUS_HDR);
    out[0] = 'M';
    out[1] = '0';
    out[2] = 'h';
    out[4] = (char)(channel_len & 0xff);
    out[5] = (char)(channel_len >> 8);
    put64(out + 8, last_id);
    put32(out + 16, slot);
    put32(out + 20, gen);
    memcpy(out + M0_BUS_HDR, channel, channel_len);
    put32(out + M0_BUS_HDR + channel_len, pid);
    return M0_BUS_HDR + channel_len + 4;
}

int m0_bus_create(struct m0_bus *bus, int n)
{
    memset(bus, 0, sizeof *bus);
    bus->nworkers = n;
    bus->read_fds = calloc((size_t)n, sizeof *bus->read_fds);
    bus->write_fds = calloc((size_t)n, sizeof *bus->write_fds);
    if (bus->read_fds == NULL || bus->write_fds == NULL)
        return M0_ERR;
    size_t bytes = (sizeof(struct m0_bus_shared) + (size_t)n * sizeof(uint64_t) + 4095) & ~(size_t)4095;
    void *page = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return M0_ERR;
    bus->shared = page;               /* zero-filled by mmap */
    bus->counter = &bus->shared->counter;
    bus->lost = bus->shared->lost;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(&bus->shared->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    if (rc != 0)
        return M0_ERR;
    for (int i = 0; i < n; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == -1)
            return M0_ERR;
        /* Room for bursts: a few hundred full-size frames queue per worker
         * before publishers start dropping (fan-out is best effort). */
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

static void put16(char *p, uint16_t v)
{
    p[0] = (char)(v & 0xff);
    p[1] = (char)(v >> 8);
}

/* One datagram to one worker's bus: non-blocking, then up to 10 ms of
 * waiting for room, unless that wait could never end (this thread is that
 * worker's loop, which drains the bus only when we return). */
static int send_to_worker(int worker, const char *p, size_t n, int own_loop)
{
    int fd = m0_bus_current->write_fds[worker];
    for (int tries = 0; tries < 10; tries++) {
        ssize_t w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w == (ssize_t)n)
            return M0_OK;
        if (w == -1 && errno == EINTR)
            continue;
        if (w == -1 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS)
            return M0_ERR;
        if (worker == m0_bus_index && own_loop)
            return M0_ERR;
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        poll(&pfd, 1, 1);
    }
    return M0_ERR;
}

int m0_bus_publish(const char *channel, size_t clen, const char *event, const char *data, size_t dlen,
                   int own_loop, uint64_t *id_out)
{
    static __thread struct m0_buf dgram;
    *id_out = 0;
    if (m0_bus_current == NULL)
        return M0_AGAIN;
    if (m0_sse_channel_error(channel, clen) != NULL)
        return M0_ERR;

    pthread_mutex_t *lock = &m0_bus_current->shared->lock;
    int rc = pthread_mutex_lock(lock);
    if (rc == EOWNERDEAD)      /* a publisher died holding it: the counter is still sound */
        pthread_mutex_consistent(lock);
    /* Under the lock, ids reach every bus in increasing order: a worker never
     * sees id N+1 before N, so its resume filter and journal stay ordered. */
    uint64_t id = ++*m0_bus_current->counter;
    m0_buf_reset(&dgram);
    char *h = m0_buf_reserve(&dgram, M0_BUS_HDR);
    memset(h, 0, M0_BUS_HDR);
    h[0] = 'M';
    h[1] = '0';
    h[2] = 'p';
    put16(h + 4, (uint16_t)clen);
    put64(h + 8, id);
    dgram.len = M0_BUS_HDR;
    m0_buf_append(&dgram, channel, clen);
    m0_sse_frame(&dgram, id, event, data, dlen);
    if (dgram.len - M0_BUS_HDR - clen > M0_BUS_MAX_PAYLOAD) {
        pthread_mutex_unlock(lock);
        return M0_ERR;         /* the caller checks the size first; belt and braces */
    }
    for (int w = 0; w < m0_bus_current->nworkers; w++) {
        if (send_to_worker(w, dgram.data, dgram.len, own_loop) != M0_OK)
            m0_bus_mark_lost(w, id);
    }
    pthread_mutex_unlock(lock);
    if (dgram.cap > 256 * 1024)
        m0_buf_free(&dgram);
    *id_out = id;
    return M0_OK;
}
