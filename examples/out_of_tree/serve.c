/* serve.c -- the library's page and API over a run (<attograd/serve/serve.h>), from an installed
 * attograd, linked by `pkg-config --static --libs attograd` (libmicrohttpd is on the .pc's
 * Libs.private: a program that does not serve links without it).
 *
 *   serve_check RUN    RUN: a run of ag_train_run (trainer's DIR/unbroken)
 *
 * Its model is a toy of its own (it writes a prompt of letters backwards; its "weights" are the
 * checkpoint's step, read from the name DIR/latest holds). The server runs in a thread on a free
 * port of 127.0.0.1; the program then asks it for the run, the run's metrics.csv and a sample,
 * as a browser would, and stops it. Exit 0 when every answer is right. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <attograd/attograd.h>

static void *load(void *user, const char *dir, const char *ckpt, long *iter, ag_error *err)
{
    (void)user, (void)dir;
    const char *name = strrchr(ckpt, '/');
    if (!name || sscanf(name, "/ckpt-%ld", iter) != 1) return ag_seterr(err, AG_ERR_FORMAT, "%s: no step", ckpt), NULL;
    return (void *)"toy";
}

static void unload(void *user, void *model) { (void)user, (void)model; }

static int check(void *model, const char *prompt, char *why, size_t n)
{
    (void)model;
    return prompt[strspn(prompt, "abcdefghijklmnopqrstuvwxyz")] ? snprintf(why, n, "letters a-z only"), 400 : 0;
}

static void letter(const void *u, int id, char *out) { (void)u, out[0] = (char)('a' + id), out[1] = '\0'; }

/* The prompt backwards, each letter drawn from logits [26] that favour it. */
static ag_status sample(void *model, const ag_serve_req *r, ag_serve_sink *k, const volatile sig_atomic_t *stop,
                        ag_error *err)
{
    (void)model, (void)err;
    long len = (long)strlen(r->prompt);
    for (long t = 0; t < len && t < r->n && !*stop; t++) {
        ag_real logits[26] = {0};
        int id = r->prompt[len - 1 - t] - 'a';
        logits[id] = 3;
        char *tok = ag_serve_token(id, logits, 26, r, letter, NULL);
        bool ok = ag_serve_emit(k, tok);
        free(tok);
        if (!ok) break;
    }
    return AG_OK;
}

static const ag_serve_client toy = {.what = "sample", .load = load, .free = unload, .check = check,
                                    .sample = sample};

typedef struct {
    ag_serve_args a;
    volatile sig_atomic_t stop;
    FILE *out;   /* where the server prints its URL */
    ag_error err;
} server;

static void *serve_thread(void *arg)
{
    server *s = arg;
    ag_serve_run(&toy, &s->a, &s->stop, s->out, stderr, NULL, &s->err);
    fclose(s->out);
    return NULL;
}

/* METHOD path [body] over HTTP/1.0 to 127.0.0.1:port: the whole answer in buf [n]. */
static void ask(int port, const char *method, const char *path, const char *body, char *buf, size_t n)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    size_t len = 0;
    buf[0] = '\0';
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) return;
    dprintf(fd, "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: %zu\r\n\r\n%s", method, path,
            body ? strlen(body) : 0, body ? body : "");
    for (ssize_t got; len + 1 < n && (got = read(fd, buf + len, n - 1 - len)) > 0;) len += (size_t)got;
    buf[len] = '\0';
    close(fd);
}

static int expect(const char *what, const char *answer, const char *want)
{
    if (strstr(answer, want)) return printf("serve: %s: ok\n", what), 0;
    return fprintf(stderr, "serve: %s: no %s in: %.300s\n", what, want, answer), 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) return fprintf(stderr, "usage: serve_check RUN\n"), 2;
    ag_train_name("serve_check", "SERVE_CHECK");   /* the page's title, the URL line */
    static server s;
    int p[2], port = 0, bad = 0;
    char line[256] = "", *answer = malloc(1 << 16);
    if (!answer || pipe(p) != 0) return 1;
    s = (server){.a = {argv[1], "127.0.0.1", 0}, .out = fdopen(p[1], "w")};
    pthread_t t;
    if (pthread_create(&t, NULL, serve_thread, &s) != 0) return 1;
    FILE *in = fdopen(p[0], "r");
    const char *url = fgets(line, sizeof line, in) ? strstr(line, "http://127.0.0.1:") : NULL;
    if (url) port = atoi(url + strlen("http://127.0.0.1:"));
    if (port > 0) {
        ask(port, "GET", "/api/run", NULL, answer, 1 << 16);
        bad += expect("the run at its latest checkpoint", answer, "\"iter\":300,");
        ask(port, "GET", "/api/metrics", NULL, answer, 1 << 16);
        bad += expect("its metrics.csv", answer, "\"columns\":[\"iter\"");
        ask(port, "POST", "/api/sample", "{\"prompt\": \"abc\", \"stream\": false}", answer, 1 << 16);
        bad += expect("a sample", answer, "\"text\":\"cba\"");
        ask(port, "POST", "/api/attention", "{\"prompt\": \"abc\"}", answer, 1 << 16);
        bad += expect("no attention for this model", answer, "404");
    }
    s.stop = 1;
    pthread_join(t, NULL);
    fclose(in);
    free(answer);
    if (port <= 0) return fprintf(stderr, "serve: %s\n", s.err.status ? s.err.msg : "no URL"), 1;
    return bad ? 1 : 0;
}
