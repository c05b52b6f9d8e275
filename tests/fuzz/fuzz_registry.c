/*
 * fuzz_registry.c — libFuzzer driver for the subscription registry
 * (include/m0/registry.h), run as a program of operations against a shadow
 * model.
 *
 * Input: byte 0 the journal bound in events (0..7, 0: no journal), byte 1
 * the bound in bytes, byte 2 the starting floor; then one operation per
 * opcode byte (low 3 bits) with its operands, over 64 slots and 4 channels:
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
 * At the end everything is drained, the registry freed (ASan: no leaks).
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
#define MAX_EVENTS 4096
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

struct event {
    int chan;
    size_t pad;
};

struct world {
    struct m0_registry *r;
    struct slot slots[NSLOTS];
    struct event *events;     /* by id; id 0 unused */
    uint64_t newest;          /* the last id published */
    uint64_t floor;           /* the highest floor given to the registry */
    int subscribing;          /* slot inside m0_registry_subscribe, or -1 */
    size_t budget;
    unsigned replay_events;   /* the journal bound the registry was made with */
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

static void deliver(void *ctx, uint32_t s, const char *p, size_t n)
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
        sl->gap_seen = 1;
        return;
    }
    char head[32];
    size_t hn = n < sizeof head - 1 ? n : sizeof head - 1;
    memcpy(head, p, hn);
    head[hn] = '\0';
    unsigned long long id = 0;
    CHECK(sscanf(head, "id: %llu\n", &id) == 1);
    CHECK(id >= 1 && id <= w->newest);
    const struct event *e = &w->events[id];
    CHECK(e->chan == sl->chan);                  /* its own channel only */
    size_t wn = frame_for(want, sizeof want, id, e->chan, e->pad);
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
         * in the registry, so its caller (loop.c) raises the floor to the
         * newest id before every resume. Do as it does. */
        m0_registry_raise_floor(w->r, w->newest);
        if (w->newest > w->floor)
            w->floor = w->newest;
    }
    memset(sl, 0, sizeof *sl);
    sl->chan = chan;
    sl->resume = resume;
    w->subscribing = (int)s;
    m0_registry_subscribe(w->r, s, chan_names[chan], strlen(chan_names[chan]), resume, deliver, w);
    w->subscribing = -1;
    if (resume == 0) {
        CHECK(sl->replayed == 0 && !sl->gap_seen);
        return;
    }
    /* A resume the journal cannot prove complete must say so. */
    int missing = resume < w->floor;
    unsigned expected = 0;
    for (uint64_t id = resume + 1; id <= w->newest; id++)
        expected += w->events[id].chan == chan;
    if (sl->replayed < expected)
        missing = 1;
    CHECK(sl->replayed <= expected);
    if (missing)
        CHECK(sl->gap_seen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t jbytes[] = {0, 40, 64, 100, 200, 400, 4096, 1 << 20};
    static const size_t caps[] = {0, 50, 100, 300, 1000, 5000, 1 << 20, 1};
    static char frame[1024];
    struct world w;

    if (size < 3)
        return 0;
    memset(&w, 0, sizeof w);
    w.floor = data[2] % 8;
    w.replay_events = data[0] % 8;
    w.r = m0_registry_new(NSLOTS, w.replay_events, jbytes[data[1] % 8], w.floor);
    w.events = calloc(MAX_EVENTS + 1, sizeof *w.events);
    CHECK(w.events != NULL);
    for (size_t k = 0; k <= MAX_EVENTS; k++)
        w.events[k].chan = -1;              /* ids never published here */
    w.subscribing = -1;
    for (int s = 0; s < NSLOTS; s++)
        w.slots[s].chan = -1;

    size_t i = 3;
#define ARG() (i < size ? data[i++] : 0)
    while (i < size) {
        uint8_t op = data[i++];
        switch (op & 7) {
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
            if (w.newest + 1 + a % 4 > MAX_EVENTS)
                break;
            w.newest += 1 + a % 4;          /* ids skipped: published to other workers' channels */
            w.events[w.newest] = (struct event){.chan = c, .pad = pad};
            size_t fn = frame_for(frame, sizeof frame, w.newest, c, pad);
            for (int s = 0; s < NSLOTS; s++) {
                if (w.slots[s].chan == c && w.newest > w.slots[s].resume)
                    w.slots[s].owed++;
            }
            size_t got = m0_registry_publish(w.r, chan_names[c], strlen(chan_names[c]), w.newest, frame, fn,
                                             deliver, &w);
            if (w.budget != 0)
                CHECK(got == 0);
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
        default:
            drain(&w);
            break;
        }
        check_counts(&w);
    }
#undef ARG
    drain(&w);
    check_counts(&w);
    m0_registry_free(w.r);
    free(w.events);
    return 0;
}
