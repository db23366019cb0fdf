/* store.c -- the model every request of serve shares (serve_impl.h).
 *
 * One model in memory, counted: a request takes a reference and reads the weights (a forward
 * writes only into its own ag_ctx), so nothing is copied per request. When DIR/latest names
 * another checkpoint, the request that notices loads it through the client (the others keep the
 * old model in the meantime) and swaps it in; the old one is freed by whoever hands back its
 * last reference. A load that fails (the writer removed the files under us, a bad file) keeps
 * the previous model and is tried again after a second. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "serve_impl.h"
#include "../tensor/debug.h"   /* ag_now_s */
#include "../train/train.h"    /* ag_ckpt_pointer, ag_path_join */

/* DIR/latest's name in name [64]; "" for the older layout (no latest). */
static ag_status latest_name(const char *dir, char *name, ag_error *err)
{
    ag_error e = {0};   /* its own: "no latest" is no error, and err keeps the load's words */
    ag_status s = ag_ckpt_pointer(dir, AG_CKPT_LATEST, name, &e);
    if (s == AG_ERR_IO && (errno == ENOENT || errno == ENOTDIR)) {
        name[0] = '\0';
        return AG_OK;
    }
    return s ? ag_seterr(err, s, "%s", e.msg) : AG_OK;
}

static ag_served *load(const ag_serve_store *s, const char *name, ag_error *err)
{
    ag_served *m = calloc(1, sizeof *m);
    if (!m) {
        ag_seterr(err, AG_ERR_NOMEM, "serve: out of memory");
        return NULL;
    }
    char path[4096];
    if (*name && !ag_path_join(path, sizeof path, s->dir, name))
        ag_seterr(err, AG_ERR_ARG, "%s: path too long", s->dir);
    else m->model = s->c->load(s->c->user, s->dir, *name ? path : s->dir, &m->iter, err);
    if (!m->model) {
        if (!err->status) ag_seterr(err, AG_ERR_IO, "%s: the model did not load", s->dir);
        free(m);
        return NULL;
    }
    snprintf(m->name, sizeof m->name, "%s", name);
    m->refs = 1;
    return m;
}

static void unref(const ag_serve_store *s, ag_served *m)
{
    if (m && --m->refs == 0) {
        s->c->free(s->c->user, m->model);
        free(m);
    }
}

ag_status ag__serve_store_open(ag_serve_store *s, const ag_serve_client *c, const char *dir, ag_error *err)
{
    memset(s, 0, sizeof *s);
    s->dir = dir;
    s->c = c;
    char name[64];
    ag_status st = latest_name(dir, name, err);
    if (st) return st;
    if (!(s->cur = load(s, name, err))) return err->status ? err->status : AG_ERR_IO;
    pthread_mutex_init(&s->mu, NULL);
    return AG_OK;
}

/* Whether name (DIR/latest now) should be loaded: it moved, nobody is loading it, and it did
 * not just fail. Called holding s->mu. */
static bool should_load(ag_serve_store *s, const char *name)
{
    if (!*name || strcmp(name, s->cur->name) == 0 || s->loading) return false;
    return strcmp(name, s->failed) != 0 || ag_now_s() - s->failed_at > 1.0;
}

static void refresh(ag_serve_store *s)
{
    ag_error e = {0};
    char name[64];
    if (latest_name(s->dir, name, &e)) return;   /* a latest being replaced: the old model */
    pthread_mutex_lock(&s->mu);
    bool go = should_load(s, name);
    if (go) s->loading = true;
    pthread_mutex_unlock(&s->mu);
    if (!go) return;
    ag_served *m = load(s, name, &e);   /* without the mutex: the others keep serving */
    pthread_mutex_lock(&s->mu);
    s->loading = false;
    if (m) {
        unref(s, s->cur);
        s->cur = m;
    } else {
        snprintf(s->failed, sizeof s->failed, "%s", name);
        s->failed_at = ag_now_s();
    }
    pthread_mutex_unlock(&s->mu);
}

ag_served *ag__serve_store_get(ag_serve_store *s)
{
    refresh(s);
    pthread_mutex_lock(&s->mu);
    ag_served *m = s->cur;
    m->refs++;
    pthread_mutex_unlock(&s->mu);
    return m;
}

void ag__serve_store_put(ag_serve_store *s, ag_served *m)
{
    pthread_mutex_lock(&s->mu);
    unref(s, m);
    pthread_mutex_unlock(&s->mu);
}

void ag__serve_store_close(ag_serve_store *s)
{
    if (!s->cur) return;
    unref(s, s->cur);
    s->cur = NULL;
    pthread_mutex_destroy(&s->mu);
}
