/*
 * sse.c — SSE event framing and channel-name rules.
 */
#include <stdio.h>
#include <string.h>

#include "m0/sse.h"

const char *m0_sse_channel_error(const char *name, size_t len)
{
    if (len == 0)
        return "empty channel name";
    if (len > M0_CHANNEL_MAX)
        return "channel name longer than 200 bytes";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c >= 0x7f)
            return "channel names are printable ASCII";
    }
    if (len >= 3 && memcmp(name, "m0.", 3) == 0)
        return "the m0. channel namespace is reserved";
    return NULL;
}

void m0_sse_frame(struct m0_buf *b, uint64_t id, const char *event, const char *data, size_t len)
{
    if (id != 0)
        m0_buf_printf(b, "id: %llu\n", (unsigned long long)id);
    if (event != NULL)
        m0_buf_printf(b, "event: %s\n", event);
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && data[i] != '\r' && data[i] != '\n')
            continue;
        m0_buf_puts(b, "data: ");
        m0_buf_append(b, data + start, i - start);
        m0_buf_puts(b, "\n");
        if (i < len && data[i] == '\r' && i + 1 < len && data[i + 1] == '\n')
            i++;
        start = i + 1;
    }
    m0_buf_puts(b, "\n");
}

uint64_t m0_sse_parse_last_id(const char *v, size_t len)
{
    uint64_t id = 0;
    if (len == 0)
        return 0;
    if (len > 20)
        return UINT64_MAX;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return UINT64_MAX;
        uint64_t d = (uint64_t)(v[i] - '0');
        /* Saturate: checking "id * 10 + d < id" afterwards misses wraps
         * by less than 2^64 (3 * 10^19 wrapped to a smaller valid id). */
        if (id > (UINT64_MAX - d) / 10)
            return UINT64_MAX;
        id = id * 10 + d;
    }
    return id;
}

size_t m0_sse_event_data(const char *p, size_t n, struct m0_buf *data, int *dispatch, const char **event,
                         size_t *event_len)
{
    size_t start_len = data->len;
    size_t i = 0;
    *dispatch = 0;
    *event = "message";
    *event_len = 7;
    while (i < n) {
        /* One line: [i, eol), then its terminator. */
        size_t eol = i;
        while (eol < n && p[eol] != '\n' && p[eol] != '\r')
            eol++;
        if (eol == n)
            break;                    /* an unterminated line: no complete event */
        size_t next = eol + 1;
        if (p[eol] == '\r' && next < n && p[next] == '\n')
            next++;
        if (eol == i) {
            /* Blank line: dispatch. The buffer's last LF goes. */
            if (data->len > start_len) {
                data->len--;
                *dispatch = 1;
            }
            if (*event_len == 0) {
                *event = "message";   /* an empty event field is the default type */
                *event_len = 7;
            }
            return next;
        }
        if (p[i] != ':') {
            const char *colon = memchr(p + i, ':', eol - i);
            size_t flen = colon ? (size_t)(colon - (p + i)) : eol - i;
            const char *v = colon ? colon + 1 : p + eol;
            if (v < p + eol && *v == ' ')
                v++;
            size_t vlen = (size_t)(p + eol - v);
            if (flen == 4 && memcmp(p + i, "data", 4) == 0) {
                m0_buf_append(data, v, vlen);
                m0_buf_append(data, "\n", 1);
            } else if (flen == 5 && memcmp(p + i, "event", 5) == 0) {
                *event = v;
                *event_len = vlen;
            }
        }
        i = next;
    }
    data->len = start_len;            /* incomplete: nothing was read */
    return 0;
}
