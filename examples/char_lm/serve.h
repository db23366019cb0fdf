/* serve.h -- `char_lm serve --run DIR [--port 8080] [--host 127.0.0.1]`: a page and a JSON API
 * over a run directory (docs/serve.md), beside a `train` that may still be writing it.
 *
 *   serve.c         the HTTP side (libmicrohttpd): the socket, the routes, the page, streaming
 *   serve_api.c     the answers as JSON: a sample's tokens, attention, the run, its CSVs
 *   serve_params.c  a request's parameters, parsed and checked (fuzz/fuzz_serve.c)
 *   serve_model.c   the model, shared by every request, swapped when DIR/latest moves
 *
 * serve reads only the run's own files, by names fixed here: no path in a request reaches the
 * file system. It never takes the run's lock. Nothing here prints but lm_serve_run's one line
 * with the URL (and the warning for a non-loopback host). */
#ifndef LM_SERVE_H
#define LM_SERVE_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "checkpoint.h"

#define LM_SERVE_MAX_NEW 2000        /* tokens one sample request may ask for */
#define LM_SERVE_MAX_BODY 16384      /* bytes of a request body */
#define LM_SERVE_MAX_CONN 64         /* connections at once; more wait in the listen queue */
#define LM_SERVE_BACKLOG 64          /* the listen queue */
#define LM_SERVE_MAX_STREAMS 64      /* streamed samples at once (their connections are bounded
                                        too); more get 503 */
#define LM_SERVE_IDLE_S 10           /* a client silent this long loses its connection */
#define LM_SERVE_TIMEOUT_S 60        /* a sample stops after this long */
#define LM_SERVE_CSV_MAX (64 << 20)  /* bytes of metrics.csv or dynamics.csv served */

typedef struct {
    const char *run;     /* --run DIR, required */
    const char *host;    /* --host, default 127.0.0.1 */
    int port;            /* --port, default 8080; 0: any free port (printed) */
} lm_serve_args;

/* argv[1] is "serve". AG_ERR_ARG with one line in err for a bad flag; *help for --help. */
ag_status lm_serve_parse(lm_serve_args *a, int argc, char **argv, bool *help, ag_error *err);
const char *lm_serve_usage(void);

/* Serves until *stop is non-zero; prints the URL on out. AG_ERR_ARG for a host that is not an
 * IPv4 address, AG_ERR_IO when the port cannot be bound, the load's status for a run without
 * a loadable model. */
ag_status lm_serve_run(const lm_serve_args *a, const volatile sig_atomic_t *stop, FILE *out, FILE *warn,
                       ag_error *err);

// --- serve_model.c: the model every request shares ---

typedef struct {
    lm_model m;
    char name[64];       /* the checkpoint (DIR/latest's name), "" for the older layout */
    int refs;            /* requests using it, +1 while it is the current one */
} lm_served;

typedef struct {
    const char *dir;
    pthread_mutex_t mu;
    lm_served *cur;
    bool loading;        /* one request loads a new checkpoint; the others keep the old one */
    char failed[64];     /* a checkpoint that failed to load, tried again after a second */
    double failed_at;
} lm_store;

/* The model of DIR's latest checkpoint, or AG_ERR_* from its load. */
ag_status lm_store_open(lm_store *s, const char *dir, ag_error *err);
/* The current model, after loading DIR/latest if it moved (a failed load keeps the previous
 * one); hand it back with lm_store_put. Never NULL after a successful open. */
lm_served *lm_store_get(lm_store *s);
void lm_store_put(lm_store *s, lm_served *m);
void lm_store_close(lm_store *s);

// --- serve_params.c: a request's parameters ---

typedef enum { LM_REQ_SAMPLE, LM_REQ_ATTENTION } lm_req_kind;

typedef struct {
    char prompt[4 * 4096 + 1];   /* UTF-8, NUL-free */
    long n;              /* new tokens, 0 .. LM_SERVE_MAX_NEW (default 200) */
    double temperature;  /* (0, 100], default 1 */
    int top_k;           /* >= 1, or 0 when not given (all characters) */
    uint64_t seed;       /* default 1337, as `char_lm sample` */
    bool stream;         /* server-sent events as they come (default), or one JSON answer */
} lm_req;

/* The JSON object body [len] of a request of kind against vocabulary v and context block_size.
 * 0 with *r filled, or an HTTP status (400) with one line in why [n]. Never reads past len. */
int lm_req_parse(const char *body, size_t len, lm_req_kind kind, const ag_vocab *v, int block_size, lm_req *r,
                 char *why, size_t n);

// --- serve_api.c: the answers (malloc'd JSON text; NULL when out of memory) ---

/* {"error": why}, one line. */
char *lm_api_error(const char *why);
/* One generated character and the top-5 of the distribution it was drawn from (the logits [V]
 * with the request's temperature and top-k). */
char *lm_api_token(const lm_model *m, int id, const ag_real *logits, const lm_req *r);
/* The attention of every layer and head for the prompt, or NULL with why (400) / 500. */
char *lm_api_attention(const lm_model *m, const lm_req *r, int *status, char *why, size_t n);
/* The run: config, checkpoints, whether a train holds it. */
char *lm_api_run(const char *dir, const lm_served *s);
/* DIR/<name> (metrics.csv, dynamics.csv) as {"columns": [...], "rows": [[...]]}; a missing file
 * is {"columns": [], "rows": [], "missing": true}. */
char *lm_api_csv(const char *dir, const char *name);

#endif
