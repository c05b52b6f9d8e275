/*
 * mime.h — the type of a static file by its name (mime.c, of the static
 * module, static.h): /etc/mime.types, then the built-in table.
 */
#ifndef M0_MIME_H
#define M0_MIME_H

#include "m0/static.h"

/* Parse a mime.types file ("type ext ext ..." lines, '#' comments) into
 * the process's table, replacing what an earlier call loaded. A missing
 * or unreadable file leaves the built-in table alone (M0_ERR). */
int m0_mime_load(const char *path);

/* The Content-Type for a file name (n bytes; only its last extension
 * counts, case-insensitively): the loaded table, then a small built-in one,
 * then application/octet-stream. Text types and JavaScript get
 * "; charset=utf-8". Never NULL; a static or table-owned string. */
const char *m0_mime_type(const char *name, size_t n);

#endif
