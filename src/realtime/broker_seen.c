/*
 * broker_seen.c — the last entries a broker reader read, and the check
 * when it comes back (see broker_seen.h). Pure.
 */
#include <string.h>

#include "m0/broker_seen.h"

uint64_t m0_seen_mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void m0_seen_reset(struct m0_seen *s)
{
    memset(s, 0, sizeof *s);
}

static size_t slot(uint64_t id)
{
    return (size_t)(id % M0_SEEN_MAX);
}

void m0_seen_note(struct m0_seen *s, uint64_t id, uint64_t sum)
{
    s->ring[slot(id)].id = id;
    s->ring[slot(id)].sum = sum;
}

uint64_t m0_seen_begin(struct m0_seen *s, uint64_t position)
{
    /* The remembered run of ids that ends at position: they follow one
     * another in the log (a gap the reader reported breaks the run). */
    uint64_t low = position;
    while (low > 0 && position - low < M0_SEEN_MAX && s->ring[slot(low)].id == low)
        low--;
    s->through = low < position ? position : 0;
    s->at = low;
    return low;
}

int m0_seen_rereading(const struct m0_seen *s, uint64_t *from)
{
    if (s->through == 0)
        return 0;
    *from = s->at;
    return 1;
}

enum m0_seen_verdict m0_seen_recheck(struct m0_seen *s, uint64_t id, uint64_t sum)
{
    if (s->through == 0 || id > s->through)
        return M0_SEEN_SAME;
    if (s->ring[slot(id)].id == id && s->ring[slot(id)].sum != sum) {
        m0_seen_reset(s);
        return M0_SEEN_LOST;
    }
    if (id > s->at)
        s->at = id;
    if (id == s->through)
        s->through = 0;
    return M0_SEEN_SAME;
}

void m0_seen_done(struct m0_seen *s)
{
    s->through = 0;
}
