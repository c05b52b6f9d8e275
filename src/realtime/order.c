/*
 * order.c — the bus's reorder window (see order.h).
 */
#include <stdlib.h>
#include <string.h>

#include "m0/buf.h"
#include "m0/order.h"

void m0_order_init(struct m0_order *o, uint64_t next)
{
    memset(o, 0, sizeof *o);
    o->next = next;
}

void m0_order_free(struct m0_order *o)
{
    for (size_t i = 0; i < o->n; i++)
        free(o->held[i].data);
    free(o->held);
    memset(o, 0, sizeof *o);
}

enum m0_order_verdict m0_order_offer(struct m0_order *o, uint64_t id, const char *p, size_t n, uint64_t now)
{
    if (o->next == 0)
        o->next = id;
    if (id < o->next) {
        o->late++;
        return M0_ORDER_LATE;
    }
    if (id == o->next) {
        o->next++;
        return M0_ORDER_NOW;
    }
    /* Ahead of a hole: insert in id order (arrivals are nearly sorted, so
     * search from the end). */
    size_t i = o->n;
    while (i > 0 && o->held[i - 1].id > id)
        i--;
    if (i > 0 && o->held[i - 1].id == id) {
        o->late++;
        return M0_ORDER_LATE;
    }
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 16;
        o->held = m0_xrealloc(o->held, o->cap * sizeof *o->held);
    }
    memmove(&o->held[i + 1], &o->held[i], (o->n - i) * sizeof *o->held);
    o->held[i].id = id;
    o->held[i].len = n;
    o->held[i].data = m0_xmalloc(n ? n : 1);
    memcpy(o->held[i].data, p, n);
    o->n++;
    o->bytes += n;
    if (o->hole_since == 0)
        o->hole_since = now ? now : 1;
    return M0_ORDER_HELD;
}

int m0_order_pop(struct m0_order *o, struct m0_order_item *it)
{
    if (o->n == 0 || o->held[0].id != o->next)
        return 0;
    *it = o->held[0];
    o->n--;
    o->bytes -= it->len;
    memmove(&o->held[0], &o->held[1], o->n * sizeof *o->held);
    o->next++;
    if (o->n == 0)
        o->hole_since = 0;
    return 1;
}

uint64_t m0_order_expire(struct m0_order *o, uint64_t now, uint64_t window)
{
    if (o->n == 0 || o->held[0].id == o->next)
        return 0;
    uint64_t first = o->held[0].id;
    int over = o->n > M0_ORDER_MAX_HELD || o->bytes > M0_ORDER_MAX_BYTES;
    if (!over && now - o->hole_since < window)
        return 0;
    o->next = first;
    o->hole_since = now ? now : 1;     /* the next hole (if any) waits afresh */
    return first - 1;
}

uint64_t m0_order_deadline(const struct m0_order *o, uint64_t window)
{
    return o->n == 0 ? 0 : o->hole_since + window;
}
