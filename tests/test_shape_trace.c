/* test_shape_trace.c -- the library's shape trace (nn/trace.h) on a model that is not a GPT: an
 * embedding, a linear head and the loss, each in a scope of its own.
 *
 *   - every op is one line, in tape order, with its layer, its shapes in the caller's letters
 *     (a parameter without its layer's prefix, an embedding table's rows in the rows' letters)
 *     and the library's note; the whole text is pinned, so a broken column breaks the test;
 *   - a size two letters share, and 1, are printed as numbers; a note of the caller's own;
 *   - the parameters by layer (up to the first dot) and their total;
 *   - the tape as Graphviz dot, and one error line for a path that cannot be written;
 *   - a GPT's trace (nn/gpt_trace.c): the batch's sizes chosen unlike the model's, every op of
 *     attention op by op in MODEL.md's letters, the parameters by layer, the model untouched;
 *     a parameter's letters (T_max only for the position table's rows); windows of a text. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "attograd.h"
#include "tcases.h"

typedef struct {
    ag_params *P;
    ag_embedding_layer emb;   /* V=11 rows of E=6 */
    ag_linear_layer head;     /* E=6 -> K=3 */
    ag_ctx *ctx;
} tiny_model;

/* ids [B=2, T=4] -> emb [B,T,E] -> head [B,T,K] -> the loss, recorded in m->ctx's tape */
static void tiny_forward(tiny_model *m)
{
    m->P = ag_params_new();
    ck_assert_ptr_nonnull(m->P);
    ck_assert_int_eq(ag_embedding_layer_init(&m->emb, m->P, "emb", 11, 6, 0.02), AG_OK);
    ck_assert_int_eq(ag_linear_layer_init(&m->head, m->P, "head", 6, 3, true, 0.02), AG_OK);
    ck_assert_int_eq(ag_params_alloc(m->P), AG_OK);
    ag_params_init(m->P, 1);
    m->ctx = ag_ctx_new();
    ck_assert_ptr_nonnull(m->ctx);
    const int ids[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, targets[8] = { 0, 1, 2, 0, 1, 2, 0, 1 };
    ag_ctx_set_scope(m->ctx, "emb");
    ag_tensor *x = ag_embedding_layer_forward(m->ctx, &m->emb, ids, 2, 4);          // [B,T,E]
    ag_ctx_set_scope(m->ctx, "head");
    ag_tensor *logits = ag_linear_layer_forward(m->ctx, &m->head, x);              // [B,T,K]
    ag_ctx_set_scope(m->ctx, "loss");
    ck_assert_ptr_nonnull(ag_cross_entropy(m->ctx, logits, targets));             // [1]
    ag_ctx_set_scope(m->ctx, NULL);
}

static void tiny_free(tiny_model *m)
{
    ag_ctx_free(m->ctx);
    ag_params_free(m->P);
}

/* The letters of the tiny model: activations B T E K (and extra, when not NULL, for K's size),
 * parameters E K, the table's rows V */
static void tiny_letters(ag_letters *act, ag_letters *par, ag_letters *rows, const char *extra)
{
    *act = (ag_letters){ 0 }, *par = (ag_letters){ 0 }, *rows = (ag_letters){ 0 };
    ck_assert(ag_letters_add(par, "E", 6) && ag_letters_add(par, "K", 3));
    *act = *par;
    ck_assert(ag_letters_add(act, "B", 2) && ag_letters_add(act, "T", 4));
    if (extra) ck_assert(ag_letters_add(act, extra, 3));
    ck_assert(ag_letters_add(rows, "V", 11));
}

/* ag_trace_tape's text (free it) and its op count in *ops */
static char *tape_text(const ag_ctx *ctx, const ag_trace_opts *o, int *ops)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(out);
    *ops = ag_trace_tape(out, ctx, o);
    fclose(out);
    return text;
}

START_TEST(test_trace_lines_in_letters)
{
    tiny_model m;
    tiny_forward(&m);
    ag_letters act, par, rows;
    tiny_letters(&act, &par, &rows, NULL);
    int ops;
    char *text = tape_text(m.ctx, &(ag_trace_opts){ .act = &act, .param = &par, .rows = &rows }, &ops);
    const char *want =
        "   #  op            layer          inputs -> output                                       what it does\n"
        "   1  embedding     emb            emb.weight[V,E] -> [B,T,E]                             rows of the table "
        "picked by the ids\n"
        "   2  linear        head           [B,T,E], head.weight[K,E], head.bias[K] -> [B,T,K]     x W^T + b\n"
        "   3  cross_entropy loss           [B,T,K] -> [1]                                         mean of -log "
        "p(target): the loss\n";
    ck_assert_str_eq(text, want);
    ck_assert_int_eq(ops, 3);
    free(text);
    tiny_free(&m);
}
END_TEST

/* Without the rows' letters the table's 11 rows are a number; a size two letters share (K and
 * H both 3) is printed as the number too */
START_TEST(test_trace_shared_size_is_a_number)
{
    tiny_model m;
    tiny_forward(&m);
    ag_letters act, par, rows;
    tiny_letters(&act, &par, &rows, "H");
    int ops;
    char *text = tape_text(m.ctx, &(ag_trace_opts){ .act = &act, .param = &par }, &ops);
    ck_assert_msg(strstr(text, "emb.weight[11,E] -> [B,T,E]") && strstr(text, "head.bias[K] -> [B,T,3]") &&
                  strstr(text, "  [B,T,3] -> [1]  "), "%s", text);
    free(text);
    char buf[8];
    ck_assert_str_eq(ag_letters_shape(ag_params_find(m.P, "head.weight"), &par, NULL, buf, sizeof buf), "[K,E]");
    ck_assert_str_eq(ag_letters_shape(ag_params_find(m.P, "head.weight"), &par, NULL, buf, 4), "[K,");
    ck_assert_str_eq(ag_letters_shape(ag_params_find(m.P, "head.weight"), NULL, NULL, buf, sizeof buf), "[3,6]");
    tiny_free(&m);
}
END_TEST

static void my_note(const ag_node *n, void *user, char *buf, size_t len)
{
    snprintf(buf, len, "%s #%d", n->op->name, ++*(int *)user);
}

START_TEST(test_trace_own_note)
{
    tiny_model m;
    tiny_forward(&m);
    ag_letters act, par, rows;
    tiny_letters(&act, &par, &rows, NULL);
    int calls = 0, ops;
    char *text = tape_text(m.ctx, &(ag_trace_opts){ .act = &act, .note = my_note, .user = &calls }, &ops);
    ck_assert_int_eq(calls, 3);
    ck_assert_msg(strstr(text, "-> [B,T,E]                            embedding #1\n") &&
                  strstr(text, "-> [1]                                         cross_entropy #3\n") &&
                  !strstr(text, "x W^T + b"), "%s", text);
    free(text);
    tiny_free(&m);
}
END_TEST

START_TEST(test_trace_params_by_layer)
{
    tiny_model m;
    tiny_forward(&m);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ag_trace_params(out, m.P, NULL);
    fclose(out);
    ck_assert_str_eq(text, "parameters by layer (grouped by name prefix):\n"
                           "  emb                                66\n"
                           "  head                               21\n"
                           "  total                              87\n");
    free(text);
    tiny_free(&m);
}
END_TEST

/* counts with their thousands apart, as the parameter table and char_lm's recipe line write them */
START_TEST(test_format_thousands)
{
    const struct { long long v; const char *s; } cases[] = {
        {0, "0"}, {999, "999"}, {1000, "1,000"}, {16000, "16,000"}, {1234567, "1,234,567"}, {-123, "-123"},
        {-1234, "-1,234"}, {-1234567, "-1,234,567"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        ck_assert_str_eq(ag_format_thousands(buf, sizeof buf, cases[i].v), cases[i].s);
    char small[6];   /* cut short, still a string */
    ck_assert_str_eq(ag_format_thousands(small, sizeof small, 1234567), "1,23");
}
END_TEST

START_TEST(test_trace_graph_dot)
{
    tiny_model m;
    tiny_forward(&m);
    ag_letters act, par, rows;
    tiny_letters(&act, &par, &rows, NULL);
    const ag_trace_opts o = { .act = &act, .param = &par, .rows = &rows };
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : P_tmpdir;
    char path[512];
    snprintf(path, sizeof path, "%s/ag_shape_trace_%d.dot", tmp, (int)getpid());
    ag_error err = { 0 };
    ck_assert_int_eq(ag_trace_graph(path, m.ctx, &o, &err), AG_OK);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char dot[4096] = { 0 };
    ck_assert_uint_gt(fread(dot, 1, sizeof dot - 1, f), 0);
    fclose(f);
    unlink(path);
    ck_assert_msg(strstr(dot, "digraph tape {") && strstr(dot, "n1 [label=\"2 linear\\nhead\\n-> [B,T,K]\"]") &&
                  strstr(dot, "n0 -> n1 [label=\"[B,T,E]\"]") && strstr(dot, "label=\"head.weight\\n[K,E]\"") &&
                  strstr(dot, "label=\"emb.weight\\n[V,E]\"") && strstr(dot, "n1 -> n2") && strstr(dot, "\n}\n"),
                  "%s", dot);
    ck_assert_int_eq(ag_trace_graph("no/such/dir/t.dot", m.ctx, &o, &err), AG_ERR_IO);
    ck_assert_str_eq(err.msg, "--trace-graph no/such/dir/t.dot: cannot write it");
    ag_error_clear(&err);
    ck_assert_int_eq(ag_trace_graph(NULL, m.ctx, &o, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--trace-graph: no file name");
    tiny_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// the GPT's letters (nn/gpt_trace.c)

/* Asserts that text holds every one of the n strings of want */
static void assert_holds(const char *text, const char *const *want, size_t n)
{
    for (size_t i = 0; i < n; i++) ck_assert_msg(strstr(text, want[i]) != NULL, "the trace lacks \"%s\"", want[i]);
}

START_TEST(test_gpt_trace_lines)
{
    ag_gpt_config cfg = { .vocab_size = 65, .n_layer = 2, .n_head = 2, .n_embd = 64, .block_size = 32 };
    ag_gpt *g = ag_gpt_new(&cfg, 1, NULL);
    ck_assert_ptr_nonnull(g);
    int B, T;
    ag_gpt_trace_dims(&cfg, 4, 32, &B, &T);
    ck_assert_int_eq(T, 8);
    ck_assert_int_eq(B, 3);          /* 2 is H: B takes the next free size */
    int ids[24], tg[24];
    for (int i = 0; i < 24; i++) ids[i] = (i * 7) % 65, tg[i] = (i * 11) % 65;
    char *text = NULL;
    size_t len = 0;
    ag_error err = { 0 };
    FILE *out = open_memstream(&text, &len);
    const ag_gpt_trace_opts o = { .train = true, .what = "a test batch" };
    ck_assert_int_eq(ag_gpt_trace(out, g, ids, tg, B, T, &o, &err), AG_OK);
    fclose(out);
    const char *want[] = {
        "one forward pass of a test batch",
        "composed_attention = true",
        "B=3 T=8 C=64 H=2 D=32 V=65 T_max=32 4C=256",
        "tok_emb.weight[V,C] -> [B,T,C]",
        "pos_emb.weight[T_max,C] -> [1,T,C]",
        "split_heads   blocks.0.attn  [B,T,C] -> [B,H,T,D]",
        "transpose     blocks.0.attn  [B,H,T,D] -> [B,H,D,T]",
        "matmul        blocks.0.attn  [B,H,T,D], [B,H,D,T] -> [B,H,T,T]",
        "scale         blocks.1.attn  [B,H,T,T] -> [B,H,T,T]",
        "masked_fill   blocks.1.attn  [B,H,T,T], causal_mask[T,T] -> [B,H,T,T]",
        "softmax       blocks.1.attn",
        "merge_heads   blocks.1.attn  [B,H,T,D] -> [B,T,C]",
        "w_q.weight[C,C], w_q.bias[C] -> [B,T,C]",
        "fc1.weight[4C,C], fc1.bias[4C] -> [B,T,4C]",
        "layernorm     ln_f",
        "lm_head.weight[V,C], lm_head.bias[V] -> [B,T,V]",
        "cross_entropy loss           [B,T,V] -> [1]",
        "49 ops; loss",
        "blocks.0.attn                  16,640",
        "blocks.1.mlp                   33,088",
        "total                         110,529",
    };
    assert_holds(text, want, sizeof want / sizeof want[0]);
    ck_assert_ptr_null(strstr(text, "attention (fused)"));
    ck_assert(!g->blocks[0].attn.composed && !g->blocks[1].attn.composed);   /* asked per call, model untouched */
    free(text);
    ag_gpt_free(g);
}
END_TEST

/* The trace of cfg on a batch of B x T ids, as text (free it) */
static char *trace_text(const ag_gpt_config *cfg, int B, int T)
{
    ag_gpt *g = ag_gpt_new(cfg, 1, NULL);
    ck_assert_ptr_nonnull(g);
    int ids[64] = { 0 };
    ck_assert_int_le(B * T, 64);
    char *text = NULL;
    size_t len = 0;
    ag_error err = { 0 };
    FILE *out = open_memstream(&text, &len);
    ck_assert_int_eq(ag_gpt_trace(out, g, ids, ids, B, T, &(ag_gpt_trace_opts){ .what = "zeros" }, &err), AG_OK);
    fclose(out);
    ag_gpt_free(g);
    return text;
}

/* A parameter's sizes take the model's letters (C, H, D, V, the MLP width); T_max only names
 * the rows of the position table. Here 4C = T_max = 32: the MLP's weights read 4C, where T_max
 * among the parameter letters made them a bare 32 (and made any [D] weight read T_max in tiny,
 * where D = T_max). A size two letters share stays a number: V = 4C below. */
START_TEST(test_gpt_trace_parameter_letters)
{
    ag_gpt_config cfg = { .vocab_size = 65, .n_layer = 1, .n_head = 2, .n_embd = 8, .block_size = 32 };
    char *text = trace_text(&cfg, 3, 5);
    const char *want[] = { "sizes: B=3 T=5 C=8 H=2 D=4 V=65 T_max=32 4C=32", "tok_emb.weight[V,C] -> [B,T,C]",
                           "pos_emb.weight[T_max,C] -> [1,T,C]", "fc1.weight[4C,C], fc1.bias[4C] -> [B,T,4C]",
                           "fc2.weight[C,4C], fc2.bias[C] -> [B,T,C]", "lm_head.weight[V,C], lm_head.bias[V]" };
    assert_holds(text, want, sizeof want / sizeof want[0]);
    free(text);
    cfg.vocab_size = 32;                               /* V = 4C = T_max: numbers, where they meet */
    text = trace_text(&cfg, 3, 5);
    const char *shared[] = { "tok_emb.weight[32,C]", "pos_emb.weight[32,C]", "fc1.weight[32,C]",
                             "lm_head.weight[32,C], lm_head.bias[32] -> [B,T,32]" };
    assert_holds(text, shared, sizeof shared / sizeof shared[0]);
    free(text);
}
END_TEST

/* Consecutive windows of a token stream: as many of ag_gpt_trace_dims's as fit (20 tokens hold 2
 * windows of 8 and their targets, not its 3), named in the unit given; under 2 tokens, an error */
START_TEST(test_gpt_trace_windows)
{
    ag_gpt_config cfg = { .vocab_size = 65, .n_layer = 1, .n_head = 2, .n_embd = 64, .block_size = 32 };
    ag_gpt *g = ag_gpt_new(&cfg, 1, NULL);
    ck_assert_ptr_nonnull(g);
    int ids[20];
    for (int i = 0; i < 20; i++) ids[i] = (i * 5) % 65;
    char *text = NULL;
    size_t len = 0;
    ag_error err = { 0 };
    FILE *out = open_memstream(&text, &len);
    ag_gpt_trace_opts o = { .what = "a short text", .unit = "characters" };
    ck_assert_int_eq(ag_gpt_trace_windows(out, g, ids, 20, &o, &err), AG_OK);
    o.unit = NULL;
    ck_assert_int_eq(ag_gpt_trace_windows(out, g, ids, 10, &o, &err), AG_OK);
    ck_assert_int_eq(ag_gpt_trace(out, g, ids, NULL, 1, 3, NULL, &err), AG_OK);   /* no options, no loss */
    fclose(out);
    const char *want[] = { "one forward pass of B=2 windows of T=8 characters from a short text,",
                           "sizes: B=2 T=8 C=64 H=2 D=32 V=65 T_max=32 4C=256",
                           "[2,T,V] -> [1]" /* B = H: a number */,
                           "one forward pass of B=1 windows of T=8 tokens from a short text,",
                           "one forward pass of a batch,", "sizes: B=1 T=3 ", "\n27 ops\n" };
    assert_holds(text, want, sizeof want / sizeof want[0]);
    free(text);
    ck_assert_int_eq(ag_gpt_trace_windows(stdout, g, ids, 1, &o, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--trace-shapes: the text has 1 tokens, fewer than one window");
    ag_error_clear(&err);
    ck_assert_int_eq(ag_gpt_trace(stdout, g, ids, NULL, 0, 8, NULL, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--trace-shapes: no model or no batch");
    ag_gpt_free(g);
}
END_TEST

Suite *shape_trace_suite(void)
{
    Suite *s = suite_create("shape_trace");
    TCase *t = tcase_create("shape_trace");
    ADD_TESTS(t, test_trace_lines_in_letters, test_trace_shared_size_is_a_number, test_trace_own_note,
              test_trace_params_by_layer, test_trace_graph_dot, test_gpt_trace_lines, test_gpt_trace_parameter_letters,
              test_gpt_trace_windows, test_format_thousands);
    suite_add_tcase(s, t);
    return s;
}
