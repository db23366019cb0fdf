/* serve.h -- `PROGRAM serve --run DIR [--port 8080] [--host 127.0.0.1]`: a page and a JSON API
 * over the run directory of any model (docs/serve.md), beside a `train` that may still be
 * writing it. The library does the HTTP (libmicrohttpd), the routes, the page, the run's own
 * files (metrics.csv, dynamics.csv, report.md, the pictures, the checkpoints, latest, best,
 * the lock's holder), a request's parameters,
 * and the model shared by every request, swapped when DIR/latest moves; the program brings the
 * model through an ag_serve_client, as it brings it to training through an ag_train_client.
 *
 *   http.c    the HTTP side: the socket, the routes, the page, streaming
 *   api.c     the answers as JSON: a token with its distribution, the run, its CSVs, its report
 *   params.c  a request's parameters, parsed and checked (fuzz/fuzz_serve.c); the command line
 *   store.c   the model every request shares, swapped when DIR/latest moves
 *   gpt.c     a GPT's sample and attention, for a client whose model is an ag_gpt (nn.h), of
 *             characters or of its own tokens
 *
 * serve reads only the run's own files, by names fixed here: no path in a request reaches the
 * file system. It never takes the run's lock. Nothing here prints but ag_serve_run's one line
 * with the URL (and the warning for a non-loopback host). A program that calls ag_serve_run
 * links libmicrohttpd (pkg-config --static --libs attograd); one that does not, need not. */
#ifndef AG_SERVE_H
#define AG_SERVE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "../data/corpus.h"   /* ag_vocab, for ag_serve_check_chars */
#include "../nn/nn.h"         /* ag_gpt, for a GPT's sample and attention (gpt.c) */
#include "../tensor/real.h"
#include "../tensor/tensor.h"

#define AG_SERVE_MAX_NEW 2000        /* tokens one sample request may ask for */
#define AG_SERVE_MAX_BODY 16384      /* bytes of a request body */
#define AG_SERVE_MAX_CONN 64         /* connections at once; more wait in the listen queue */
#define AG_SERVE_BACKLOG 64          /* the listen queue */
#define AG_SERVE_MAX_STREAMS 64      /* streamed samples at once (their connections are bounded
                                        too); more get 503 */
#define AG_SERVE_IDLE_S 10           /* a client silent this long loses its connection */
#define AG_SERVE_TIMEOUT_S 60        /* a sample stops after this long */
#define AG_SERVE_CSV_MAX (64 << 20)  /* bytes of metrics.csv or dynamics.csv served */
#define AG_SERVE_FILE_MAX (16 << 20) /* bytes of report.md or a picture served */

// --- a request's parameters (params.c) ---

typedef enum { AG_REQ_SAMPLE, AG_REQ_ATTENTION } ag_req_kind;

typedef struct {
    char prompt[4 * 4096 + 1];   /* UTF-8, NUL-free */
    long n;              /* new tokens, 0 .. AG_SERVE_MAX_NEW (default 200) */
    double temperature;  /* (0, 100], default 1 */
    int top_k;           /* >= 1, or 0 when not given (all tokens) */
    uint64_t seed;       /* default 1337 */
    bool stream;         /* server-sent events as they come (default), or one JSON answer */
} ag_serve_req;

/* Whether prompt suits the model: 0, or 400 with one line in why [n]. */
typedef int (*ag_serve_check_fn)(void *model, const char *prompt, char *why, size_t n);

/* The JSON object body [len] of a request of kind, its prompt then checked by check(model, ...).
 * 0 with *r filled, or an HTTP status (400) with one line in why [n]. Never reads past len. */
int ag_serve_req_parse(const char *body, size_t len, ag_req_kind kind, ag_serve_check_fn check, void *model,
                       ag_serve_req *r, char *why, size_t n);
/* A check for a model of characters: every character of prompt in v, at most block_size of them. */
int ag_serve_check_chars(const ag_vocab *v, int block_size, const char *prompt, char *why, size_t n);

// --- what the program brings: its model ---

typedef struct ag_serve_sink ag_serve_sink;   /* where a sample's tokens go (http.c) */

/* Hands one token, its JSON object (ag_serve_token's), to the client that asked: false when the
 * sample must stop (the client left, the time is up); the program's sample then returns. */
bool ag_serve_emit(ag_serve_sink *k, const char *token_json);

typedef struct {
    const char *what;    /* the model's views, for --help ("sample, attention"; the library adds
                            "training, report") */
    void *user;          /* handed to load and free */
    /* The model of the checkpoint directory ckpt of the run dir (DIR/<the name latest holds>, or
     * DIR itself for a run written before `latest`), its step in *iter; NULL with err set when
     * it cannot. */
    void *(*load)(void *user, const char *dir, const char *ckpt, long *iter, ag_error *err);
    void (*free)(void *user, void *model);
    /* The model's part of /api/run, a JSON object as malloc'd text: "config" first, then any
     * fields of its own ("vocab_size", "block_size"); NULL when out of memory. NULL: none. */
    char *(*run_json)(void *model);
    ag_serve_check_fn check;   /* a prompt for this model (every request's, before the rest) */
    /* Generates from r into k, token by token (ag_serve_emit), until r->n, an emit that returns
     * false, or *stop; a bad prompt is AG_ERR_ARG. Runs in a request's thread, beside others on
     * the same model: it must not write into the model. */
    ag_status (*sample)(void *model, const ag_serve_req *r, ag_serve_sink *k, const volatile sig_atomic_t *stop,
                        ag_error *err);
    /* /api/attention's answer for r (malloc'd JSON text), or NULL with *status (400, 500) and
     * why [n]. NULL: the model has none (the route is unknown, the page hides the view). */
    char *(*attention)(void *model, const ag_serve_req *r, int *status, char *why, size_t n);
} ag_serve_client;

/* A token as JSON, malloc'd (NULL when out of memory): {"c": its label, "id": id, "top": the 5
 * most likely of logits [V] after r's temperature and top-k, each {"c", "p"}}. label writes the
 * text of a token id (UTF-8, NUL-terminated) into out [16]. */
char *ag_serve_token(int id, const ag_real *logits, int V, const ag_serve_req *r,
                     void (*label)(const void *u, int id, char *out), const void *u);
/* {"error": why}, one line, malloc'd. */
char *ag_serve_error(const char *why);

// --- a client whose model is a GPT (gpt.c): its sample and attention, the token ids the client's ---

/* The text of a token id (UTF-8, NUL-terminated) into out [16]. */
typedef void (*ag_serve_label_fn)(const void *u, int id, char *out);
/* r's sample from g, for a client's sample: r->n new tokens after ids [n] (ag_gpt_generate with
 * r's temperature, top_k and seed, and stop), each sent to k as ag_serve_token's JSON with the
 * distribution it was drawn from, labelled by label(u, id, out). ag_gpt_generate's statuses
 * (AG_ERR_IO when k stopped taking tokens). */
ag_status ag_serve_gpt_sample(ag_gpt *g, const int *ids, size_t n, const ag_serve_req *r, ag_serve_sink *k,
                              const volatile sig_atomic_t *stop, ag_serve_label_fn label, const void *u, ag_error *err);
/* /api/attention's answer for ids [T] of g at step iter (malloc'd JSON text): "chars" (each id's
 * label), and per layer per head its weights as rows 0..t (the masked future left out), its
 * entropy and peak (ag_attn_stats) and its pattern's name (ag_attn_head_summary) from names
 * [AG_ATTN_MIXED + 1] (NULL: ag_attn_pattern_names). NULL with why [n] when out of memory or the
 * forward fails (a client's 500). */
char *ag_serve_gpt_attention(ag_gpt *g, long iter, const int *ids, int T, ag_serve_label_fn label, const void *u,
                             const char *const *names, char *why, size_t n);
/* The same for a GPT over characters: r's prompt encoded with v (a character outside it is
 * AG_ERR_ARG, or 400 with why), each token labelled by its character, the attention's axes as
 * lm/lm.h's ag_chars_label and the heads named by ag_chars_pattern_names. */
ag_status ag_serve_chars_sample(ag_gpt *g, const ag_vocab *v, const ag_serve_req *r, ag_serve_sink *k,
                                const volatile sig_atomic_t *stop, ag_error *err);
char *ag_serve_chars_attention(ag_gpt *g, long iter, const ag_vocab *v, const ag_serve_req *r, int *status, char *why,
                               size_t n);

// --- the command line and the server (params.c, http.c) ---

typedef struct {
    const char *run;     /* --run DIR, required */
    const char *host;    /* --host, default 127.0.0.1 */
    int port;            /* --port, default 8080; 0: any free port (printed) */
} ag_serve_args;

/* argv[1] is "serve", flags from argv[2]. AG_ERR_ARG with one line in err for a bad flag (the
 * program's name from ag_train_name); *help for --help. */
ag_status ag_serve_parse(ag_serve_args *a, int argc, char **argv, bool *help, ag_error *err);
/* The usage text of `serve` for c, on f. */
void ag_serve_usage(FILE *f, const ag_serve_client *c);

/* Serves a->run until *stop is non-zero (requests run one thread each: ag_threads_init(1));
 * prints the URL on out, a warning for a non-loopback host on warn. AG_ERR_ARG for a host that
 * is not an IPv4 address, AG_ERR_IO when the port cannot be bound, the load's status for a run
 * without a loadable model. stop NULL: SIGINT and SIGTERM are caught for the call's length, and
 * the one that ended it is in *stopped_by (may be NULL). */
ag_status ag_serve_run(const ag_serve_client *c, const ag_serve_args *a, const volatile sig_atomic_t *stop,
                       FILE *out, FILE *warn, int *stopped_by, ag_error *err);
/* `PROGRAM serve ...` whole, for a main (argv[1] is "serve"): a bad flag is one line on stderr,
 * "<program>: <lead>..." (train/program.h: ag_say_error), and 2; --help prints c's usage on
 * stdout, 0 (1 when stdout fails); else ag_serve_run until SIGINT, SIGTERM or SIGHUP
 * (ag_stop_catch), and the exit code ag_stopped_code gives that signal, or a failure's line
 * and ag_exit_code's. */
int ag_serve_main(const ag_serve_client *c, int argc, char **argv, const char *lead);

#endif
