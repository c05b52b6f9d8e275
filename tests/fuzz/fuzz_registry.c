/*
 * fuzz_registry.c — libFuzzer driver for the subscription registry
 * (include/m0/registry.h), run as a program of operations against a shadow
 * model.
 *
 * Input: byte 0 the journal bound in events (0..7, 0: no journal), byte 1
 * the bound in bytes, byte 2 the starting floor (bits 0-2) and whether the
 * registry is freed with fan-outs still pending (bit 3); then one operation
 * per opcode byte (mod 9) with its operands, over 64 slots and 4 channels:
 *   0 subscribe   slot, channel, Last-Event-ID (0, an id near the newest,
 *                 an id ahead of it, or a small one)
 *   1 unsubscribe slot
 *   2 publish     channel, id gap (ids strictly increase, as the bus hands
 *                 them out), padding bytes (frames of different sizes)
 *   3 fanout      one budget's slice
 *   4 raise_floor an id near the newest
 *   5 set_budget  0..3 subscribers per slice (0: no limit)
 *   6 set_journal_cap
 *   7 drain       fan out until nothing is pending
 *   8 burst       publish one small event on each of 64..512 new channels
 *                 nobody holds, at most 2304 in all (the hash table grows
 *                 at 2048; the eviction of idle channels past 65536 is too
 *                 slow to reach here)
 * At the end everything is drained (unless byte 2 says otherwise) and the
 * registry freed (ASan: no leaks).
 *
 * Asserted, in the delivery callback and after each operation:
 *  - nothing reaches a slot that is not subscribed;
 *  - an event reaches only slots subscribed to its channel, byte for byte
 *    the frame that was published;
 *  - each subscription's event ids strictly increase and stay above the
 *    Last-Event-ID it resumed from; an "event: m0-gap" marker comes only
 *    while subscribing, at most once, before any replayed event;
 *  - a resume that cannot be replayed completely gets the gap marker: when
 *    an event of the channel after Last-Event-ID was not replayed, or when
 *    Last-Event-ID is below the floor (without a journal the caller
 *    raises the floor to the newest id before each resume, as loop.c does);
 *  - once no fan-out is pending, every subscription has received exactly
 *    the events published on its channel after it subscribed (above its
 *    Last-Event-ID): none lost, none twice;
 *  - m0_registry_subscribers, _is_subscribed and _top agree with the
 *    shadow's counts; the fan-out backlog is 0 exactly when none is pending.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz_registry: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                              \
            abort();                                                                     \
        }                                                                                \
    } while (0)

#define NSLOTS 64
#define NCHANS 4
#define MAX_LOG 4096                 /* events kept per channel in the shadow */
/* Burst channels per input: past the 2048 at which the table first grows,
 * far below the 65536 at which idle channels are forgotten (an input
 * reaching that ran at a few execs per second). */
#define MAX_BURST 2304u
#define GAP_PREFIX "event: m0-gap\n"

static const char *const chan_names[NCHANS] = {"news", "c1", "room:42", "news2"};

struct slot {
    int chan;                 /* -1: not subscribed */
    uint64_t resume;          /* Last-Event-ID it subscribed with */
    uint64_t last;            /* newest event id it received */
    unsigned got;             /* live events received (not replayed) */
    unsigned owed;            /* events published on its channel since it subscribed, above resume */
    int gap_seen;
    unsigned replayed;        /* events received while subscribing */
};

/* The events published on one channel, ids increasing. */
struct chan_log {
    uint64_t ids[MAX_LOG];
    uint16_t pads[MAX_LOG];
    size_t n;
};

struct world {
    struct m0_registry *r;
    struct slot slots[NSLOTS];
    struct chan_log *logs;    /* NCHANS of them */
    uint64_t newest;          /* the last id published */
    uint64_t floor;           /* the highest floor given to the registry */
    int subscribing;          /* slot inside m0_registry_subscribe, or -1 */
    size_t budget;
    unsigned replay_events;   /* the journal bound the registry was made with */
    unsigned burst_names;     /* burst channels made so far */
};

/* The frame published with id: its channel, id and a padding of pad bytes. */
static size_t frame_for(char *out, size_t cap, uint64_t id, int chan, size_t pad)
{
    int n = snprintf(out, cap, "id: %llu\nevent: %s\ndata: ", (unsigned long long)id, chan_names[chan]);
    CHECK(n > 0 && (size_t)n + pad + 2 < cap);
    memset(out + n, 'x', pad);
    memcpy(out + (size_t)n + pad, "\n\n", 2);
    return (size_t)n + pad + 2;
}

/* Index of id in the log, or -1. */
static long log_find(const struct chan_log *lg, uint64_t id)
{
    size_t lo = 0, hi = lg->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (lg->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < lg->n && lg->ids[lo] == id ? (long)lo : -1;
}

/* How many logged ids are above id. */
static size_t log_count_above(const struct chan_log *lg, uint64_t id)
{
    size_t lo = 0, hi = lg->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (lg->ids[mid] <= id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lg->n - lo;
}

static void deliver(void *ctx, uint32_t s, uint64_t given, const char *p, size_t n)
{
    struct world *w = ctx;
    static char want[1024];

    CHECK(s < NSLOTS);
    struct slot *sl = &w->slots[s];
    CHECK(sl->chan >= 0);                        /* never to an unsubscribed slot */
    if (n >= strlen(GAP_PREFIX) && memcmp(p, GAP_PREFIX, strlen(GAP_PREFIX)) == 0) {
        CHECK(w->subscribing == (int)s);         /* only while resuming */
        CHECK(!sl->gap_seen && sl->replayed == 0);
        CHECK(sl->resume != 0);
        CHECK(given == 0);                       /* a notice has no id */
        sl->gap_seen = 1;
        return;
    }
    CHECK(n > 4 && memcmp(p, "id: ", 4) == 0);
    uint64_t id = 0;
    size_t k = 4;
    while (k < n && k < 24 && p[k] >= '0' && p[k] <= '9')
        id = id * 10 + (uint64_t)(p[k++] - '0');
    CHECK(k < n && p[k] == '\n');
    CHECK(given == id);                          /* the id handed with it is the frame's */
    const struct chan_log *lg = &w->logs[sl->chan];
    long at = log_find(lg, id);
    CHECK(at >= 0);                              /* an event of its own channel */
    size_t wn = frame_for(want, sizeof want, id, sl->chan, lg->pads[at]);
    CHECK(n == wn && memcmp(p, want, n) == 0);   /* the published frame, intact */
    CHECK(id > sl->last && id > sl->resume);     /* strictly increasing, above the resume point */
    sl->last = id;
    if (w->subscribing == (int)s)
        sl->replayed++;
    else
        sl->got++;
}

static void check_counts(struct world *w)
{
    uint32_t total = 0, per[NCHANS] = {0};
    for (uint32_t s = 0; s < NSLOTS; s++) {
        CHECK(m0_registry_is_subscribed(w->r, s) == (w->slots[s].chan >= 0));
        if (w->slots[s].chan >= 0) {
            total++;
            per[w->slots[s].chan]++;
        }
    }
    CHECK(m0_registry_subscribers(w->r) == total);

    struct m0_channel_stat top[NCHANS + 1];
    size_t k = m0_registry_top(w->r, top, NCHANS + 1);
    size_t busy = 0;
    for (int c = 0; c < NCHANS; c++)
        busy += per[c] > 0;
    CHECK(k == busy);
    for (size_t i = 0; i < k; i++) {
        int c = -1;
        for (int j = 0; j < NCHANS; j++) {
            if (top[i].len == strlen(chan_names[j]) && memcmp(top[i].name, chan_names[j], top[i].len) == 0)
                c = j;
        }
        CHECK(c >= 0 && top[i].subscribers == per[c]);
        if (i > 0)
            CHECK(top[i - 1].subscribers >= top[i].subscribers);
    }
    /* A shorter table keeps the busiest. */
    if (k > 0) {
        struct m0_channel_stat one;
        CHECK(m0_registry_top(w->r, &one, 1) == 1 && one.subscribers == top[0].subscribers);
    }

    int pending = m0_registry_fanout_pending(w->r);
    CHECK((m0_registry_fanout_backlog(w->r) == 0) == !pending);
    if (!pending) {
        /* Every subscription got all it was owed, exactly once. */
        for (uint32_t s = 0; s < NSLOTS; s++) {
            if (w->slots[s].chan >= 0)
                CHECK(w->slots[s].got == w->slots[s].owed);
        }
    }
}

static void drain(struct world *w)
{
    for (int guard = 0; m0_registry_fanout_pending(w->r); guard++) {
        CHECK(guard < 100000);
        m0_registry_fanout(w->r, deliver, w);
    }
}

static void op_subscribe(struct world *w, uint32_t s, int chan, uint64_t resume)
{
    struct slot *sl = &w->slots[s];
    if (sl->chan >= 0)
        return;                    /* the contract: not already subscribed */
    if (w->replay_events == 0) {
        /* No journal: a publish on a channel nobody holds leaves no trace
         * in the registry, so its caller (hold.c) raises the floor to the
         * newest id before every resume. Do as it does. */
        m0_registry_raise_floor(w->r, w->newest);
        if (w->newest > w->floor)
            w->floor = w->newest;
    }
    memset(sl, 0, sizeof *sl);
    sl->chan = chan;
    sl->resume = resume;
    w->subscribing = (int)s;
    m0_registry_subscribe(w->r, s, chan_names[chan], strlen(chan_names[chan]), resume, 0, deliver, w);
    w->subscribing = -1;
    if (resume == 0) {
        CHECK(sl->replayed == 0 && !sl->gap_seen);
        return;
    }
    /* A resume the journal cannot prove complete must say so. */
    size_t expected = log_count_above(&w->logs[chan], resume);
    CHECK(sl->replayed <= expected);
    if (resume < w->floor || sl->replayed < expected)
        CHECK(sl->gap_seen);
}

static void op_publish(struct world *w, int c, uint64_t gap, size_t pad)
{
    static char frame[1024];
    struct chan_log *lg = &w->logs[c];
    if (lg->n == MAX_LOG)
        return;
    w->newest += 1 + gap;          /* ids skipped: published on other channels */
    lg->ids[lg->n] = w->newest;
    lg->pads[lg->n] = (uint16_t)pad;
    lg->n++;
    size_t fn = frame_for(frame, sizeof frame, w->newest, c, pad);
    for (int s = 0; s < NSLOTS; s++) {
        if (w->slots[s].chan == c && w->newest > w->slots[s].resume)
            w->slots[s].owed++;
    }
    size_t got = m0_registry_publish(w->r, chan_names[c], strlen(chan_names[c]), w->newest, frame, fn, deliver, w);
    if (w->budget != 0)
        CHECK(got == 0);
}

static void op_burst(struct world *w, unsigned n)
{
    static const char frame[] = "data: b\n\n";
    char name[32];
    if (n > MAX_BURST - w->burst_names)
        n = MAX_BURST - w->burst_names;
    for (unsigned i = 0; i < n; i++) {
        int len = snprintf(name, sizeof name, "burst-%u", w->burst_names++);
        w->newest++;
        CHECK(m0_registry_publish(w->r, name, (size_t)len, w->newest, frame, sizeof frame - 1, deliver, w) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t jbytes[] = {0, 40, 64, 100, 200, 400, 4096, 1 << 20};
    static const size_t caps[] = {0, 50, 100, 300, 1000, 5000, 1 << 20, 1};
    static struct world w;

    if (size < 3)
        return 0;
    memset(&w, 0, sizeof w);
    w.logs = calloc(NCHANS, sizeof *w.logs);
    CHECK(w.logs != NULL);
    w.floor = data[2] % 8;
    int leave_pending = (data[2] >> 3) & 1;
    w.replay_events = data[0] % 8;
    w.r = m0_registry_new(NSLOTS, w.replay_events, jbytes[data[1] % 8], w.floor);
    w.subscribing = -1;
    for (int s = 0; s < NSLOTS; s++)
        w.slots[s].chan = -1;

    size_t i = 3;
#define ARG() (i < size ? data[i++] : 0)
    while (i < size) {
        uint8_t op = data[i++];
        switch (op % 9) {
        case 0: {
            uint32_t s = ARG() % NSLOTS;
            int c = ARG() % NCHANS;
            uint8_t how = ARG();
            uint64_t resume;
            switch (how & 3) {
            case 0: resume = 0; break;
            case 1: resume = w.newest > (uint64_t)(how >> 2) ? w.newest - (how >> 2) : 1; break;
            case 2: resume = w.newest + 1 + (how >> 2); break;
            default: resume = 1 + (how >> 2); break;
            }
            op_subscribe(&w, s, c, resume);
            break;
        }
        case 1: {
            uint32_t s = ARG() % NSLOTS;
            m0_registry_unsubscribe(w.r, s);
            w.slots[s].chan = -1;
            break;
        }
        case 2: {
            int c = ARG() % NCHANS;
            uint8_t a = ARG();
            size_t pad = (size_t)ARG() * 3 % 700;
            op_publish(&w, c, a % 4, pad);
            break;
        }
        case 3: {
            size_t got = m0_registry_fanout(w.r, deliver, &w);
            if (w.budget != 0)
                CHECK(got <= w.budget);
            break;
        }
        case 4: {
            uint64_t id = w.newest + (ARG() % 3);
            id = id > 0 ? id - 1 : 0;       /* newest - 1 .. newest + 1 */
            m0_registry_raise_floor(w.r, id);
            if (id > w.floor)
                w.floor = id;
            break;
        }
        case 5:
            w.budget = ARG() % 4;
            m0_registry_set_budget(w.r, w.budget);
            break;
        case 6:
            m0_registry_set_journal_cap(w.r, caps[ARG() % 8]);
            break;
        case 7:
            drain(&w);
            break;
        default:
            op_burst(&w, 64u << (ARG() % 4));
            break;
        }
        check_counts(&w);
    }
#undef ARG
    if (!leave_pending) {
        drain(&w);
        check_counts(&w);
    }
    m0_registry_free(w.r);
    free(w.logs);
    return 0;
}
