/*
 * percent.c — percent-decoding of a request path (see percent.h).
 */
#include "m0/percent.h"

int m0_hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int m0_percent_byte(const char *s, size_t n, size_t i)
{
    if (i + 2 >= n)
        return -1;
    int hi = m0_hex_digit((unsigned char)s[i + 1]), lo = m0_hex_digit((unsigned char)s[i + 2]);
    return hi < 0 || lo < 0 ? -1 : hi << 4 | lo;
}

size_t m0_percent_decode(const char *s, size_t n, char *dst)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int b = s[i] == '%' ? m0_percent_byte(s, n, i) : -1;
        if (b >= 0) {
            dst[o++] = (char)b;
            i += 2;
        } else {
            dst[o++] = s[i];
        }
    }
    return o;
}
