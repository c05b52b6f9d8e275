/*
 * server.c — the per-loop extension registry (see server.h): a feature's
 * state made on first use and freed with the loop, instead of a field of
 * struct m0_server per feature.
 *
 * Looked up by the extension's address in a short array (at most
 * M0_MAX_EXTS, in registration order): a few compares, and no global slot
 * numbering that several loops would share.
 */
#include <stddef.h>

#include "m0/log.h"
#include "m0/server.h"

void m0_ext_register(struct m0_server *s, const struct m0_ext *ext)
{
    if (s->next >= M0_MAX_EXTS) {
        m0_error("extension table full: %s not registered", ext->name);
        return;
    }
    s->ext[s->next].ext = ext;
    s->ext[s->next].state = NULL;
    s->next++;
}

void *m0_ext_of(struct m0_server *s, const struct m0_ext *ext)
{
    for (unsigned i = 0; i < s->next; i++) {
        if (s->ext[i].ext != ext)
            continue;
        if (s->ext[i].state == NULL && ext->init != NULL)
            s->ext[i].state = ext->init(s);
        return s->ext[i].state;
    }
    return NULL;
}

void *m0_ext_peek(const struct m0_server *s, const struct m0_ext *ext)
{
    for (unsigned i = 0; i < s->next; i++) {
        if (s->ext[i].ext == ext)
            return s->ext[i].state;
    }
    return NULL;
}

void m0_ext_fini_all(struct m0_server *s)
{
    for (unsigned i = s->next; i-- > 0;) {
        if (s->ext[i].state != NULL && s->ext[i].ext->fini != NULL)
            s->ext[i].ext->fini(s, s->ext[i].state);
        s->ext[i].state = NULL;
    }
}
