/*
 * bus.c — the broadcast bus: datagram codec, socketpairs and the shared
 * event-id counter.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "m0/bus.h"

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
    return M0_OK;
}

size_t m0_bus_encode_hold(char *out, uint32_t slot, uint32_t gen, uint64_t last_id,
                          const char *channel, size_t channel_len)
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
    return M0_BUS_HDR + channel_len;
}

int m0_bus_create(struct m0_bus *bus, int n)
{
    memset(bus, 0, sizeof *bus);
    bus->nworkers = n;
    bus->read_fds = calloc((size_t)n, sizeof *bus->read_fds);
    bus->write_fds = calloc((size_t)n, sizeof *bus->write_fds);
    if (bus->read_fds == NULL || bus->write_fds == NULL)
        return M0_ERR;
    size_t bytes = ((size_t)(n + 1) * sizeof(uint64_t) + 4095) & ~(size_t)4095;
    void *page = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return M0_ERR;
    bus->counter = page;
    bus->lost = bus->counter + 1;     /* zero-filled by mmap */
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

uint64_t m0_bus_next_id(void)
{
    if (m0_bus_current == NULL)
        return 0;
    return __atomic_add_fetch(m0_bus_current->counter, 1, __ATOMIC_SEQ_CST);
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
