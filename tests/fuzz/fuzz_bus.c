/*
 * fuzz_bus.c — libFuzzer driver for the bus datagram codec
 * (include/m0/bus.h): m0_bus_decode() and m0_bus_encode_hold().
 *
 * 1. The whole input is decoded as a datagram, as the loop decodes what it
 *    reads from its bus. Asserted: m0_bus_decode() accepts exactly what a
 *    reference decoder written here from the layout in bus.h accepts
 *    ("M0", kind 'p' or 'h', channel inside the datagram, payload at most
 *    M0_BUS_MAX_PAYLOAD, a hold's payload is its 4-byte pid), and when it
 *    accepts, every field equals the reference's and channel and payload
 *    lie inside the datagram (ASan checks the reads).
 *    The input is also stretched to a payload of exactly
 *    M0_BUS_MAX_PAYLOAD bytes, or one more, and decoded the same way.
 * 2. The input also gives a hold frame's fields: slot (bytes 0-3), gen
 *    (4-7), Last-Event-ID (8-15), pid (16-19), channel (the rest, at most
 *    65535 bytes: the length field is 16 bits). Asserted: encode writes
 *    exactly M0_BUS_HDR + channel + 4 bytes into a buffer of that size, and
 *    decoding it gives back every field.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/bus.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "fuzz_bus: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                         \
            abort();                                                                \
        }                                                                           \
    } while (0)

/* Little-endian load of k bytes. */
static uint64_t le(const uint8_t *p, int k)
{
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

struct ref_msg {
    char kind;
    uint64_t id;
    uint32_t slot, gen, pid;
    size_t channel_off, channel_len, payload_off, payload_len;
};

/* The datagram layout of bus.h, decoded independently. Returns 1 when it
 * is well formed. */
static int ref_decode(const uint8_t *p, size_t n, struct ref_msg *m)
{
    if (n < 24 || p[0] != 'M' || p[1] != '0' || (p[2] != 'p' && p[2] != 'h'))
        return 0;
    m->kind = (char)p[2];
    m->channel_len = (size_t)le(p + 4, 2);
    if (n - 24 < m->channel_len)
        return 0;
    m->channel_off = 24;
    m->payload_off = 24 + m->channel_len;
    m->payload_len = n - m->payload_off;
    if (m->payload_len > 65536)
        return 0;
    if (m->kind == 'h' && m->payload_len != 4)
        return 0;
    m->id = le(p + 8, 8);
    m->slot = (uint32_t)le(p + 16, 4);
    m->gen = (uint32_t)le(p + 20, 4);
    m->pid = m->kind == 'h' ? (uint32_t)le(p + m->payload_off, 4) : 0;
    return 1;
}

static void decode_any(const uint8_t *data, size_t size)
{
    struct m0_bus_msg msg;
    struct ref_msg ref;
    const char *p = (const char *)data;

    memset(&msg, 0xa5, sizeof msg);
    int rc = m0_bus_decode(p, size, &msg);
    int want = ref_decode(data, size, &ref);
    CHECK(rc == M0_OK || rc == M0_ERR);
    CHECK((rc == M0_OK) == want);
    if (rc != M0_OK)
        return;
    CHECK(msg.kind == ref.kind);
    CHECK(msg.id == ref.id && msg.slot == ref.slot && msg.gen == ref.gen && msg.pid == ref.pid);
    CHECK(msg.channel == p + ref.channel_off && msg.channel_len == ref.channel_len);
    CHECK(msg.payload == p + ref.payload_off && msg.payload_len == ref.payload_len);
    CHECK(msg.payload_len <= M0_BUS_MAX_PAYLOAD);
    CHECK(M0_BUS_HDR + msg.channel_len + msg.payload_len == size);
}

static void round_trip(const uint8_t *data, size_t size)
{
    if (size < 20)
        return;
    uint32_t slot = (uint32_t)le(data, 4), gen = (uint32_t)le(data + 4, 4);
    uint64_t last_id = le(data + 8, 8);
    uint32_t pid = (uint32_t)le(data + 16, 4);
    const char *channel = (const char *)data + 20;
    size_t clen = size - 20 > 65535 ? 65535 : size - 20;

    size_t want = M0_BUS_HDR + clen + 4;
    char *out = malloc(want);              /* exact size: ASan sees any overrun */
    CHECK(out != NULL);
    size_t n = m0_bus_encode_hold(out, slot, gen, last_id, channel, clen, pid);
    CHECK(n == want);

    struct m0_bus_msg msg;
    CHECK(m0_bus_decode(out, n, &msg) == M0_OK);
    CHECK(msg.kind == 'h');
    CHECK(msg.slot == slot && msg.gen == gen && msg.id == last_id && msg.pid == pid);
    CHECK(msg.channel_len == clen && memcmp(msg.channel, channel, clen) == 0);
    CHECK(msg.payload_len == 4);
    /* The reference agrees on the encoder's bytes too. */
    struct ref_msg ref;
    CHECK(ref_decode((const uint8_t *)out, n, &ref) && ref.slot == slot && ref.pid == pid);
    free(out);
}

/* Inputs stay far below the 64 KiB payload bound; this stretches one to
 * a datagram whose payload is exactly at it, or one byte past it
 * (bit 0 of byte 3, the header's reserved byte), zero-filled. */
static void decode_stretched(const uint8_t *data, size_t size)
{
    if (size < M0_BUS_HDR || data[0] != 'M' || data[1] != '0')
        return;
    size_t total = M0_BUS_HDR + (size_t)le(data + 4, 2) + M0_BUS_MAX_PAYLOAD + (data[3] & 1);
    size_t keep = size < total ? size : total;
    uint8_t *big = malloc(total);              /* exact size: ASan sees any overread */
    CHECK(big != NULL);
    memcpy(big, data, keep);
    memset(big + keep, 0, total - keep);
    decode_any(big, total);
    free(big);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode_any(data, size);
    decode_stretched(data, size);
    round_trip(data, size);
    return 0;
}
