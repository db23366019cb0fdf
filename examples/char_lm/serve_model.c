/* serve_model.c -- the model every request of `char_lm serve` shares (serve.h).
 *
 * One lm_model in memory, counted: a request takes a reference and reads the weights (a forward
 * writes only into its own ag_ctx), so nothing is copied per request. When DIR/latest names
 * another checkpoint, the request that notices loads it (the others keep the old model in the
 * meantime) and swaps it in; the old one is freed by whoever hands back its last reference. A
 * load that fails (the writer removed the files under us, a bad file) keeps the previous model
 * and is tried again after a second. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "serve.h"
#include "tensor/debug.h"   /* ag_now_s */

/* DIR/latest's name in name [64]; "" for the older layout (no latest). */
static ag_status latest_name(const char *dir, char *name, ag_error *err)
{
    ag_error e = {0};   /* its own: "no latest" is no error, and err keeps the load's words */
    ag_status s = ag_ckpt_pointer(dir, LM_LATEST, name, &e);
    if (s == AG_ERR_IO && (errno == ENOENT || errno == ENOTDIR)) {
        name[0] = '\0';
        return AG_OK;
    }
    return s ? ag_seterr(err, s, "%s", e.msg) : AG_OK;
}

static lm_served *load(const char *dir, const char *name, ag_error *err)
{
    lm_served *m = calloc(1, sizeof *m);
    if (!m) {
        ag_seterr(err, AG_ERR_NOMEM, "serve: out of memory");
        return NULL;
    }
    char path[4096];
    ag_status s = AG_OK;
    if (*name && !ag_path_join(path, sizeof path, dir, name)) s = ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    if (s == AG_OK) s = lm_model_load(*name ? path : dir, &m->m, err);
    if (s) {
        free(m);
        return NULL;
    }
    snprintf(m->name, sizeof m->name, "%s", name);
    m->refs = 1;
    return m;
}

static void unref(lm_served *m)
{
    if (m && --m->refs == 0) {
        lm_model_free(&m->m);
        free(m);
    }
}

ag_status lm_store_open(lm_store *s, const char *dir, ag_error *err)
{
    memset(s, 0, sizeof *s);
    s->dir = dir;
    char name[64];
    ag_status st = latest_name(dir, name, err);
    if (st) return st;
    if (!(s->cur = load(dir, name, err))) return err->status ? err->status : AG_ERR_IO;
    pthread_mutex_init(&s->mu, NULL);
    return AG_OK;
}

/* Whether name (DIR/latest now) should be loaded: it moved, nobody is loading it, and it did
 * not just fail. Called holding s->mu. */
static bool should_load(lm_store *s, const char *name)
{
    if (!*name || strcmp(name, s->cur->name) == 0 || s->loading) return false;
    return strcmp(name, s->failed) != 0 || ag_now_s() - s->failed_at > 1.0;
}

static void refresh(lm_store *s)
{
    ag_error e = {0};
    char name[64];
    if (latest_name(s->dir, name, &e)) return;   /* a latest being replaced: the old model */
    pthread_mutex_lock(&s->mu);
    bool go = should_load(s, name);
    if (go) s->loading = true;
    pthread_mutex_unlock(&s->mu);
    if (!go) return;
    lm_served *m = load(s->dir, name, &e);   /* without the mutex: the others keep serving */
    pthread_mutex_lock(&s->mu);
    s->loading = false;
    if (m) {
        unref(s->cur);
        s->cur = m;
    } else {
        snprintf(s->failed, sizeof s->failed, "%s", name);
        s->failed_at = ag_now_s();
    }
    pthread_mutex_unlock(&s->mu);
}

lm_served *lm_store_get(lm_store *s)
{
    refresh(s);
    pthread_mutex_lock(&s->mu);
    lm_served *m = s->cur;
    m->refs++;
    pthread_mutex_unlock(&s->mu);
    return m;
}

void lm_store_put(lm_store *s, lm_served *m)
{
    pthread_mutex_lock(&s->mu);
    unref(m);
    pthread_mutex_unlock(&s->mu);
}

void lm_store_close(lm_store *s)
{
    if (!s->cur) return;
    unref(s->cur);
    s->cur = NULL;
    pthread_mutex_destroy(&s->mu);
}
