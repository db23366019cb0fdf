/* test_serve_lib.c -- the library's serve (src/serve/serve.h) with a model of the test's own,
 * which has no attention and no run_json: what any program other than char_lm gets (char_lm's
 * serve, seen from a client: examples/char_lm/tests/test_serve.c), and serve's request
 * parameters alone (src/serve/params.c); a GPT over characters served with the library's sample
 * and attention for one (ag_serve_chars_sample, ag_serve_chars_attention); the command whole
 * (ag_serve_main): its exit codes. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "proc.h"
#include "attograd.h"
#include "tcases.h"

static int port;

/* METHOD PATH over HTTP/1.0 on 127.0.0.1:port: the answer's JSON, its status `status` */
static json_t *call(const char *method, const char *path, const char *body, int status)
{
    proc_reply r = proc_http(port, "127.0.0.1", method, path, body);
    json_error_t e = {.text = "-"};
    json_t *o = r.status == status ? json_loads(r.body, 0, &e) : NULL;
    ck_assert_msg(o != NULL, "%s %s: %d, wanted %d (JSON: %s): %.300s", method, path, r.status, status, e.text,
                  r.body);
    free(r.body);
    return o;
}

/* A "model" of the letters a, b, c that answers a prompt with its letters reversed, each drawn
 * from logits that favour it; it has no attention and no run_json. */
static void toy_label(const void *u, int id, char *out)
{
    (void)u;
    out[0] = (char)('a' + id), out[1] = '\0';
}

static void *toy_load(void *user, const char *dir, const char *ckpt, long *iter, ag_error *err)
{
    (void)user, (void)dir, (void)err;
    *iter = 7;
    return strstr(ckpt, "ckpt-00000007") ? (void *)"toy" : NULL;
}

static void toy_free(void *user, void *model) { (void)user, (void)model; }

static int toy_check(void *model, const char *prompt, char *why, size_t n)
{
    (void)model;
    return prompt[strspn(prompt, "abc")] ? snprintf(why, n, "toy: letters a to c only"), 400 : 0;
}

static ag_status toy_sample(void *model, const ag_serve_req *r, ag_serve_sink *k, const volatile sig_atomic_t *stop,
                            ag_error *err)
{
    (void)model, (void)stop, (void)err;
    for (long t = 0, len = (long)strlen(r->prompt); t < len && t < r->n; t++) {
        int id = r->prompt[len - 1 - t] - 'a';
        ag_real logits[3] = {0, 0, 0};
        logits[id] = 2;
        char *tok = ag_serve_token(id, logits, 3, r, toy_label, NULL);
        bool ok = ag_serve_emit(k, tok);
        free(tok);
        if (!ok) break;
    }
    return AG_OK;
}

static const ag_serve_client toy = {.what = "sample", .load = toy_load, .free = toy_free, .check = toy_check,
                                    .sample = toy_sample};

typedef struct {
    const ag_serve_client *c;
    ag_serve_args a;
    volatile sig_atomic_t stop;
    FILE *out, *in;
    pthread_t th;
    ag_status s;
} toy_server;

static void *toy_thread(void *arg)
{
    toy_server *t = arg;
    ag_error e = {0};
    t->s = ag_serve_run(t->c, &t->a, &t->stop, t->out, NULL, NULL, &e);
    fclose(t->out);
    return NULL;
}

/* c served over dir in a thread of its own, its port in port */
static void serve_start(toy_server *t, const ag_serve_client *c, const char *dir)
{
    char line[256] = "";
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    *t = (toy_server){.c = c, .a = {dir, "127.0.0.1", 0}, .out = fdopen(p[1], "w"), .in = fdopen(p[0], "r")};
    ck_assert_int_eq(pthread_create(&t->th, NULL, toy_thread, t), 0);
    ck_assert_msg(fgets(line, sizeof line, t->in) && strstr(line, "http://127.0.0.1:"), "no URL: %s", line);
    port = atoi(strstr(line, "http://127.0.0.1:") + strlen("http://127.0.0.1:"));
}

static void serve_stop(toy_server *t)
{
    t->stop = 1;
    pthread_join(t->th, NULL);
    fclose(t->in);
    ck_assert_int_eq(t->s, AG_OK);
}

/* o as compact JSON, in a buffer that the next call reuses. */
static const char *json_dumps_tmp(const json_t *o)
{
    static char buf[256];
    size_t n = json_dumpb(o, buf, sizeof buf - 1, JSON_COMPACT);
    ck_assert(n < sizeof buf - 1);
    buf[n] = '\0';
    return buf;
}

/* The toy run's report.md and pictures: what is there, what is not, what is a link. */
static void toy_files(void)
{
    json_t *o = call("GET", "/api/report", NULL, 200);
    ck_assert_str_eq(json_string_value(json_object_get(o, "text")), "# the toy's card\n");
    json_decref(o);
    proc_reply r = proc_http(port, "127.0.0.1", "GET", "/api/pictures/loss.png", NULL);
    ck_assert_msg(r.status == 200 && memcmp(r.body, "\x89PNG", 4) == 0, "loss.png: %d", r.status);
    free(r.body);
    json_decref(call("GET", "/api/pictures/dynamics.png", NULL, 404));   /* the link */
    json_decref(call("GET", "/api/pictures/lr_find.png", NULL, 404));    /* not there */
    json_decref(call("GET", "/api/pictures/report.md", NULL, 404));      /* not a picture */
    json_decref(call("POST", "/api/report", "{}", 405));
}

START_TEST(library_serves_any_model)
{
    char dir[64] = "/tmp/ag_serve_toy_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    proc_write_file(proc_path(dir, "latest"), "ckpt-00000007\n", 14);
    proc_write_file(proc_path(dir, "metrics.csv"), "iter,loss\n0,1.5\n1,", 18);   /* a row being written */
    proc_write_file(proc_path(dir, "report.md"), "# the toy's card\n", 17);
    proc_write_file(proc_path(dir, "loss.png"), "\x89PNG\0...", 8);
    ck_assert_int_eq(symlink("report.md", proc_path(dir, "dynamics.png")), 0);   /* a link is not followed */
    ck_assert_int_eq(mkdir(proc_path(dir, "ckpt-00000007"), 0777), 0);
    static toy_server t;
    serve_start(&t, &toy, dir);
    json_t *o = call("GET", "/api/run", NULL, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "iter")), 7);
    ck_assert_str_eq(json_string_value(json_object_get(o, "checkpoint")), "ckpt-00000007");
    ck_assert(json_is_false(json_object_get(o, "attention")) && !json_object_get(o, "config"));
    ck_assert_str_eq(json_dumps_tmp(json_object_get(o, "checkpoints")), "[\"ckpt-00000007\"]");
    ck_assert_str_eq(json_dumps_tmp(json_object_get(o, "pictures")), "[\"loss.png\"]");
    json_decref(o);
    toy_files();
    o = call("POST", "/api/sample", "{\"prompt\": \"abc\", \"n\": 2, \"stream\": false}", 200);
    ck_assert_str_eq(json_string_value(json_object_get(o, "text")), "cb");
    json_t *top = json_array_get(json_object_get(json_array_get(json_object_get(o, "tokens"), 0), "top"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(top, "c")), "c");
    ck_assert_double_eq_tol(json_real_value(json_object_get(top, "p")), exp(2) / (exp(2) + 2), 1e-5);
    json_decref(o);
    proc_reply r = proc_http(port, "127.0.0.1", "POST", "/api/sample", "{\"prompt\": \"ab\"}");
    ck_assert_msg(r.status == 200 && strstr(r.body, "event: token\ndata: {\"c\":\"b\"") && strstr(r.body, "event: done"),
                  "stream: %s", r.body);
    free(r.body);
    json_decref(call("POST", "/api/sample", "{\"prompt\": \"abd\"}", 400));
    json_decref(call("POST", "/api/attention", "{\"prompt\": \"ab\"}", 404));   /* the model has none */
    o = call("GET", "/api/metrics", NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(o, "rows")), 1);
    json_decref(o);
    serve_stop(&t);
    proc_remove_tree(dir);
}
END_TEST

/* A GPT over the characters "\n ab" (untrained), served with the library's sample and attention
 * for a model of characters (ag_serve_chars_sample, ag_serve_chars_attention). */
typedef struct {
    ag_gpt *g;
    ag_vocab v;
} chars_model;

static void *chars_load(void *user, const char *dir, const char *ckpt, long *iter, ag_error *err)
{
    (void)dir, (void)ckpt, (void)err;
    *iter = 7;
    return user;
}

static int chars_check(void *model, const char *prompt, char *why, size_t n)
{
    return ag_serve_check_chars(&((chars_model *)model)->v, 8, prompt, why, n);
}

static ag_status chars_sample(void *model, const ag_serve_req *r, ag_serve_sink *k, const volatile sig_atomic_t *stop,
                              ag_error *err)
{
    chars_model *m = model;
    return ag_serve_chars_sample(m->g, &m->v, r, k, stop, err);
}

static char *chars_attention(void *model, const ag_serve_req *r, int *status, char *why, size_t n)
{
    chars_model *m = model;
    return ag_serve_chars_attention(m->g, 7, &m->v, r, status, why, n);
}

START_TEST(library_serves_chars)
{
    chars_model m;
    ag_error e = {0};
    ck_assert_msg(ag_vocab_from_json("v", "[10, 32, 97, 98]", &m.v, &e) == AG_OK, "%s", e.msg);
    ag_gpt_config cfg = {.vocab_size = 4, .n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 8};
    ck_assert_ptr_nonnull(m.g = ag_gpt_new(&cfg, 3, &e));
    const ag_serve_client c = {.what = "sample, attention", .user = &m, .load = chars_load, .free = toy_free,
                               .check = chars_check, .sample = chars_sample, .attention = chars_attention};
    char dir[64] = "/tmp/ag_serve_chars_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    proc_write_file(proc_path(dir, "latest"), "ckpt-00000007\n", 14);
    ck_assert_int_eq(mkdir(proc_path(dir, "ckpt-00000007"), 0777), 0);
    static toy_server t;
    serve_start(&t, &c, dir);
    json_t *o = call("POST", "/api/sample", "{\"prompt\": \"ab\", \"n\": 5, \"stream\": false}", 200);
    const char *text = json_string_value(json_object_get(o, "text"));
    ck_assert_msg(text && strlen(text) == 5 && !text[strspn(text, "\n ab")], "%s", text);   /* its characters */
    json_t *tok = json_array_get(json_object_get(o, "tokens"), 0);
    ck_assert_int_eq(json_string_value(json_object_get(tok, "c"))[0], text[0]);
    json_decref(o);
    o = call("POST", "/api/attention", "{\"prompt\": \"a b\\n\"}", 200);
    ck_assert_str_eq(json_dumps_tmp(json_object_get(o, "chars")), "[\"a\",\"\u2423\",\"b\",\"\\\\n\"]");
    json_t *head = json_array_get(json_array_get(json_object_get(o, "layers"), 1), 0);
    const char *pattern = json_string_value(json_object_get(head, "pattern"));
    bool named = false;
    for (int k = 0; k <= AG_ATTN_MIXED; k++) named |= strcmp(pattern, ag_chars_pattern_names[k]) == 0;
    ck_assert_msg(named && json_integer_value(json_object_get(o, "iter")) == 7, "%s", pattern);
    json_decref(o);
    json_decref(call("POST", "/api/attention", "{\"prompt\": \"abc\"}", 400));   /* not in the vocabulary */
    serve_stop(&t);
    proc_remove_tree(dir);
    ag_gpt_free(m.g);
    ag_vocab_free(&m.v);
}
END_TEST

/* ag_serve_main(&toy, argv [argc]) in a thread, stdout and stderr into dir/out and dir/err */
typedef struct {
    int argc;
    char **argv;
    int code;
} main_call;

static void *main_thread(void *arg)
{
    main_call *m = arg;
    m->code = ag_serve_main(&toy, m->argc, m->argv, "error: ");
    fflush(stdout);
    return NULL;
}

static int serve_main(const char *dir, int argc, char **argv, bool interrupt)
{
    fflush(stdout), fflush(stderr);
    int out = dup(1), err = dup(2);
    ck_assert(freopen(proc_path(dir, "out"), "w", stdout) && freopen(proc_path(dir, "err"), "w", stderr));
    main_call m = {argc, argv, -1};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, main_thread, &m), 0);
    for (int i = 0; interrupt && i < 500; i++) {   /* the URL out: the server is up */
        char *text = proc_read_file(proc_path(dir, "out"), NULL);
        bool up = text && strstr(text, "http://");
        free(text);
        if (up) break;
        usleep(10000);
    }
    if (interrupt) kill(getpid(), SIGINT);
    pthread_join(th, NULL);
    fflush(stdout), fflush(stderr);
    dup2(out, 1), dup2(err, 2), close(out), close(err);
    return m.code;
}

/* The command whole: a bad flag's line and 2, --help's usage and 0, a run Ctrl-C ends and 130. */
START_TEST(serve_main_exit_codes)
{
    char dir[64] = "/tmp/ag_serve_main_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ag_train_name("prog", "PROG");
    char *bad[] = {"prog", "serve", "--bogus"}, *help[] = {"prog", "serve", "--help"};
    ck_assert_int_eq(serve_main(dir, 3, bad, false), 2);
    char *text = proc_read_file(proc_path(dir, "err"), NULL);
    ck_assert_str_eq(text, "prog: error: unknown flag '--bogus' for serve (see: prog serve --help)\n");
    free(text);
    ck_assert_int_eq(serve_main(dir, 3, help, false), 0);
    ck_assert_ptr_nonnull(strstr(text = proc_read_file(proc_path(dir, "out"), NULL), "usage: prog serve --run DIR"));
    free(text);
    proc_write_file(proc_path(dir, "latest"), "ckpt-00000007\n", 14);
    ck_assert_int_eq(mkdir(proc_path(dir, "ckpt-00000007"), 0777), 0);
    char *run[] = {"prog", "serve", "--run", dir, "--port", "0"};
    ck_assert_int_eq(serve_main(dir, 6, run, true), 130);
    ck_assert_ptr_nonnull(strstr(text = proc_read_file(proc_path(dir, "out"), NULL), "prog serve: http://127.0.0.1:"));
    free(text);
    ag_train_name("attograd", "AG");
    proc_remove_tree(dir);
}
END_TEST

/* A model of vocabulary v and a context of 8 characters. */
static int check8(void *v, const char *prompt, char *why, size_t n)
{
    return ag_serve_check_chars(v, 8, prompt, why, n);
}

/* The library's parameters alone (src/serve/params.c): a refusal's reason is one line even where it quotes the
 * body (jansson's "near '...'" quoted a \r that fuzz/fuzz_serve.c found). */
START_TEST(params_one_line)
{
    ag_vocab v;
    ag_error e = {0};
    ck_assert_msg(ag_vocab_from_json("v", "[10, 32, 97, 98]", &v, &e) == AG_OK, "%s", e.msg);
    static ag_serve_req r;
    char why[512];
    const char *bodies[] = {"{\"prompt\": \"ab\\\r\"}", "{\"prompt\": \"a\",\r\n\"n\": x}", "{\"prompt\": \"\x01\"}"};
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        ck_assert_int_eq(ag_serve_req_parse(bodies[i], strlen(bodies[i]), AG_REQ_SAMPLE, check8, &v, &r, why, sizeof why), 400);
        ck_assert_msg(!strpbrk(why, "\r\n\x01"), "case %zu: not one line: %s", i, why);
    }
    const char *ok = "{\"prompt\": \"ab a\", \"n\": 3}";
    ck_assert_int_eq(ag_serve_req_parse(ok, strlen(ok), AG_REQ_SAMPLE, check8, &v, &r, why, sizeof why), 0);
    ck_assert_int_eq(r.n, 3);
    ck_assert_int_eq(r.top_k, 0);
    ck_assert(r.stream && r.seed == 1337 && r.temperature == 1.0);
    ag_vocab_free(&v);
}
END_TEST

Suite *serve_lib_suite(void)
{
    Suite *s = suite_create("serve_lib");
    TCase *tc = tcase_create("params");
    ADD_TESTS(tc, params_one_line, library_serves_any_model, library_serves_chars, serve_main_exit_codes);
    suite_add_tcase(s, tc);
    return s;
}
