/* http.c -- the HTTP side of serve (serve.h): libmicrohttpd parses HTTP and runs a thread per
 * connection, at most AG_SERVE_MAX_CONN of them (more wait in the listen queue), each dropped
 * after AG_SERVE_IDLE_S seconds without progress (a slow or vanished client frees its slot).
 * The routes are fixed strings: the page's files (embedded at build time from src/serve/web/)
 * and the API; nothing in a URL names a file. The model is the client's (ag_serve_client).
 *
 * A streamed sample runs in a thread of its own that writes server-sent events into a pipe
 * libmicrohttpd forwards: a client that leaves closes the pipe, the next write fails, and the
 * generation stops. */
#define _GNU_SOURCE   /* pipe2 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <malloc.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "serve_impl.h"
#include "../tensor/debug.h"   /* ag_now_s */
#include "../tensor/speed.h"   /* ag_threads_init */
#include "../train/train_impl.h"   /* ag__train_program */

typedef struct {
    const char *path;
    const char *type;
    const unsigned char *data;
    size_t size;
} web_file;
#include "serve_web.inc"   /* web_files[]: build/gen, from src/serve/web/ (Makefile) */

typedef struct {
    ag_serve_store store;
    const ag_serve_client *c;
    const char *dir;
    const volatile sig_atomic_t *stop;
    bool loopback;           /* answer only requests addressed to 127.0.0.1 or localhost */
    pthread_mutex_t mu;
    pthread_cond_t idle;
    int streams;             /* sample threads running */
} server;

typedef struct {             /* one request's body, as it arrives */
    char body[AG_SERVE_MAX_BODY];
    size_t len;
    bool too_big;
} upload;

// --- answers ---

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned code, const char *type, char *text)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ok = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned code, char *json)
{
    if (!json) return MHD_NO;   /* out of memory: drop the connection */
    size_t n = strlen(json);
    char *line = realloc(json, n + 2);
    if (!line) {
        free(json);
        return MHD_NO;
    }
    memcpy(line + n, "\n", 2);
    return send_text(c, code, "application/json", line);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned code, const char *why)
{
    return send_json(c, code, ag_serve_error(why));
}

static enum MHD_Result send_file(struct MHD_Connection *c, const web_file *f)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(f->size, (void *)f->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", f->type);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

// --- sampling ---

/* Where a sample's tokens go: SSE lines into fd, or a JSON array. */
typedef struct ag_serve_sink {
    server *S;
    ag_served *m;
    ag_serve_req r;
    int fd;                  /* the pipe's write end, or -1 */
    json_t *tokens;          /* or here */
    double deadline;
    const char *stopped;     /* why it ended early: "timeout", "client gone" */
    long count;
} sink;

static bool write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

static bool write_event(int fd, const char *event, const char *json)
{
    char head[32];
    int n = snprintf(head, sizeof head, "event: %s\ndata: ", event);
    return write_all(fd, head, (size_t)n) && write_all(fd, json, strlen(json)) && write_all(fd, "\n\n", 2);
}

bool ag_serve_emit(ag_serve_sink *k, const char *tok)
{
    if (ag_now_s() > k->deadline) {
        k->stopped = "timeout";
        return false;
    }
    bool ok = tok != NULL;
    if (ok && k->fd >= 0) ok = write_event(k->fd, "token", tok);
    else if (ok) ok = json_array_append_new(k->tokens, json_loads(tok, 0, NULL)) == 0;
    if (!ok && !k->stopped) k->stopped = k->fd >= 0 ? "client gone" : "out of memory";
    k->count += ok;
    return ok;
}

/* Generates k->r.n tokens into the sink; the final status as JSON ("done" or an error). */
static char *generate(sink *k, unsigned *code)
{
    ag_error e = {0};
    ag_status s = k->S->c->sample(k->m->model, &k->r, k, k->S->stop, &e);
    *code = s == AG_OK || k->stopped ? 200 : s == AG_ERR_ARG ? 400 : 500;
    if (s && !k->stopped) return ag_serve_error(e.msg);
    json_t *done = json_pack("{s:I,s:i,s:s,s:s*}", "n", (json_int_t)k->count, "iter", (int)k->m->iter, "checkpoint",
                             k->m->name, "stopped", k->stopped);
    char *text = done ? json_dumps(done, JSON_COMPACT) : NULL;
    json_decref(done);
    return text;
}

static void *stream_thread(void *arg)
{
    sink *k = arg;
    unsigned code;
    char *end = generate(k, &code);
    if (end) write_event(k->fd, code == 200 ? "done" : "error", end);
    free(end);
    close(k->fd);
    server *S = k->S;
    ag__serve_store_put(&S->store, k->m);
    free(k);
    pthread_mutex_lock(&S->mu);
    S->streams--;
    pthread_cond_broadcast(&S->idle);
    pthread_mutex_unlock(&S->mu);
    return NULL;
}

static bool take_stream(server *S)
{
    pthread_mutex_lock(&S->mu);
    bool ok = S->streams < AG_SERVE_MAX_STREAMS;
    S->streams += ok;
    pthread_mutex_unlock(&S->mu);
    return ok;
}

/* A thread generating into a pipe that the response reads; *owned: the thread has k. */
static enum MHD_Result start_stream(struct MHD_Connection *c, sink *k, bool *owned)
{
    server *S = k->S;
    int p[2];
    *owned = false;
    if (!take_stream(S)) return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "busy: too many samples at once; retry");
    struct MHD_Response *r = NULL;
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pipe2(p, O_CLOEXEC) == 0) {
        if (!(r = MHD_create_response_from_pipe(p[0]))) close(p[0]);
        k->fd = p[1];
        *owned = r && pthread_create(&t, &at, stream_thread, k) == 0;
        if (!*owned) close(p[1]);
    }
    pthread_attr_destroy(&at);
    if (!*owned) {
        if (r) MHD_destroy_response(r);   /* closes p[0] */
        pthread_mutex_lock(&S->mu);
        S->streams--;
        pthread_mutex_unlock(&S->mu);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    enum MHD_Result res = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return res;   /* a response not queued closes the pipe, and the thread stops at its next write */
}

/* The tokens' labels ("c") end to end, one string: a client's label is up to 15 bytes. */
static json_t *tokens_text(json_t *tokens)
{
    char *text = calloc(16 * (size_t)AG_SERVE_MAX_NEW + 1, 1);
    size_t i, at = 0;
    json_t *t;
    json_array_foreach(tokens, i, t) {
        const char *c = json_string_value(json_object_get(t, "c"));
        size_t n = c ? strlen(c) : 0;
        if (c && text && at + n <= 16 * (size_t)AG_SERVE_MAX_NEW) memcpy(text + at, c, n), at += n;
    }
    json_t *s = text ? json_stringn(text, at) : NULL;
    free(text);
    return s;
}

static enum MHD_Result sample_once(struct MHD_Connection *c, sink *k)
{
    unsigned code;
    k->tokens = json_array();
    char *end = k->tokens ? generate(k, &code) : NULL;
    json_t *o = end ? json_loads(end, 0, NULL) : NULL;
    free(end);
    if (o && code == 200) {
        json_object_set_new(o, "text", tokens_text(k->tokens));
        json_object_set_new(o, "tokens", k->tokens);
    } else {
        json_decref(k->tokens);
    }
    char *out = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(o);
    return send_json(c, o ? code : 500, out);
}

/* POST /api/sample and /api/attention: the body checked against the current model first. */
static enum MHD_Result model_call(struct MHD_Connection *c, server *S, const upload *u, ag_req_kind kind)
{
    if (u->too_big) return send_error(c, 413, "the body is over 16384 bytes");
    sink *k = calloc(1, sizeof *k);
    if (!k) return MHD_NO;
    *k = (sink){ .S = S, .m = ag__serve_store_get(&S->store), .fd = -1, .deadline = ag_now_s() + AG_SERVE_TIMEOUT_S };
    char why[512];
    int st = ag_serve_req_parse(u->body, u->len, kind, S->c->check, k->m->model, &k->r, why, sizeof why);
    enum MHD_Result res;
    if (st) {
        res = send_error(c, (unsigned)st, why);
    } else if (kind == AG_REQ_ATTENTION) {
        char *json = S->c->attention(k->m->model, &k->r, &st, why, sizeof why);
        res = json ? send_json(c, MHD_HTTP_OK, json) : send_error(c, (unsigned)st, why);
    } else if (k->r.stream) {
        bool owned;
        res = start_stream(c, k, &owned);
        if (owned) return res;
    } else {
        res = sample_once(c, k);
    }
    ag__serve_store_put(&S->store, k->m);
    free(k);
    return res;
}

/* GET /api/pictures/<one of ag__serve_pictures>: the run's picture, or 404 */
static enum MHD_Result picture_call(struct MHD_Connection *c, server *S, const char *name)
{
    size_t len = 0;
    char *png = ag__serve_read(S->dir, name, &len);
    if (!png) return send_error(c, MHD_HTTP_NOT_FOUND, "the run has no such picture");
    struct MHD_Response *r = MHD_create_response_from_buffer(len, png, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(png);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "image/png");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

/* The name after /api/pictures/ when it is one of the run's pictures, else NULL. */
static const char *picture_name(const char *url)
{
    const char *pre = "/api/pictures/";
    if (strncmp(url, pre, strlen(pre)) != 0) return NULL;
    for (int i = 0; ag__serve_pictures[i]; i++)
        if (strcmp(url + strlen(pre), ag__serve_pictures[i]) == 0) return ag__serve_pictures[i];
    return NULL;
}

/* GET /api/run, /api/metrics, /api/dynamics, /api/report, /api/pictures/... */
static enum MHD_Result run_call(struct MHD_Connection *c, server *S, const char *url)
{
    const char *pic = picture_name(url);
    if (pic) return picture_call(c, S, pic);
    if (strcmp(url, "/api/metrics") == 0) return send_json(c, MHD_HTTP_OK, ag__serve_csv(S->dir, "metrics.csv"));
    if (strcmp(url, "/api/dynamics") == 0) return send_json(c, MHD_HTTP_OK, ag__serve_csv(S->dir, "dynamics.csv"));
    if (strcmp(url, "/api/report") == 0) return send_json(c, MHD_HTTP_OK, ag__serve_report(S->dir));
    ag_served *m = ag__serve_store_get(&S->store);
    enum MHD_Result res = send_json(c, MHD_HTTP_OK, ag__serve_run_json(S->dir, &S->store, m));
    ag__serve_store_put(&S->store, m);
    return res;
}

static const web_file *find_file(const char *url)
{
    if (strcmp(url, "/") == 0) url = "/index.html";
    for (size_t i = 0; i < sizeof web_files / sizeof *web_files; i++)
        if (strcmp(url, web_files[i].path) == 0) return &web_files[i];
    return NULL;
}

/* On loopback, a Host header must name this machine: a web page elsewhere that points its own
 * name at 127.0.0.1 (DNS rebinding) would otherwise read the run through the user's browser. */
static bool host_ok(struct MHD_Connection *c, const server *S)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (!S->loopback || !h) return true;   /* HTTP/1.0 may send none */
    size_t n = strcspn(h, ":");
    return (n == 9 && strncmp(h, "127.0.0.1", 9) == 0) || (n == 9 && strncmp(h, "localhost", 9) == 0);
}

static enum MHD_Result route(struct MHD_Connection *c, server *S, const char *url, const char *method,
                             const upload *u)
{
    if (!host_ok(c, S)) return send_error(c, MHD_HTTP_FORBIDDEN, "the Host header names another server");
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0, post = strcmp(method, "POST") == 0;
    bool is_post = strcmp(url, "/api/sample") == 0 || (strcmp(url, "/api/attention") == 0 && S->c->attention);
    bool is_get = strcmp(url, "/api/run") == 0 || strcmp(url, "/api/metrics") == 0 ||
                  strcmp(url, "/api/dynamics") == 0 || strcmp(url, "/api/report") == 0 || picture_name(url);
    const web_file *f = is_post || is_get ? NULL : find_file(url);
    if (!is_post && !is_get && !f) return send_error(c, MHD_HTTP_NOT_FOUND, "unknown path");
    if (is_post && !post) return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "this call takes POST with a JSON body");
    if (!is_post && !get) return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "this path takes GET");
    if (f) return send_file(c, f);
    if (is_get) return run_call(c, S, url);
    return model_call(c, S, u, strcmp(url, "/api/sample") == 0 ? AG_REQ_SAMPLE : AG_REQ_ATTENTION);
}

/* libmicrohttpd's handler: called once with the headers, then per piece of body, then once more. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **con_cls)
{
    (void)version;
    upload *u = *con_cls;
    if (!u) {
        if (!(u = calloc(1, sizeof *u))) return MHD_NO;
        *con_cls = u;
        return MHD_YES;
    }
    if (*data_size) {   /* keep the first AG_SERVE_MAX_BODY bytes; more only marks it */
        size_t room = sizeof u->body - u->len, n = *data_size < room ? *data_size : room;
        memcpy(u->body + u->len, data, n);
        u->len += n;
        u->too_big |= n < *data_size;
        *data_size = 0;
        return MHD_YES;
    }
    return route(c, cls, url, method, u);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t)
{
    (void)cls, (void)c, (void)t;
    free(*con_cls);
    *con_cls = NULL;
}

// --- the socket and the daemon ---

/* A listening socket on host:port (IPv4; port 0: any), its port in *bound. */
static ag_status listen_on(const char *host, int port, int *fd, int *bound, ag_error *err)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return ag_seterr(err, AG_ERR_ARG, "--host '%s': give an IPv4 address (127.0.0.1, 0.0.0.0)", host);
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t len = sizeof a;
    if (*fd < 0 || setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(*fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(*fd, AG_SERVE_BACKLOG) != 0 ||
        getsockname(*fd, (struct sockaddr *)&a, &len) != 0) {
        int e = errno;
        if (*fd >= 0) close(*fd);
        return ag_seterr(err, AG_ERR_IO, "cannot listen on %s:%d: %s", host, port, strerror(e));
    }
    *bound = ntohs(a.sin_port);
    return AG_OK;
}

static struct MHD_Daemon *start_daemon(server *S, int fd)
{
    return MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL, NULL,
                            on_request, S, MHD_OPTION_LISTEN_SOCKET, fd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)AG_SERVE_MAX_CONN,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)AG_SERVE_IDLE_S,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
}

static void say_url(FILE *out, FILE *warn, const ag_serve_args *a, int port, const ag_served *m)
{
    const char *p = ag__train_program();
    bool loopback = strncmp(a->host, "127.", 4) == 0 || strcmp(a->host, "localhost") == 0;
    if (!loopback && warn)
        fprintf(warn, "%s: warning: --host %s: the model and the run's files are served to the network, "
                "without a password\n", p, a->host);
    fprintf(out, "%s serve: http://%s:%d/ (run %s, %s at iteration %ld; Ctrl-C stops)\n", p, a->host, port, a->run,
            *m->name ? m->name : "checkpoint", m->iter);
    fflush(out);
}

/* stop NULL: SIGINT and SIGTERM set this, for the call's length */
static volatile sig_atomic_t own_stop;
static void on_stop(int sig) { own_stop = sig; }

/* Serves on the listening socket fd until *stop; then waits for the sample threads. */
static ag_status serve_until(server *S, const ag_serve_args *a, int fd, int port, FILE *out, FILE *warn,
                             ag_error *err)
{
    ag_status s = AG_OK;
    pthread_mutex_init(&S->mu, NULL);
    pthread_cond_init(&S->idle, NULL);
    /* each request's arena (1 MiB chunks and up) mapped and unmapped, never kept in one of the
     * per-thread malloc arenas: without it glibc raises its threshold after the first free and
     * the RSS grew by 40 MB in 20 s of bench/serve_load.py, no leak but no bound either */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    mallopt(M_ARENA_MAX, 4);
    struct MHD_Daemon *d = start_daemon(S, fd);
    if (!d) s = ag_seterr(err, AG_ERR_IO, "cannot start the HTTP server on %s:%d", a->host, port);
    else say_url(out, warn, a, port, S->store.cur);
    for (int tick = 1; d && !*S->stop; tick++) {
        nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
        if (tick % 40 == 0) malloc_trim(0);   /* every 2 s: what the requests freed goes back */
    }
    if (d) MHD_stop_daemon(d);
    pthread_mutex_lock(&S->mu);   /* the sample threads end within a token of the stop */
    while (S->streams > 0) pthread_cond_wait(&S->idle, &S->mu);
    pthread_mutex_unlock(&S->mu);
    return s;
}

ag_status ag_serve_run(const ag_serve_client *c, const ag_serve_args *a, const volatile sig_atomic_t *stop,
                       FILE *out, FILE *warn, int *stopped_by, ag_error *err)
{
    static server S;   /* static: threads may reach it until the daemon has stopped */
    memset(&S, 0, sizeof S);
    S.c = c;
    S.dir = a->run;
    S.stop = stop ? stop : &own_stop;
    S.loopback = strncmp(a->host, "127.", 4) == 0 || strcmp(a->host, "localhost") == 0;
    ag_threads_init(1);   /* many requests side by side, rather than one on many threads */
    int fd = -1, port = 0;
    ag_status s = ag__serve_store_open(&S.store, c, a->run, err);
    if (s) return s;
    if ((s = listen_on(a->host, a->port, &fd, &port, err))) {
        ag__serve_store_close(&S.store);
        return s;
    }
    struct sigaction on = { .sa_handler = on_stop }, was_int, was_term;
    own_stop = 0;
    if (!stop) sigaction(SIGINT, &on, &was_int), sigaction(SIGTERM, &on, &was_term);
    signal(SIGPIPE, SIG_IGN);   /* a client gone: a failed write, not a dead server */
    s = serve_until(&S, a, fd, port, out, warn, err);
    if (!stop) sigaction(SIGINT, &was_int, NULL), sigaction(SIGTERM, &was_term, NULL);
    close(fd);
    ag__serve_store_close(&S.store);
    if (stopped_by) *stopped_by = stop ? (int)*stop : (int)own_stop;
    return s;
}
