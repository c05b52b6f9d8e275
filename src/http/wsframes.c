/*
 * wsframes.c — the WebSocket holds' per-loop scratch and the event → frames
 * conversion, done once per event of a fan-out (wsframes.h).
 */
#include <stdlib.h>
#include <string.h>

#include "m0/conn.h"
#include "m0/sse.h"
#include "m0/ws.h"
#include "m0/wsframes.h"

struct m0_ws_scratch *m0_ws_scratch_of(struct m0_server *s)
{
    if (s->ws == NULL) {
        struct m0_ws_scratch *sc = m0_xmalloc(sizeof *sc);
        memset(sc, 0, sizeof *sc);
        s->ws = sc;
    }
    return s->ws;
}

void m0_ws_scratch_free(struct m0_server *s)
{
    struct m0_ws_scratch *sc = s->ws;
    if (sc == NULL)
        return;
    m0_buf_free(&sc->taken);
    m0_buf_free(&sc->frames);
    m0_buf_free(&sc->data);
    free(sc);
    s->ws = NULL;
}

const struct m0_buf *m0_ws_event_frames(struct m0_ws_scratch *cache, const char *frame, size_t n)
{
    /* The bus frames every event with its id first ("id: N"). */
    uint64_t id = 0;
    if (n > 4 && memcmp(frame, "id: ", 4) == 0) {
        const char *eol = memchr(frame + 4, '\n', n - 4);
        if (eol != NULL)
            id = m0_sse_parse_last_id(frame + 4, (size_t)(eol - frame - 4));
        if (id == UINT64_MAX)
            id = 0;
    }
    if (id != 0 && id == cache->id)
        return &cache->frames;
    cache->id = 0;
    m0_buf_reset(&cache->frames);
    size_t off = 0;
    while (off < n) {
        int fire;
        const char *ev;
        size_t evl;
        m0_buf_reset(&cache->data);
        size_t took = m0_sse_event_data(frame + off, n - off, &cache->data, &fire, &ev, &evl);
        if (took == 0)
            break;
        off += took;
        /* m0-gap notices are for resuming EventSources: a socket has no
         * Last-Event-ID to resume from, so they are not its messages. */
        if (!fire || (evl == 6 && memcmp(ev, "m0-gap", 6) == 0))
            continue;
        int op = m0_ws_utf8_valid(cache->data.data, cache->data.len) ? M0_WS_TEXT : M0_WS_BINARY;
        m0_ws_frame(&cache->frames, op, cache->data.data, cache->data.len);
    }
    cache->id = id;
    if (cache->data.cap > 256 * 1024)
        m0_buf_free(&cache->data);
    return &cache->frames;
}
