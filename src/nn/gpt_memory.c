/* gpt_memory.c -- what a GPT of a config costs in memory, before any of it is allocated (nn.h):
 * a lower bound of its parameters, the bytes of one step's arena and of a sampler's cache, a
 * shard's extra bytes, a training run's total, and the shards that fit. The figures come from
 * the tensors a step keeps (nn.h says which) and were checked against the peak RSS of char_lm's
 * runs (README's Limits); train.h's ag_machine_bytes gives what they are compared with. Then
 * the shards a run takes, within them, and a step's FLOPs (ag_gpt_step_flops), what a time
 * budget's recipe costs. */
#include <stdio.h>
#include <string.h>
#include "nn.h"
#include "../optim/muon.h"    /* ag_muon_flops */
#include "../tensor/speed.h"   /* ag_threads */

double ag_gpt_min_params(const ag_gpt_config *m)
{
    double C = m->n_embd;
    return ((double)m->vocab_size + m->block_size) * C + (double)m->n_layer * (12 * C * C - C);
}

double ag_gpt_step_bytes(const ag_gpt_config *m, int B, bool train)
{
    double T = m->block_size, C = m->n_embd, H = m->n_head, V = m->vocab_size;
    double fwd = m->n_layer * (B * H * T * T + 18 * B * T * C) + B * T * (3 * C + 2 * V);
    double kept = m->n_layer * 4 * B * T * C, grads = B * T * (16 * C + V);   /* train's more (nn.h) */
    double dropped = m->dropout > 0 ? m->n_layer * B * H * T * T + (1 + 2 * m->n_layer) * 2 * B * T * C : 0;
    /* rope: q and k turned, 2 B T C a layer, and a quarter as much again at the backward's peak (measured) */
    double turned = m->rope ? m->n_layer * 2 * B * T * C : 0, turned_grads = turned / 4;
    return (train ? fwd + turned + kept + grads + dropped + turned_grads : fwd + turned) * sizeof(ag_real);
}

double ag_gpt_sample_bytes(const ag_gpt_config *m)
{
    double T = m->block_size, C = m->n_embd, H = m->n_head, V = m->vocab_size;
    return (m->n_layer * (2 * T * C + H * T + 18 * C) + 2 * V) * sizeof(ag_real);
}

double ag_gpt_shard_bytes(const ag_gpt_config *m, int b)
{
    double arena = ag_gpt_step_bytes(m, b, true), kept = arena < AG_HEAP_KEPT ? arena : AG_HEAP_KEPT;
    return ag_gpt_min_params(m) * sizeof(ag_real) + arena + kept + AG_SHARD_SLACK;
}

double ag_gpt_train_bytes(const ag_gpt_config *m, int B, int shards, int ranks)
{
    int n = shards > 1 ? shards : 1;
    double first = ag_gpt_step_bytes(m, B / n, true), eval = ag_gpt_step_bytes(m, B, false);   /* shard 0's ctx */
    double rank = AG_PROCESS_BYTES + 4 * ag_gpt_min_params(m) * sizeof(ag_real) + (first > eval ? first : eval);
    for (int j = 1; j < n; j++) rank += ag_gpt_shard_bytes(m, (int)((long)B * (j + 1) / n) - (int)((long)B * j / n));
    return rank * (ranks > 1 ? ranks : 1);
}

int ag_gpt_shards_that_fit(const ag_gpt_config *m, int B, int want, int ranks, double have)
{
    int n = want > 1 ? want : 1;
    while (n > 1 && ag_gpt_train_bytes(m, B, n, ranks) > have) n--;   /* a shard's windows change with n */
    return n;
}

const char *ag_gpt_shape_str(const ag_gpt_config *m, int B, char *buf)
{
    snprintf(buf, AG_GPT_SHAPE_LEN, "block_size %d x n_layer %d (n_head %d, n_embd %d, batch %d)", m->block_size,
             m->n_layer, m->n_head, m->n_embd, B);
    return buf;
}

const char *ag_bytes_str(double bytes, char *buf)
{
    bool tera = bytes >= 1e12;
    snprintf(buf, 24, "%.1f %s", bytes / (tera ? 1e12 : 1e9), tera ? "TB" : "GB");
    return buf;
}

/* The default for a pass of `micro` windows, a line in note when it is fewer than the threads
 * (--threads 1024 once made 1024 gradient buffers, issue 35). */
static int default_shards(const ag_gpt_config *m, int micro, char *note, size_t nn)
{
    int threads = ag_threads(), n = ag_gpt_shards_default(m, micro);
    if (n < threads)
        snprintf(note, nn, "shards: %d, not %d (one per thread): %s", n, threads,
                 n == micro ? "a pass has no more windows" : "this machine has no more cores");
    return n;
}

ag_status ag_gpt_shards_choose(const ag_gpt_config *m, const ag_gpt_shards_ask *a, int *n, char *note, size_t nn,
                               ag_error *err)
{
    int K = a->accum > 1 ? a->accum : 1, N = a->ranks > 1 ? a->ranks : 1;
    int micro = a->batch / (N * K);   /* the windows of one pass */
    char ranks[32] = "", need[24];
    *n = 1;
    note[0] = '\0';
    if (N > 1) snprintf(ranks, sizeof ranks, "%d ranks x ", N);
    if (a->asked > micro && micro > 0)
        return ag_seterr(err, AG_ERR_ARG, "--shards %d is more than the %d windows a step's pass has (--batch-size %d, "
                         "%s--grad-accum %d)", a->asked, micro, a->batch, ranks, K);
    int want = a->asked ? a->asked : default_shards(m, micro, note, nn);
    int fit = a->have > 0 ? ag_gpt_shards_that_fit(m, a->batch, want, a->local, a->have) : want;
    ag_bytes_str(ag_gpt_train_bytes(m, a->batch, want, a->local), need);
    if (fit < want && a->asked)
        return ag_seterr(err, AG_ERR_ARG, "--shards %d: %d shards need about %s of memory (each beyond the first keeps "
                         "a gradient buffer of the model's size and an arena for its windows), more than %s; at "
                         "most %d fit", a->asked, want, need, a->room, fit);
    size_t used = strlen(note);
    if (fit < want)
        snprintf(note + used, nn - used, "%sshards: %d, not %d: %d would need about %s of memory, more than %s",
                 used ? "\n" : "", fit, want, want, need, a->room);
    *n = fit;
    return AG_OK;
}

double ag_gpt_step_flops(const ag_gpt_config *m, int B)
{
    double L = m->n_layer, C = m->n_embd, T = m->block_size, V = m->vocab_size;
    double per_token = 6 * (12 * L * C * C + 2 * C * V) + 24 * L * T * C;
    return per_token * T * B * (m->dropout > 0 ? 1.1 : 1.0);
}

double ag_gpt_muon_flops(const ag_gpt_config *m)
{
    int C = m->n_embd, F = ag_swiglu_width(C);
    double attn = 4 * ag_muon_flops(C, C);                                       /* W_q, W_k, W_v, W_o */
    double mlp = m->mlp == AG_MLP_SWIGLU ? 3 * ag_muon_flops(C, F) : 2 * ag_muon_flops(C, 4 * C);
    return m->n_layer * (attn + mlp);
}
