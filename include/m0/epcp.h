/*
 * epcp.h — the body of an EPCP publish (the Extensible Pubsub Control
 * Protocol's "POST {base}/publish/", as gripcontrol and pubcontrol send it
 * to a GRIP proxy's control port) parsed into items.
 *
 *   {"items": [{"channel": "c", "id": "2", "prev-id": "1",
 *               "meta": {"k": "v"},
 *               "http-stream":   {"content": "..." | "content-bin": "BASE64",
 *                                 "content-filters": ["build-id"]},
 *               "http-response": {"code": 200, "reason": "OK",
 *                                 "headers": {"N": "V"} | [["N", "V"], ...],
 *                                 "body": "..." | "body-bin": "BASE64"},
 *               "ws-message":    {"content": "..." | "content-bin": "BASE64",
 *                                 "type": "text"|"binary"|"ping"|"pong"}}, ...]}
 *
 * The formats sit on the item itself (the GRIP spec, and what pubcontrol
 * sends) or inside an item's "formats" object (Pushpin takes both). A
 * format may instead carry "action": "send" (the default), "close" (end the
 * held stream / close the WebSocket, with optional "code" and "reason" for
 * ws-message), "hint" or "refresh" (Pushpin: ask the origin again). Field
 * rules follow Pushpin's (handler/publishitem.cpp, publishformat.cpp): an
 * unknown key is ignored, a known key of the wrong type is an error, and
 * content-bin / body-bin win over content / body. Base64 is strict
 * (m0_grip_base64_decode). Header names must be tokens and values field
 * values (they go on the wire as given; RFC 9110 §5.1, §5.5).
 *
 * Pure: no sockets, no Python. JSON by jansson.
 */
#ifndef M0_EPCP_H
#define M0_EPCP_H

#include "m0/types.h"
#include "m0/buf.h"

#define M0_EPCP_ITEMS_MAX   1000      /* items in one publish */
#define M0_EPCP_HEADERS_MAX 64        /* headers of one http-response */
#define M0_EPCP_META_MAX    16        /* meta pairs of one item */
#define M0_EPCP_ERR_MAX     256       /* bytes of an error text, NUL included */

enum m0_epcp_action { M0_EPCP_SEND, M0_EPCP_CLOSE, M0_EPCP_HINT, M0_EPCP_REFRESH };
enum m0_epcp_ws_type { M0_EPCP_WS_TEXT = 1, M0_EPCP_WS_BINARY = 2, M0_EPCP_WS_PING = 9,
                       M0_EPCP_WS_PONG = 10 };   /* RFC 6455 opcodes */

/* Bytes in the publish's arena, NUL-terminated (they may hold NULs too). */
struct m0_epcp_bytes {
    const char *p;
    size_t len;
};

struct m0_epcp_pair {
    struct m0_epcp_bytes name, value;
};

struct m0_epcp_stream {             /* "http-stream" */
    uint8_t present;
    enum m0_epcp_action action;
    struct m0_epcp_bytes content;   /* send: the bytes to write to held streams */
    uint8_t has_filters;            /* content-filters given (must match the channel's) */
    uint32_t filters;               /* M0_GRIP_F_* (grip.h) */
};

struct m0_epcp_response {           /* "http-response" */
    uint8_t present;
    enum m0_epcp_action action;
    int code;                       /* 200..599; 200 when absent */
    struct m0_epcp_bytes reason;    /* empty: the standard phrase */
    unsigned nheaders;
    struct m0_epcp_pair *headers;
    struct m0_epcp_bytes body;
    uint8_t has_filters;
    uint32_t filters;
};

struct m0_epcp_ws {                 /* "ws-message" */
    uint8_t present;
    enum m0_epcp_action action;
    enum m0_epcp_ws_type type;      /* send: text unless content-bin or "type" says otherwise */
    struct m0_epcp_bytes content;
    int close_code;                 /* close: the code, -1 when absent */
    struct m0_epcp_bytes reason;    /* close: the reason */
    uint8_t has_filters;
    uint32_t filters;
};

struct m0_epcp_item {
    struct m0_epcp_bytes channel;   /* non-empty */
    struct m0_epcp_bytes id, prev_id;
    uint8_t has_id, has_prev_id;
    uint8_t no_seq;                 /* "no-seq": true: not sequenced by prev-id */
    unsigned nmeta;
    struct m0_epcp_pair *meta;      /* publish meta (skip_users, require_sub, sender...) */
    struct m0_epcp_stream stream;
    struct m0_epcp_response response;
    struct m0_epcp_ws ws;
};

struct m0_epcp_publish {
    unsigned nitems;
    struct m0_epcp_item *items;
    struct m0_arena arena;          /* every byte the items point to */
    char err[M0_EPCP_ERR_MAX];      /* on failure: the text for the answer's body */
};

/*
 * Parse a publish body of len bytes into pub (zeroed by the call; free it
 * with m0_epcp_free whatever the result). Returns the HTTP status to answer
 * with: 200 (pub holds 0..M0_EPCP_ITEMS_MAX items, in order, each channel
 * a valid name: sse.h, m0_sse_channel_error), or 400 with pub->err set,
 * Pushpin's wording: "Body is not valid JSON.", "Invalid format: ..." (the
 * item's index and the offending field named; for a channel name the rule
 * it breaks). The body's size is the caller's to bound before reading it
 * (the control port's --grip-max-body: grip_control.h).
 */
int m0_epcp_parse(struct m0_epcp_publish *pub, const char *body, size_t len);
void m0_epcp_free(struct m0_epcp_publish *pub);

#endif
