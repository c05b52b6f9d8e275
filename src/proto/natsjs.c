/*
 * natsjs.c — channel names as NATS subject tokens, the stream's names, and
 * the message-get answer (see natsjs.h). Pure.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "m0/base64.h"
#include "m0/natsjs.h"
#include "m0/sse.h"

static const char HEX[] = "0123456789ABCDEF";

/* A byte a token carries as it is. */
static int plain(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;                  /* lowercase too: one spelling per name */
}

void m0_nats_token(struct m0_buf *out, const char *p, size_t n)
{
    if (n == 0)
        return;
    char *w = m0_buf_reserve(out, 3 * n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (plain(c)) {
            w[k++] = (char)c;
        } else {
            w[k++] = '%';
            w[k++] = HEX[c >> 4];
            w[k++] = HEX[c & 15];
        }
    }
    out->len += k;
}

int m0_nats_untoken(const char *tok, size_t n, char *out, size_t cap, size_t *len)
{
    size_t k = 0;
    if (n == 0)
        return M0_ERR;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)tok[i];
        if (k == cap)
            return M0_ERR;
        if (plain(c)) {
            out[k++] = (char)c;
            continue;
        }
        if (c != '%' || n - i < 3)
            return M0_ERR;
        int hi = hexval((unsigned char)tok[i + 1]), lo = hexval((unsigned char)tok[i + 2]);
        if (hi < 0 || lo < 0 || plain((unsigned char)(hi << 4 | lo)))
            return M0_ERR;
        out[k++] = (char)(hi << 4 | lo);
        i += 2;
    }
    *len = k;
    return M0_OK;
}

void m0_nats_names(const char *prefix, char *subject_prefix, size_t pcap, char *stream, size_t scap)
{
    size_t n = strlen(prefix);
    if (n > 1 && prefix[n - 1] == ':')
        n--;                    /* "m0:" (Redis's key style) is the token "m0" */
    struct m0_buf b = {0};
    m0_nats_token(&b, prefix, n);
    snprintf(subject_prefix, pcap, "%.*s", (int)b.len, b.data);
    snprintf(stream, scap, "%.*s-events", (int)b.len, b.data);
    m0_buf_free(&b);
}

void m0_nats_subject(struct m0_buf *out, const char *sprefix, const char *channel, size_t clen)
{
    m0_buf_puts(out, sprefix);
    m0_buf_append(out, ".", 1);
    m0_nats_token(out, channel, clen);
}

int m0_nats_channel(const char *subject, size_t slen, const char *sprefix, char *out, size_t cap, size_t *len)
{
    size_t pl = strlen(sprefix);
    if (slen < pl + 2 || memcmp(subject, sprefix, pl) != 0 || subject[pl] != '.')
        return M0_ERR;
    if (m0_nats_untoken(subject + pl + 1, slen - pl - 1, out, cap, len) != M0_OK)
        return M0_ERR;          /* a '.' in it is a second token: not a channel of ours */
    return m0_sse_channel_error(out, *len) == NULL ? M0_OK : M0_ERR;
}

static int bad(struct m0_nats_got *got, const char *why)
{
    snprintf(got->why, sizeof got->why, "%s", why);
    return M0_ERR;
}

/* An integer member that is a JSON integer in [lo, hi]. */
static int int_member(json_t *o, const char *name, json_int_t lo, json_int_t hi, json_int_t *out)
{
    json_t *v = json_object_get(o, name);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return M0_ERR;
    *out = json_integer_value(v);
    return M0_OK;
}

static int decode(json_t *root, size_t max_data, struct m0_nats_got *got)
{
    json_int_t v;
    if (!json_is_object(root))
        return bad(got, "not a JSON object");
    json_t *err = json_object_get(root, "error");
    if (err != NULL) {
        if (!json_is_object(err) || int_member(err, "code", 0, 999, &v) != M0_OK)
            return bad(got, "a malformed error answer");
        got->code = (int)v;
        got->err_code = int_member(err, "err_code", 0, 99999, &v) == M0_OK ? (int)v : 0;
        json_t *d = json_object_get(err, "description");
        if (json_is_string(d) && json_string_length(d) > 0)
            snprintf(got->why, sizeof got->why, "%.150s", json_string_value(d));
        else
            snprintf(got->why, sizeof got->why, "an error answer (%d)", got->code);
        for (char *c = got->why; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f)
                *c = '?';       /* the broker's text goes to a log line */
        return got->code == 404 && got->err_code == 10037 ? M0_AGAIN : M0_ERR;
    }
    json_t *m = json_object_get(root, "message");
    if (!json_is_object(m))
        return bad(got, "no message in the answer");
    if (int_member(m, "seq", 1, INT64_MAX, &v) != M0_OK)
        return bad(got, "the message has no sequence");
    got->seq = (uint64_t)v;
    json_t *subj = json_object_get(m, "subject");
    if (!json_is_string(subj) || json_string_length(subj) == 0)
        return bad(got, "the message has no subject");
    m0_buf_append(&got->subject, json_string_value(subj), json_string_length(subj));
    json_t *data = json_object_get(m, "data");
    if (data == NULL)
        return M0_OK;           /* an empty payload is left out */
    if (!json_is_string(data))
        return bad(got, "the message's data is not a string");
    size_t n = json_string_length(data);
    if (n / 4 * 3 > max_data + 3)
        return bad(got, "the message's data is too large");
    char *w = m0_buf_reserve(&got->data, n / 4 * 3 + 3);
    ssize_t k = m0_base64_decode(json_string_value(data), n, M0_B64_PAD, (unsigned char *)w, n / 4 * 3 + 3);
    if (k < 0)
        return bad(got, "the message's data is not base64");
    if ((size_t)k > max_data)
        return bad(got, "the message's data is too large");
    got->data.len = (size_t)k;
    return M0_OK;
}

int m0_nats_msg_get_reply(const char *json, size_t n, size_t max_data, struct m0_nats_got *got)
{
    m0_buf_reset(&got->subject);
    m0_buf_reset(&got->data);
    got->seq = 0;
    got->code = got->err_code = 0;
    got->why[0] = '\0';
    json_error_t jerr;
    json_t *root = json_loadb(json, n, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return bad(got, "not JSON");
    int rc = decode(root, max_data, got);
    json_decref(root);
    return rc;
}
