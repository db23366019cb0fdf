/* test_serve.c -- `char_lm serve` (issue 34) seen from a client: a tiny run is trained, the
 * server started on it with --port 0 (the port it prints), and every call of docs/serve.md
 * asked over 127.0.0.1. A sample equals `char_lm sample` with the same seed, attention equals
 * the weights `char_lm attn` writes, every bad request gets a 4xx and one line of JSON and the
 * server answers the next call, a checkpoint that moves is picked up and a bad one is not.
 * SIGTERM then ends it with 143. Under $CHAR_LM_WRAP (valgrind) the same calls run, slower.
 * The library's serve with a model of its own, no char_lm: tests/test_serve_lib.c. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "tools.h"
#include "proc.h"
#include "train/train.h"
#include "tcases.h"

static char root[64];
static pid_t server;
static int port;

#define A(...) ((const char *const[]){__VA_ARGS__, NULL})
#define PROMPT "the old king"

static void serve_setup(void)
{
    strcpy(root, "/tmp/ag_serve_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    size_t n;
    char *text = proc_make_corpus(20000, &n);
    proc_write_file(proc_path(root, "text.txt"), text, n);
    free(text);
    proc_result r;
    proc_opts quick = { .no_wrap = true };
    proc_run(root, A("train", "--data", "text.txt", "--out", "run", "--config", "tiny", "--max-iters", "30",
                     "--eval-interval", "10", "--eval-iters", "2", "--threads", "1"), proc_path(root, "train"), &quick, &r);
    ck_assert_msg(r.exited && r.code == 0, "train: %s: %s", proc_status_str(&r), r.err);
    proc_result_free(&r);
    server = proc_start(root, A("serve", "--run", "run", "--port", "0"), proc_path(root, "serve"), NULL);
    port = proc_wait_port(server, proc_path(root, "serve.out"));
}

static void serve_teardown(void)
{
    kill(server, SIGTERM);
    proc_result r;
    proc_wait(server, proc_path(root, "serve"), NULL, &r);
    ck_assert_msg(r.exited && r.code == 143, "serve after SIGTERM: %s: %s", proc_status_str(&r), r.err);
    ck_assert_msg(r.err_len == 0, "serve said on stderr: %s", r.err);
    proc_result_free(&r);
    proc_remove_tree(root);
}

// --- a client: HTTP/1.0, so the answer ends when the server closes ---

typedef proc_reply reply;

static reply http_as(const char *host, const char *method, const char *path, const char *body)
{
    return proc_http(port, host, method, path, body);
}

static reply http(const char *method, const char *path, const char *body)
{
    return http_as("127.0.0.1", method, path, body);
}

static json_t *json_of(const reply *r)
{
    json_error_t e;
    json_t *o = json_loads(r->body, 0, &e);
    ck_assert_msg(o != NULL, "not JSON (%s): %.200s", e.text, r->body);
    return o;
}

static json_t *call(const char *method, const char *path, const char *body, int status)
{
    reply r = http(method, path, body);
    ck_assert_msg(r.status == status, "%s %s: %d, wanted %d: %.300s", method, path, r.status, status, r.body);
    json_t *o = json_of(&r);
    free(r.body);
    return o;
}

// --- the calls ---

START_TEST(run_call)
{
    json_t *o = call("GET", "/api/run", NULL, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "iter")), 30);
    ck_assert_str_eq(json_string_value(json_object_get(o, "latest")), "ckpt-00000030");
    ck_assert_str_eq(json_string_value(json_object_get(o, "checkpoint")), "ckpt-00000030");
    ck_assert(json_is_false(json_object_get(o, "training")));
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(o, "config"), "n_layer")), 2);
    json_decref(o);
    ag_lock l = {0};   /* a train holding the run, as serve sees it: training, with its pid */
    ag_error e = {0};
    ck_assert_msg(ag_lock_take(&l, proc_path(root, "run"), &e) == AG_OK, "%s", e.msg);
    o = call("GET", "/api/run", NULL, 200);
    ck_assert_msg(json_is_true(json_object_get(o, "training")), "not training: %s", json_string_value(json_object_get(o, "latest")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "trainer_pid")), getpid());
    json_decref(o);
    ag_lock_drop(&l);
}
END_TEST

START_TEST(csv_calls)
{
    char *csv = proc_read_file(proc_path(root, "run/metrics.csv"), NULL);
    ck_assert_ptr_nonnull(csv);
    json_t *o = call("GET", "/api/metrics", NULL, 200);
    json_t *rows = json_object_get(o, "rows");
    ck_assert_int_eq((int)json_array_size(rows), proc_lines(csv) - 1);   /* every row, not the header */
    ck_assert_int_eq((int)json_array_size(json_object_get(o, "columns")), 6);
    ck_assert_int_eq(json_integer_value(json_array_get(json_array_get(rows, 29), 0)), 29);
    ck_assert(json_is_real(json_array_get(json_array_get(rows, 10), 3)));   /* the evaluation at 10 */
    ck_assert(json_is_null(json_array_get(json_array_get(rows, 11), 3)));
    json_decref(o);
    free(csv);
    o = call("GET", "/api/dynamics", NULL, 200);   /* without --log-dynamics: none */
    ck_assert(json_is_true(json_object_get(o, "missing")));
    json_decref(o);
}
END_TEST

/* char_lm sample's text after the prompt, without the last newline. */
static char *cli_sample(const char *n, const char *seed, const char *top_k, const char *temp)
{
    proc_result r;
    proc_opts quick = { .no_wrap = true };
    proc_run(root, A("sample", "--ckpt", "run", "--prompt", PROMPT, "--max-new-tokens", n, "--seed", seed, "--top-k",
                     top_k, "--temperature", temp), proc_path(root, "sample"), &quick, &r);
    ck_assert_msg(r.exited && r.code == 0, "sample: %s", r.err);
    ck_assert(strncmp(r.out, PROMPT, strlen(PROMPT)) == 0 && r.out_len > strlen(PROMPT));
    char *text = strndup(r.out + strlen(PROMPT), r.out_len - strlen(PROMPT) - 1);
    proc_result_free(&r);
    return text;
}

/* Each token's top-5: probabilities falling, summing to at most 1 (to 1 with top_k 5), the
 * drawn character among them when top_k is 5. */
static void check_top(json_t *tok, bool k5)
{
    json_t *top = json_object_get(tok, "top");
    ck_assert_int_eq((int)json_array_size(top), 5);
    double sum = 0, last = 1;
    bool drawn = false;
    for (size_t i = 0; i < 5; i++) {
        json_t *t = json_array_get(top, i);
        double p = json_number_value(json_object_get(t, "p"));
        ck_assert(p <= last + 1e-9 && p >= 0);
        last = p;
        sum += p;
        drawn |= strcmp(json_string_value(json_object_get(t, "c")), json_string_value(json_object_get(tok, "c"))) == 0;
    }
    ck_assert(sum <= 1 + 1e-4);
    if (k5) ck_assert_msg(fabs(sum - 1) < 1e-4 && drawn, "top-5 of a top_k 5 draw sums to %g", sum);
}

START_TEST(sample_equals_cli)
{
    char *want = cli_sample("60", "7", "5", "0.8");
    json_t *o = call("POST", "/api/sample", "{\"prompt\": \"" PROMPT "\", \"n\": 60, \"seed\": 7, \"top_k\": 5, "
                     "\"temperature\": 0.8, \"stream\": false}", 200);
    ck_assert_str_eq(json_string_value(json_object_get(o, "text")), want);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "n")), 60);
    size_t i;
    json_t *tok;
    json_array_foreach(json_object_get(o, "tokens"), i, tok) check_top(tok, true);
    json_decref(o);
    free(want);
}
END_TEST

/* The streamed events: "token" data lines, then one "done". */
START_TEST(sample_stream)
{
    char *want = cli_sample("40", "3", "0", "1.0");
    reply r = http("POST", "/api/sample", "{\"prompt\": \"" PROMPT "\", \"n\": 40, \"seed\": 3}");
    ck_assert_int_eq(r.status, 200);
    char got[4 * 40 + 1] = "";
    int tokens = 0, done = 0;
    for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
        if (strcmp(line, "event: done") == 0) done++;
        if (strncmp(line, "data: ", 6) != 0 || done) continue;
        json_error_t e;
        json_t *tok = json_loads(line + 6, 0, &e);
        ck_assert_msg(tok != NULL, "bad event data: %s", line);
        strcat(got, json_string_value(json_object_get(tok, "c")));
        check_top(tok, false);
        json_decref(tok);
        tokens++;
    }
    ck_assert_int_eq(tokens, 40);
    ck_assert_int_eq(done, 1);
    ck_assert_str_eq(got, want);
    free(r.body);
    free(want);
}
END_TEST

/* The weights of layer l that `char_lm attn` writes (attn.dat: one T x T block per head). */
static ag_real *cli_attention(int l, int T, int H)
{
    char layer[16];   /* any int */
    snprintf(layer, sizeof layer, "%d", l);
    proc_result r;
    proc_opts quick = { .no_wrap = true };
    proc_run(root, A("attn", "--ckpt", "run", "--prompt", PROMPT, "--layer", layer, "--out", "attn.png"),
             proc_path(root, "attn"), &quick, &r);
    ck_assert_msg(r.exited && r.code == 0, "attn: %s", r.err);
    proc_result_free(&r);
    FILE *f = fopen(proc_path(root, "attn.dat"), "r");
    ck_assert_ptr_nonnull(f);
    ag_real *W = malloc((size_t)H * T * T * sizeof *W);
    char word[32];
    for (int k = 0; k < H * T * T; k++) {
        ck_assert_int_eq(fscanf(f, "%31s", word), 1);
        W[k] = strcmp(word, "NaN") == 0 ? 0 : (ag_real)atof(word);   /* masked: weight 0 */
    }
    fclose(f);
    return W;
}

START_TEST(attention_equals_cli)
{
    json_t *o = call("POST", "/api/attention", "{\"prompt\": \"" PROMPT "\"}", 200);
    int T = (int)strlen(PROMPT), L = 2, H = 2;
    ck_assert_int_eq(json_integer_value(json_object_get(o, "T")), T);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(o, "chars"), 3)), "\xe2\x90\xa3");   /* ' ' */
    for (int l = 0; l < L; l++) {
        ag_real *W = cli_attention(l, T, H);
        json_t *heads = json_array_get(json_object_get(o, "layers"), (size_t)l);
        ck_assert_int_eq((int)json_array_size(heads), H);
        for (int h = 0; h < H; h++) {
            json_t *hd = json_array_get(heads, (size_t)h), *rows = json_object_get(hd, "weights");
            ck_assert_int_eq((int)json_array_size(rows), T);
            for (int t = 0; t < T; t++) {
                json_t *row = json_array_get(rows, (size_t)t);
                ck_assert_int_eq((int)json_array_size(row), t + 1);   /* the masked future left out */
                for (int j = 0; j <= t; j++) {
                    double got = json_number_value(json_array_get(row, (size_t)j));
                    double want = (double)W[((size_t)h * T + t) * T + j];
                    ck_assert_msg(fabs(got - want) < 2e-6, "layer %d head %d [%d,%d]: %g, attn %g", l, h, t, j, got, want);
                }
            }
            double entropy, peak;   /* the entropy of attn's own weights, as --log-attn-stats computes it */
            ag_attn_stats(W + (size_t)h * T * T, 1, 1, T, &entropy, &peak);
            ck_assert(fabs(json_number_value(json_object_get(hd, "entropy")) - entropy) < 1e-4);
            ag_attn_head named;   /* the name `char_lm attn` prints for these weights */
            ag_attn_head_summary(W + (size_t)h * T * T, T, &named);
            ck_assert_str_eq(json_string_value(json_object_get(hd, "pattern")), ag_chars_pattern_names[named.pattern]);
        }
        free(W);
    }
    json_decref(o);
}
END_TEST

/* Every bad request: its status, one line of JSON with a reason, and the server answers next. */
START_TEST(bad_requests)
{
    char *big = malloc(20000), *ctx = malloc(64);
    memset(big, ' ', 19999);
    big[19999] = '\0';
    snprintf(ctx, 64, "{\"prompt\": \"%s\"}", PROMPT " " PROMPT " " PROMPT);   /* 38 > block_size 32 */
    const struct { const char *method, *path, *body, *reason; int status; } bad[] = {
        {"POST", "/api/sample", "{\"prompt\": \"caf\\u00e9\"}", "not in the vocabulary", 400},
        {"POST", "/api/sample", "{\"prompt\": \"a\", \"top_k\": 0}", "top_k\\\" is 0", 400},
        {"POST", "/api/sample", "{\"prompt\": \"a\", \"n\": -1}", "n\\\" is -1", 400},
        {"POST", "/api/sample", "{\"prompt\": \"a\", \"n\": 2001}", "n\\\" is 2001", 400},
        {"POST", "/api/sample", "{\"prompt\": \"a\", \"n\": 1.5}", "must be an integer", 400},
        {"POST", "/api/sample", "{\"prompt\": \"a\", \"temperature\": 0}", "temperature\\\" is 0", 400},
        {"POST", "/api/sample", "{\"prompt\": \"a\", \"topk\": 3}", "unknown field", 400},
        {"POST", "/api/sample", "{\"prompt\": \"\"}", "must not be empty", 400},
        {"POST", "/api/sample", "{\"prompt\": \"a\\u0000b\"}", "NUL", 400},
        {"POST", "/api/sample", "{\"prompt\": 5}", "must be a string", 400},
        {"POST", "/api/sample", "[1, 2]", "JSON object", 400},
        {"POST", "/api/sample", "{\"prompt\": \"a\"", "malformed JSON", 400},
        {"POST", "/api/sample", "", "malformed JSON", 400},
        {"POST", "/api/sample", ctx, "context is 32", 400},
        {"POST", "/api/attention", ctx, "context is 32", 400},
        {"POST", "/api/attention", "{\"prompt\": \"a\", \"n\": 3}", "unknown field", 400},
        {"POST", "/api/sample", big, "over 16384 bytes", 413},
        {"GET", "/api/sample", NULL, "takes POST", 405},
        {"POST", "/api/run", "{}", "takes GET", 405},
        {"GET", "/nope", NULL, "unknown path", 404},
        {"GET", "/../metrics.csv", NULL, "unknown path", 404},
        {"GET", "/api/run/../../text.txt", NULL, "unknown path", 404},
        {"GET", "/run/metrics.csv", NULL, "unknown path", 404},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        reply r = http(bad[i].method, bad[i].path, bad[i].body);
        ck_assert_msg(r.status == bad[i].status, "case %zu (%s %s): %d, wanted %d: %s", i, bad[i].method, bad[i].path,
                      r.status, bad[i].status, r.body);
        ck_assert_msg(proc_lines(r.body) == 1 && strstr(r.body, "\"error\"") && strstr(r.body, bad[i].reason),
                      "case %zu: not one line with '%s': %s", i, bad[i].reason, r.body);
        json_decref(json_of(&r));
        free(r.body);
        json_decref(call("GET", "/api/run", NULL, 200));   /* still serving */
    }
    free(ctx);
    free(big);
}
END_TEST

/* A page elsewhere whose name points at 127.0.0.1 (DNS rebinding) reaches nothing: its Host is
 * refused; this machine's names, with or without the port, are served. */
START_TEST(host_header)
{
    const char *refused[] = {"attacker.example:8080", "127.0.0.10", "localhost.attacker.example"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        reply r = http_as(refused[i], "GET", "/api/metrics", NULL);
        ck_assert_msg(r.status == 403 && strstr(r.body, "names another server"), "Host %s: %d %s", refused[i], r.status,
                      r.body);
        free(r.body);
    }
    char here[32];
    snprintf(here, sizeof here, "localhost:%d", port);
    reply r = http_as(here, "GET", "/api/run", NULL);
    ck_assert_int_eq(r.status, 200);
    free(r.body);
}
END_TEST

/* The page's files are there, and a client that leaves mid-stream or mid-request changes nothing. */
START_TEST(page_and_clients_that_leave)
{
    const char *files[] = {"/", "/index.html", "/app.js", "/style.css"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        reply r = http("GET", files[i], NULL);
        ck_assert_msg(r.status == 200 && strlen(r.body) > 100, "%s: %d", files[i], r.status);
        free(r.body);
    }
    int half = proc_connect(port);   /* half a request, then gone */
    proc_send_all(half, "POST /api/sample HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro", 55);
    close(half);
    int gone = proc_connect(port);   /* a long stream, read a little, then gone */
    const char *req = "POST /api/sample HTTP/1.0\r\nContent-Length: 30\r\n\r\n{\"prompt\": \"the a\", \"n\": 2000}";
    proc_send_all(gone, req, strlen(req));
    char buf[256];
    ck_assert(read(gone, buf, sizeof buf) > 0);
    close(gone);
    json_decref(call("GET", "/api/run", NULL, 200));
}
END_TEST

/* train --resume moves latest: the next request has the new model. A latest naming a broken
 * checkpoint keeps the one before. (Last: it changes the run.) */
START_TEST(latest_moves)
{
    proc_result r;
    proc_opts quick = { .no_wrap = true };
    proc_run(root, A("train", "--data", "text.txt", "--out", "run", "--resume", "--max-iters", "40"),
             proc_path(root, "train"), &quick, &r);
    ck_assert_msg(r.exited && r.code == 0, "resume: %s", r.err);
    proc_result_free(&r);
    json_t *o = call("GET", "/api/run", NULL, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "iter")), 40);
    ck_assert_str_eq(json_string_value(json_object_get(o, "checkpoint")), "ckpt-00000040");
    json_decref(o);
    proc_copy_tree(proc_path(root, "run/ckpt-00000040"), proc_path(root, "run/ckpt-00000050"));
    proc_write_file(proc_path(root, "run/ckpt-00000050/model.safetensors"), "\x08\0\0\0\0\0\0\0{}", 10);
    proc_write_file(proc_path(root, "run/latest"), "ckpt-00000050\n", 14);
    o = call("POST", "/api/sample", "{\"prompt\": \"ab\", \"n\": 5, \"stream\": false}", 200);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "iter")), 40);
    json_decref(o);
    proc_write_file(proc_path(root, "run/latest"), "ckpt-00000099\n", 14);   /* names nothing */
    json_decref(call("GET", "/api/run", NULL, 200));
    proc_write_file(proc_path(root, "run/latest"), "ckpt-00000040\n", 14);
}
END_TEST

/* The command line: each mistake one line on stderr and exit 2 (1 for a run with no model). */
START_TEST(command_line)
{
    char dir[64] = "/tmp/ag_serve_cli_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const struct { const char *const *args; int code; const char *says; } cases[] = {
        {A("serve"), 2, "--run is required"},
        {A("serve", "--run", "x", "--port", "70000"), 2, "--port '70000'"},
        {A("serve", "--run", "x", "--bogus"), 2, "unknown flag '--bogus'"},
        {A("serve", "--run", "x", "--port"), 2, "--port needs a value"},
        {A("serve", "--run", "nothing-here"), 1, "nothing-here"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        proc_result r;
        proc_run(dir, cases[i].args, proc_path(dir, "cli"), NULL, &r);
        ck_assert_msg(r.exited && r.code == cases[i].code && proc_lines(r.err) == 1 && strstr(r.err, cases[i].says) &&
                      !strstr(r.err, "latest: cannot open"), "case %zu: %s: %s", i, proc_status_str(&r), r.err);
        proc_result_free(&r);
    }
    proc_remove_tree(dir);
}
END_TEST

Suite *serve_suite(void)
{
    Suite *s = suite_create("serve");
    TCase *params = tcase_create("cli");
    ADD_TESTS(params, command_line);
    suite_add_tcase(s, params);
    TCase *tc = tcase_create("api");
    tcase_add_unchecked_fixture(tc, serve_setup, serve_teardown);
    tcase_set_timeout(tc, 120);
    ADD_TESTS(tc, run_call, csv_calls, sample_equals_cli, sample_stream, attention_equals_cli, bad_requests,
                  host_header, page_and_clients_that_leave, latest_moves);
    suite_add_tcase(s, tc);
    return s;
}
