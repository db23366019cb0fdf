/* serve_impl.h -- what the files of src/serve share and no program sees (never installed). */
#ifndef AG_SERVE_IMPL_H
#define AG_SERVE_IMPL_H

#include <pthread.h>
#include "serve.h"

// --- store.c: the model every request shares ---

typedef struct {
    void *model;
    long iter;
    char name[64];       /* the checkpoint (DIR/latest's name), "" for the older layout */
    int refs;            /* requests using it, +1 while it is the current one */
} ag_served;

typedef struct {
    const char *dir;
    const ag_serve_client *c;
    pthread_mutex_t mu;
    ag_served *cur;
    bool loading;        /* one request loads a new checkpoint; the others keep the old one */
    char failed[64];     /* a checkpoint that failed to load, tried again after a second */
    double failed_at;
} ag_serve_store;

/* The model of DIR's latest checkpoint, or AG_ERR_* from its load. */
ag_status ag__serve_store_open(ag_serve_store *s, const ag_serve_client *c, const char *dir, ag_error *err);
/* The current model, after loading DIR/latest if it moved (a failed load keeps the previous
 * one); hand it back with ag__serve_store_put. Never NULL after a successful open. */
ag_served *ag__serve_store_get(ag_serve_store *s);
void ag__serve_store_put(ag_serve_store *s, ag_served *m);
void ag__serve_store_close(ag_serve_store *s);

// --- api.c: the answers (malloc'd JSON text; NULL when out of memory) ---

/* The run: the model's config and fields, latest, best, its checkpoints and pictures, whether a
 * train holds it. */
char *ag__serve_run_json(const char *dir, const ag_serve_store *s, const ag_served *m);
/* DIR/<name> (metrics.csv, dynamics.csv) as {"columns": [...], "rows": [[...]]}; a missing file
 * is {"columns": [], "rows": [], "missing": true}. */
char *ag__serve_csv(const char *dir, const char *name);
/* DIR/report.md as {"text": ...}; a missing (or not UTF-8) one is {"text": "", "missing": true}. */
char *ag__serve_report(const char *dir);
/* The pictures a run may hold (loss.png ...), NULL-terminated: the only names /api/pictures/ serves. */
extern const char *const ag__serve_pictures[];
/* DIR/name's bytes (malloc'd, *len of them) if it is a regular file of at most AG_SERVE_FILE_MAX
 * bytes, not a link; NULL otherwise. */
char *ag__serve_read(const char *dir, const char *name, size_t *len);

#endif
