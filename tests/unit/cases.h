/*
 * cases.h — reader for tests/cases/requests.tsv, the malformed-request
 * table shared with the pytest suite (format documented in the file).
 */
#ifndef M0_TEST_CASES_H
#define M0_TEST_CASES_H

#include <stddef.h>

struct m0_case {
    char name[64];
    int status;
    int close;        /* 1: the server closes after answering */
    char *raw;        /* decoded bytes (malloc'd) */
    size_t raw_len;
};

/* Load every case from path into a malloc'd array; returns the count, or
 * -1 when the file cannot be read or a line is malformed. */
int m0_cases_load(const char *path, struct m0_case **out);
void m0_cases_free(struct m0_case *cases, int n);

#endif
