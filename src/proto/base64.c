/*
 * base64.c — strict base64 and base64url (see base64.h).
 */
#include <stdint.h>

#include "m0/base64.h"
#include "m0/types.h"

static const char url_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int m0_base64_value(unsigned char c, int url)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == (url ? '-' : '+'))
        return 62;
    if (c == (url ? '_' : '/'))
        return 63;
    return -1;
}

ssize_t m0_base64_decode(const char *s, size_t n, int flags, unsigned char *out, size_t cap)
{
    size_t pad = 0;
    while (pad < 2 && pad < n && s[n - 1 - pad] == '=')
        pad++;
    if (pad > 0 && (!(flags & M0_B64_PAD) || n % 4 != 0))
        return M0_ERR;
    n -= pad;
    if (n % 4 == 1)
        return M0_ERR;               /* 6 bits cannot end a byte */
    size_t want = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
    if (want > cap)
        return M0_ERR;
    int url = (flags & M0_B64_URL) != 0;
    size_t o = 0;
    uint32_t acc = 0;
    unsigned bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = m0_base64_value((unsigned char)s[i], url);
        if (v < 0)
            return M0_ERR;           /* white space, a misplaced '=', the other alphabet, anything else */
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    /* Left-over bits that are not zero: several spellings decode to the
     * same bytes (a changed last signature character could pass). */
    if ((flags & M0_B64_CANONICAL) && acc != 0)
        return M0_ERR;
    return (ssize_t)o;
}

ssize_t m0_b64url_encode(const unsigned char *p, size_t n, char *out, size_t cap)
{
    size_t need = n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
    if (cap == 0 || need > cap - 1) {
        if (cap > 0)
            out[0] = '\0';
        return M0_ERR;
    }
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[o++] = url_alphabet[v >> 18];
        out[o++] = url_alphabet[(v >> 12) & 63];
        out[o++] = url_alphabet[(v >> 6) & 63];
        out[o++] = url_alphabet[v & 63];
    }
    if (n - i >= 1) {
        uint32_t v = (uint32_t)p[i] << 16 | (n - i == 2 ? (uint32_t)p[i + 1] << 8 : 0);
        out[o++] = url_alphabet[v >> 18];
        out[o++] = url_alphabet[(v >> 12) & 63];
        if (n - i == 2)
            out[o++] = url_alphabet[(v >> 6) & 63];
    }
    out[o] = '\0';
    return (ssize_t)o;
}

ssize_t m0_b64url_decode(const char *s, size_t n, unsigned char *out, size_t cap)
{
    return m0_base64_decode(s, n, M0_B64_URL | M0_B64_CANONICAL, out, cap);
}
