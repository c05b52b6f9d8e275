/*
 * cases.c — decode tests/cases/requests.tsv: {repeat:N:TEXT} first, then
 * the escapes \r \n \t \\ \xHH.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"

static char *expand_repeats(const char *s)
{
    size_t cap = strlen(s) + 1, len = 0;
    char *out = malloc(cap);
    while (*s) {
        if (strncmp(s, "{repeat:", 8) == 0) {
            char *colon;
            long n = strtol(s + 8, &colon, 10);
            const char *text = colon + 1, *close = strchr(text, '}');
            if (*colon != ':' || close == NULL || n < 0) {
                free(out);
                return NULL;
            }
            size_t tl = (size_t)(close - text);
            while (len + tl * (size_t)n + 1 > cap) {
                cap *= 2;
                out = realloc(out, cap);
            }
            for (long i = 0; i < n; i++, len += tl)
                memcpy(out + len, text, tl);
            s = close + 1;
            continue;
        }
        if (len + 2 > cap) {
            cap *= 2;
            out = realloc(out, cap);
        }
        out[len++] = *s++;
    }
    out[len] = '\0';
    return out;
}

static int unescape(const char *s, char **out, size_t *outlen)
{
    char *d = malloc(strlen(s) + 1);
    size_t n = 0;
    for (; *s; s++) {
        if (*s != '\\') {
            d[n++] = *s;
            continue;
        }
        s++;
        switch (*s) {
        case 'r': d[n++] = '\r'; break;
        case 'n': d[n++] = '\n'; break;
        case 't': d[n++] = '\t'; break;
        case '\\': d[n++] = '\\'; break;
        case 'x': {
            char hex[3] = {s[1], s[1] ? s[2] : 0, 0};
            char *end;
            long v = strtol(hex, &end, 16);
            if (end != hex + 2) {
                free(d);
                return -1;
            }
            d[n++] = (char)v;
            s += 2;
            break;
        }
        default:
            free(d);
            return -1;
        }
    }
    *out = d;
    *outlen = n;
    return 0;
}

int m0_cases_load(const char *path, struct m0_case **out)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    struct m0_case *cases = NULL;
    int n = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) != -1) {
        if (got > 0 && line[got - 1] == '\n')
            line[--got] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *f1 = strtok(line, "\t"), *f2 = strtok(NULL, "\t"), *f3 = strtok(NULL, "\t"),
             *f4 = strtok(NULL, "");
        if (!f1 || !f2 || !f3 || !f4)
            goto bad;
        cases = realloc(cases, (size_t)(n + 1) * sizeof *cases);
        struct m0_case *c = &cases[n];
        snprintf(c->name, sizeof c->name, "%s", f1);
        c->status = atoi(f2);
        c->close = strcmp(f3, "close") == 0;
        char *expanded = expand_repeats(f4);
        if (expanded == NULL || unescape(expanded, &c->raw, &c->raw_len) != 0) {
            free(expanded);
            goto bad;
        }
        free(expanded);
        n++;
    }
    free(line);
    fclose(f);
    *out = cases;
    return n;
bad:
    free(line);
    fclose(f);
    m0_cases_free(cases, n);
    return -1;
}

void m0_cases_free(struct m0_case *cases, int n)
{
    for (int i = 0; i < n; i++)
        free(cases[i].raw);
    free(cases);
}
