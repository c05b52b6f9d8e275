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
