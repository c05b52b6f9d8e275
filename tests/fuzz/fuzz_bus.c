/*
 * fuzz_bus.c — libFuzzer driver for the bus datagram codec
 * (include/m0/bus.h: m0_bus_decode(), m0_bus_encode()) and the reorder
 * window the loop puts decoded events through (include/m0/order.h).
 *
 * 1. The whole input is decoded as a datagram, as the loop decodes what it
 *    reads from its bus. Asserted: m0_bus_decode() accepts exactly what a
 *    reference decoder written here from the layout in bus.h accepts
 *    ("M0", kind 'p', channel inside the datagram, payload at most
 *    M0_BUS_MAX_PAYLOAD), and when it accepts, every field equals the
 *    reference's and channel and payload lie inside the datagram (ASan
 *    checks the reads). The input is also stretched to a payload of exactly
 *    M0_BUS_MAX_PAYLOAD bytes, or one more, and decoded the same way.
 * 2. The input also gives a publish datagram's fields: id (bytes 0-7), a
 *    channel length (8-9) and the channel and payload (the rest). Asserted:
 *    decoding what m0_bus_encode wrote gives back every field.
 * 3. The input, read as a sequence of (id delta, time step) pairs, drives a
 *    reorder window. Asserted: delivered ids strictly increase; every id
 *    offered at or above the window's next is either delivered or declared
 *    lost (no silent drop); a late id is one already passed; the window
 *    never holds more than its bounds allow.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/buf.h"
#include "m0/bus.h"
#include "m0/order.h"

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
    size_t channel_off, channel_len, payload_off, payload_len;
};

/* The datagram layout of bus.h, decoded independently. Returns 1 when it
 * is well formed. */
static int ref_decode(const uint8_t *p, size_t n, struct ref_msg *m)
{
    if (n < 24 || p[0] != 'M' || p[1] != '0' || p[2] != 'p')
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
    m->id = le(p + 8, 8);
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
    CHECK(msg.id == ref.id);
    CHECK(msg.channel == p + ref.channel_off && msg.channel_len == ref.channel_len);
    CHECK(msg.payload == p + ref.payload_off && msg.payload_len == ref.payload_len);
    CHECK(msg.payload_len <= M0_BUS_MAX_PAYLOAD);
    CHECK(M0_BUS_HDR + msg.channel_len + msg.payload_len == size);
}

static void round_trip(const uint8_t *data, size_t size)
{
    if (size < 10)
        return;
    uint64_t id = le(data, 8);
    size_t rest = size - 10, clen = (size_t)le(data + 8, 2);
    if (clen > rest)
        clen = rest;
    const char *channel = (const char *)data + 10, *payload = channel + clen;
    size_t plen = rest - clen;
    struct m0_buf out = {0};
    m0_bus_encode(&out, id, channel, clen, payload, plen);
    CHECK(out.len == M0_BUS_HDR + clen + plen);
    struct m0_bus_msg msg;
    CHECK(m0_bus_decode(out.data, out.len, &msg) == M0_OK);
    CHECK(msg.kind == 'p' && msg.id == id);
    CHECK(msg.channel_len == clen && memcmp(msg.channel, channel, clen) == 0);
    CHECK(msg.payload_len == plen && memcmp(msg.payload, payload, plen) == 0);
    m0_buf_free(&out);
}

/* The reorder window against its contract (see the file comment, 3). */
static void reorder(const uint8_t *data, size_t size)
{
    struct m0_order o;
    struct m0_order_item it;
    uint64_t base = 1000, now = 1, last = 0, window = 1 + (size ? data[0] % 50 : 0);
    uint8_t seen[512] = {0};           /* ids base..base+511: 1 offered, 2 delivered, 3 lost */
    m0_order_init(&o, base);
    for (size_t i = 1; i + 1 < size; i += 2) {
        uint64_t id = base + data[i] % 512;
        now += data[i + 1] % 8;
        uint64_t next_before = o.next;
        enum m0_order_verdict v = m0_order_offer(&o, id, "x", 1, now);
        if (v == M0_ORDER_LATE) {
            CHECK(id < next_before || seen[id - base] != 0);   /* passed, or already held/delivered */
        } else if (seen[id - base] == 0) {
            seen[id - base] = 1;
        }
        if (v == M0_ORDER_NOW) {
            CHECK(id > last);
            last = id;
            seen[id - base] = 2;
        }
        for (;;) {
            while (m0_order_pop(&o, &it)) {
                CHECK(it.id > last);
                last = it.id;
                seen[it.id - base] = 2;
                free(it.data);
            }
            uint64_t lost = m0_order_expire(&o, now, window);
            if (lost == 0)
                break;
            for (uint64_t k = last + 1; k <= lost; k++) {
                if (k >= base && seen[k - base] != 2)
                    seen[k - base] = 3;
            }
            CHECK(lost >= last);
            last = lost;
        }
        CHECK(o.n <= M0_ORDER_MAX_HELD + 1);
    }
    /* Every id offered at or above where the window started was delivered,
     * declared lost, or is still held (above last). */
    for (size_t k = 0; k < 512; k++) {
        if (seen[k] == 1 && base + k <= last)
            CHECK(0 && "an id was dropped silently");
    }
    m0_order_free(&o);
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
    reorder(data, size);
    return 0;
}
