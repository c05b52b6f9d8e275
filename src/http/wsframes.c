/*
 * wsframes.c — the WebSocket holds' per-loop scratch and the event → frames
 * conversion, done once per event of a fan-out (wsframes.h).
 */
#include <stdlib.h>
#include <string.h>

#include "m0/rt.h"
#include "m0/server.h"
#include "m0/sse.h"
#include "m0/ws.h"
#include "m0/wsframes.h"

static void *scratch_init(struct m0_server *s)
{
    (void)s;
    struct m0_ws_scratch *sc = m0_xmalloc(sizeof *sc);
    memset(sc, 0, sizeof *sc);
    return sc;
}

static void scratch_fini(struct m0_server *s, void *state)
{
    struct m0_ws_scratch *sc = state;
    (void)s;
    m0_buf_free(&sc->taken);
    m0_buf_free(&sc->frames);
    m0_buf_free(&sc->data);
    free(sc);
}

const struct m0_ext m0_ws_scratch_ext = {.name = "websocket-scratch", .init = scratch_init, .fini = scratch_fini};

struct m0_ws_scratch *m0_ws_scratch_of(struct m0_server *s)
{
    return m0_ext_of(s, &m0_ws_scratch_ext);
}

const struct m0_buf *m0_ws_event_frames(struct m0_ws_scratch *cache, const struct m0_rt_event *ev)
{
    const char *frame = ev->frame;
    size_t n = ev->n;
    uint64_t id = ev->id;     /* the bus makes it unique: one conversion per event */
    if (id != 0 && id == cache->id)
        return &cache->frames;
    cache->id = 0;
    m0_buf_reset(&cache->frames);
    size_t off = 0;
    while (off < n) {
        int fire;
        const char *name;
        size_t evl;
        m0_buf_reset(&cache->data);
        size_t took = m0_sse_event_data(frame + off, n - off, &cache->data, &fire, &name, &evl);
        if (took == 0)
            break;
        off += took;
        /* m0-gap notices are for resuming EventSources: a socket has no
         * Last-Event-ID to resume from, so they are not its messages. */
        if (!fire || (evl == 6 && memcmp(name, "m0-gap", 6) == 0))
            continue;
        int op = m0_ws_utf8_valid(cache->data.data, cache->data.len) ? M0_WS_TEXT : M0_WS_BINARY;
        m0_ws_frame(&cache->frames, op, cache->data.data, cache->data.len);
    }
    cache->id = id;
    if (cache->data.cap > 256 * 1024)
        m0_buf_free(&cache->data);
    return &cache->frames;
}
