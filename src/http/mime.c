/*
 * mime.c — Content-Type by file extension for static files: /etc/mime.types
 * when present, a built-in table otherwise (see static.h, m0_mime_load).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "m0/log.h"
#include "m0/static.h"

/* ============================================================ MIME types */

#define MIME_SLOTS 4096          /* open addressing; mime.types has ~1500 extensions */
#define MIME_EXT_MAX 16

struct mime_slot {
    char ext[MIME_EXT_MAX];      /* lower case, NUL-terminated; "" = free */
    const char *type;            /* Content-Type, charset included */
};

/* Per process, read-only after boot: the table m0_mime_load fills once. */
static struct mime_slot *mime_tab;     /* NULL until m0_mime_load succeeds */
static char *mime_text;                /* the table's strings */

/* Used when the file is absent or lacks an extension. */
static const struct {
    const char *ext, *type;
} mime_builtin[] = {
    {"html", "text/html; charset=utf-8"}, {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"}, {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"}, {"json", "application/json"},
    {"map", "application/json"}, {"txt", "text/plain; charset=utf-8"},
    {"xml", "application/xml"}, {"svg", "image/svg+xml"}, {"png", "image/png"},
    {"jpg", "image/jpeg"}, {"jpeg", "image/jpeg"}, {"gif", "image/gif"}, {"webp", "image/webp"},
    {"avif", "image/avif"}, {"ico", "image/vnd.microsoft.icon"}, {"wasm", "application/wasm"},
    {"woff", "font/woff"}, {"woff2", "font/woff2"}, {"ttf", "font/ttf"}, {"otf", "font/otf"},
    {"pdf", "application/pdf"}, {"webmanifest", "application/manifest+json"},
    {"gz", "application/gzip"}, {"zip", "application/zip"}, {"mp4", "video/mp4"},
    {"webm", "video/webm"}, {"mp3", "audio/mpeg"}, {"csv", "text/csv; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
};

static uint32_t mime_hash(const char *ext)
{
    uint32_t h = 2166136261u;             /* FNV-1a */
    for (; *ext; ext++) {
        h ^= (unsigned char)*ext;
        h *= 16777619u;
    }
    return h;
}

/* Lower-case the extension of name (n bytes) into ext; 0 when it has none
 * or it is too long. */
static int extension_of(const char *name, size_t n, char ext[MIME_EXT_MAX])
{
    size_t i = n;
    while (i > 0 && name[i - 1] != '.' && name[i - 1] != '/')
        i--;
    if (i == 0 || name[i - 1] != '.' || n - i == 0 || n - i >= MIME_EXT_MAX)
        return 0;
    for (size_t k = 0; k < n - i; k++)
        ext[k] = (char)tolower((unsigned char)name[i + k]);
    ext[n - i] = '\0';
    return 1;
}

/* Text is UTF-8 here unless the file says otherwise: the charset tells a
 * browser not to guess (WHATWG encoding sniffing) for text and scripts. */
static int wants_charset(const char *type, size_t n)
{
    return (n > 5 && strncasecmp(type, "text/", 5) == 0) ||
           (n == 22 && strncasecmp(type, "application/javascript", 22) == 0);
}

int m0_mime_load(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return M0_ERR;
    struct mime_slot *tab = calloc(MIME_SLOTS, sizeof *tab);
    size_t cap = 64 * 1024, used = 0;
    char *text = malloc(cap);
    if (tab == NULL || text == NULL) {
        free(tab);
        free(text);
        fclose(f);
        return M0_ERR;
    }
    char line[1024];
    unsigned count = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char *save = NULL, *type = strtok_r(line, " \t\r\n", &save);
        if (type == NULL || type[0] == '#')
            continue;
        size_t tl = strlen(type);
        size_t need = tl + sizeof "; charset=utf-8";
        const char *stored = NULL;
        char *ext;
        while ((ext = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
            if (ext[0] == '#')
                break;
            char key[MIME_EXT_MAX];
            size_t el = strlen(ext);
            if (el == 0 || el >= MIME_EXT_MAX || count >= MIME_SLOTS / 2)
                continue;
            for (size_t k = 0; k <= el; k++)
                key[k] = (char)tolower((unsigned char)ext[k]);
            if (stored == NULL) {
                if (used + need > cap)
                    continue;     /* the arena is full: the rest keep the built-in types */
                stored = text + used;
                used += (size_t)snprintf(text + used, cap - used, "%s%s", type,
                                         wants_charset(type, tl) ? "; charset=utf-8" : "") + 1;
            }
            uint32_t h = mime_hash(key) & (MIME_SLOTS - 1);
            while (tab[h].ext[0] != '\0' && strcmp(tab[h].ext, key) != 0)
                h = (h + 1) & (MIME_SLOTS - 1);
            if (tab[h].ext[0] == '\0') {
                memcpy(tab[h].ext, key, el + 1);
                count++;
            }
            tab[h].type = stored;     /* a later line wins, as in most readers */
        }
    }
    fclose(f);
    free(mime_tab);
    free(mime_text);
    mime_tab = tab;
    mime_text = text;
    return M0_OK;
}

const char *m0_mime_type(const char *name, size_t n)
{
    char ext[MIME_EXT_MAX];
    if (!extension_of(name, n, ext))
        return "application/octet-stream";
    if (mime_tab != NULL) {
        uint32_t h = mime_hash(ext) & (MIME_SLOTS - 1);
        while (mime_tab[h].ext[0] != '\0') {
            if (strcmp(mime_tab[h].ext, ext) == 0)
                return mime_tab[h].type;
            h = (h + 1) & (MIME_SLOTS - 1);
        }
    }
    for (size_t i = 0; i < M0_ARRAY_LEN(mime_builtin); i++) {
        if (strcmp(mime_builtin[i].ext, ext) == 0)
            return mime_builtin[i].type;
    }
    return "application/octet-stream";
}

