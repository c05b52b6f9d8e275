/*
 * wsframes.h — the per-loop scratch of the WebSocket holds (wshold.c): the
 * read buffer, what an owning runner queued, and the last event turned
 * into frames. A fan-out hands every subscriber the same event: it is
 * converted once, recognised by its id (which the bus makes unique).
 * Loop thread only.
 */
#ifndef M0_WSFRAMES_H
#define M0_WSFRAMES_H

#include <stdint.h>
#include "m0/buf.h"

struct m0_ext;
struct m0_rt_event;
struct m0_server;

struct m0_ws_scratch {
    char rbuf[64 * 1024];
    struct m0_buf taken;
    uint64_t id;                     /* 0: nothing cached */
    struct m0_buf frames;            /* the event's text (or binary) frames */
    struct m0_buf data;              /* scratch */
};

/* The loop's scratch: an extension (server.h) the composition root
 * registers, made on first use, freed with the loop. */
extern const struct m0_ext m0_ws_scratch_ext;
struct m0_ws_scratch *m0_ws_scratch_of(struct m0_server *s);
/* An SSE event from the engine (rt.h) as WebSocket text frames (binary
 * where the data is not UTF-8), m0-gap notices left out: the scratch's
 * frames, valid until the next call; converted once per event id. */
const struct m0_buf *m0_ws_event_frames(struct m0_ws_scratch *sc, const struct m0_rt_event *ev);

#endif
