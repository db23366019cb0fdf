/* agree.c -- what the ranks of a run agree on before its first step (ddp.h): the build
 * (ag_build_handshake: every rank sends a record of its build first of all, so that a rank
 * started with another build, a real of another size, another version, collectives in another
 * order, stops the job at once with a message naming both, instead of corrupting a broadcast
 * sized by its own structs), rank 0's opening of the run (ag_share_start), each rank's setup
 * outcome (ag_share_outcome: an error said once, not once per rank), and what each rank holds
 * (ag_ranks_agree: a digest of the program's items, a difference named item by item;
 * ag_fields_agree: a config's fields among them). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ddp.h"
#include "../data/hash.h"   /* ag_fnv1a */

/* A record of 64 words, its size and layout fixed for good, so that any two builds meet at it:
 * the magic, the protocol, the layout hash, and the version's text. 512 bytes is more than the
 * first gather of any char_lm build before it (41 words), so that a rank of an older build
 * fails on a truncated receive while the others read the start of its digest, which is not the
 * magic. */
enum { HS_MAGIC, HS_PROTOCOL, HS_LAYOUT, HS_VERSION, HS_VERSION_WORDS = 6, HS_WORDS = 64 };
#define HS_MAGIC_WORD 0x31646e61686d6c63ull   /* "clmhand1": char_lm's since the first handshake */

/* "0.1.0 (protocol 2, layout 5c1e0a3f)", or what an older build sent, from record w [HS_WORDS] */
static void format_build(char *buf, size_t n, const uint64_t *w)
{
    if (w[HS_MAGIC] != HS_MAGIC_WORD) {
        snprintf(buf, n, "a build older than the version handshake");
        return;
    }
    char v[HS_VERSION_WORDS * 8 + 1] = {0};
    memcpy(v, w + HS_VERSION, HS_VERSION_WORDS * 8);
    for (char *p = v; *p; p++)
        if (*p < 0x20 || *p > 0x7e) *p = '?';
    snprintf(buf, n, "%s (protocol %llu, layout %08llx)", v, (unsigned long long)w[HS_PROTOCOL],
             (unsigned long long)(w[HS_LAYOUT] >> 32));
}

/* The error for records all [N][HS_WORDS] that differ from rank 0's, or AG_OK. */
static ag_status compare_builds(const uint64_t *all, int N, const char *program, ag_error *err)
{
    int other = 0;
    for (int r = 1; r < N && !other; r++)
        if (memcmp(all + (size_t)r * HS_WORDS, all, HS_VERSION * 8 + HS_VERSION_WORDS * 8) != 0) other = r;
    if (!other) return AG_OK;
    char mine[128], theirs[128];
    format_build(mine, sizeof mine, all);
    format_build(theirs, sizeof theirs, all + (size_t)other * HS_WORDS);
    return ag_seterr(err, AG_ERR_ARG, "the ranks run different builds of %s, so none started (install one "
                     "build on every host): %s on rank 0, %s on rank %d", program ? program : "this program", mine, theirs, other);
}

ag_status ag_build_handshake(ag_dist *d, const ag_build *b, bool *alike, ag_error *err)
{
    int N = ag_dist_size(d);
    if (N == 1) return AG_OK;
    uint64_t mine[HS_WORDS] = {HS_MAGIC_WORD, b->protocol, b->layout};
    strncpy((char *)(mine + HS_VERSION), b->version ? b->version : "unversioned", HS_VERSION_WORDS * 8 - 1);
    uint64_t *all = calloc((size_t)N, sizeof mine);   /* zeros: an older rank's short record */
    if (!all) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    ag_error why = {0};
    ag_status s = ag_dist_allgather(d, mine, all, sizeof mine, &why);
    if (s) ag_seterr(err, s, "%s, at the version check, the ranks' first exchange (a rank of a build older "
                     "than the check never comes to it)", why.msg);
    else if ((s = compare_builds(all, N, b->program, err)) && alike) *alike = true;   /* every rank decides alike */
    free(all);
    return s;
}

// --- each rank's own setup: its outcome, to all ---

void ag_msg_append(char *msg, size_t n, size_t *len, const char *fmt, ...)
{
    if (*len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(msg + *len, n - *len, fmt, ap);
    va_end(ap);
    if (w > 0) *len = *len + (size_t)w < n ? *len + (size_t)w : n - 1;
}

/* What a rank sends after its own setup: AG_OK or its error, and the message. */
typedef struct {
    int32_t status;
    char msg[sizeof ((ag_error *)0)->msg];
} outcome;

/* The error of the ranks' outcomes all [N], or AG_OK: the lowest failed rank's, "rank R: "
 * unless it is rank 0, then each other rank's whose message differs ("; rank 2: ...") */
static ag_status tell_outcome(const outcome *all, int N, ag_error *err)
{
    int first = 0;
    while (first < N && all[first].status == AG_OK) first++;
    if (first == N) return AG_OK;
    char msg[sizeof err->msg];
    size_t len = 0;
    if (first > 0) ag_msg_append(msg, sizeof msg, &len, "rank %d: ", first);
    ag_msg_append(msg, sizeof msg, &len, "%s", all[first].msg);
    for (int r = first + 1; r < N; r++)
        if (all[r].status != AG_OK && strcmp(all[r].msg, all[first].msg) != 0)
            ag_msg_append(msg, sizeof msg, &len, "; rank %d: %s", r, all[r].msg);
    return ag_seterr(err, (ag_status)all[first].status, "%s", msg);
}

ag_status ag_share_outcome(ag_dist *d, ag_status mine, const ag_error *why, bool *alike, ag_error *err)
{
    int N = ag_dist_size(d);
    if (N == 1) return mine ? ag_seterr(err, mine, "%s", why->msg) : AG_OK;
    outcome me = {.status = mine}, *all = calloc((size_t)N, sizeof me);
    if (!all) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    if (mine) snprintf(me.msg, sizeof me.msg, "%s", why->msg);
    ag_error lost = {0};
    ag_status s = ag_dist_allgather(d, &me, all, sizeof me, &lost);
    if (s && mine) s = ag_seterr(err, mine, "%s", why->msg);   /* its own, said as "rank R: " */
    else if (s) ag_seterr(err, s, "%s", lost.msg);
    else if ((s = tell_outcome(all, N, err)) && alike) *alike = true;   /* every rank decides alike */
    free(all);
    return s;
}

ag_status ag_share_start(ag_dist *d, ag_status mine, const ag_error *why, bool *alike, ag_error *err)
{
    if (ag_dist_size(d) == 1) return mine ? ag_seterr(err, mine, "%s", why->msg) : AG_OK;
    outcome *o = calloc(1, sizeof *o);
    if (!o) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    if (ag_dist_rank(d) == 0 && mine) o->status = mine, snprintf(o->msg, sizeof o->msg, "%s", why->msg);
    ag_status s = ag_dist_bcast(d, o, sizeof *o, 0, err);
    if (s == AG_OK && o->status) {   /* rank 0's failure, the same on every rank: rank 0 says it */
        s = ag_seterr(err, (ag_status)o->status, "%s", o->msg);
        if (alike) *alike = true;
    }
    free(o);
    return s;
}

// --- what each rank holds: a digest of the program's items, compared by all ---

/* Item i's value v as d says it, or in decimal. */
static void item_value(const ag_digest *d, int i, uint64_t v, char *buf, size_t n)
{
    if (d->value) d->value(d->user, i, v, buf, n);
    else snprintf(buf, n, "%llu", (unsigned long long)v);
}

/* "; the text: hash 5c1e0a3f on ranks 0 2, hash 0f9d2b61 on rank 1" (at most 3 values of at
 * most 6 ranks each) appended to msg [n] at *len; all [N][d->n] holds every rank's digest. */
static void describe_item(char *msg, size_t n, size_t *len, const uint64_t *all, int N, const ag_digest *d, int i)
{
    size_t k = (size_t)d->n;
    ag_msg_append(msg, n, len, "%s%s:", *len ? "; " : "", d->name(d->user, i));
    for (int r = 0, groups = 0; r < N; r++) {
        uint64_t v = all[(size_t)r * k + i];
        int first = r, count = 0;   /* the first rank with this value, and how many have it */
        for (int q = 0; q < N; q++)
            if (all[(size_t)q * k + i] == v) first = q < first ? q : first, count++;
        if (first < r) continue;
        if (groups++ == 3) {
            ag_msg_append(msg, n, len, " ...");
            break;
        }
        char val[64];
        item_value(d, i, v, val, sizeof val);
        ag_msg_append(msg, n, len, "%s %s on rank%s", groups > 1 ? "," : "", val, count > 1 ? "s" : "");
        for (int q = r, shown = 0; q < N && shown <= 6; q++) {
            if (all[(size_t)q * k + i] != v) continue;
            if (shown++ == 6) ag_msg_append(msg, n, len, " ...");
            else ag_msg_append(msg, n, len, " %d", q);
        }
    }
}

/* The error for the items on which the ranks' digests all [N][d->n] differ, or AG_OK. */
static ag_status compare_digests(const uint64_t *all, int N, const ag_digest *d, ag_error *err)
{
    char msg[sizeof err->msg];
    size_t len = 0;
    int differ = 0;
    for (int pass = 0; pass < 2; pass++)   /* d->first's items first: a different text explains the rest */
        for (int i = 0; i < d->n; i++) {
            bool first = d->first && d->first(d->user, i), same = true;
            for (int r = 1; r < N && same; r++) same = all[(size_t)r * (size_t)d->n + i] == all[i];
            if (same || first != (pass == 0)) continue;
            if (differ++ < 4) describe_item(msg, sizeof msg, &len, all, N, d, i);
        }
    if (!differ) return AG_OK;
    return ag_seterr(err, AG_ERR_ARG, "%s: %s%s", d->what, msg, differ > 4 ? "; and more" : "");
}

ag_status ag_ranks_agree(ag_dist *dist, const uint64_t *mine, const ag_digest *d, bool *compared, ag_error *err)
{
    int N = ag_dist_size(dist);
    if (compared) *compared = N == 1;   /* alone: nothing to compare, and every error is this process's */
    if (N == 1) return AG_OK;
    size_t bytes = (size_t)d->n * sizeof *mine;
    uint64_t *all = malloc((size_t)N * bytes);
    if (!all) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    ag_status s = ag_dist_allgather(dist, mine, all, bytes, err);
    if (s == AG_OK) {
        if (compared) *compared = true;   /* from here on an argument error is the same on every rank */
        s = compare_digests(all, N, d, err);
    }
    free(all);
    return s;
}

// --- a config's fields and a program's items (ag_fields_agree) ---

static const char *field_name(const void *user, int i)
{
    const ag_fields_digest *fd = user;
    const ag_field *f = i < fd->n_fields ? &fd->fields[i] : NULL;
    return !f ? fd->extra[i - fd->n_fields] : f->flag ? f->flag : f->key;
}

static void field_value(const void *user, int i, uint64_t v, char *buf, size_t n)
{
    const ag_fields_digest *fd = user;
    if (i < fd->n_fields) ag_field_format_bits(&fd->fields[i], v, buf, n);
    else if ((fd->hashes >> (i - fd->n_fields)) & 1) snprintf(buf, n, "hash %08llx", (unsigned long long)(v >> 32));
    else snprintf(buf, n, "%llu", (unsigned long long)v);
}

static bool field_first(const void *user, int i)
{
    const ag_fields_digest *fd = user;
    return i >= fd->n_fields && ((fd->first >> (i - fd->n_fields)) & 1);
}

ag_status ag_fields_agree(ag_dist *dist, const void *cfg, const ag_fields_digest *fd, uint64_t *mine,
                          bool *compared, ag_error *err)
{
    for (int i = 0; i < fd->n_fields; i++) mine[i] = ag_field_bits(cfg, &fd->fields[i]);
    const ag_digest d = {.n = fd->n_fields + fd->n_extra, .name = field_name, .value = field_value,
                         .first = field_first, .user = fd, .what = fd->what};
    return ag_ranks_agree(dist, mine, &d, compared, err);
}

uint64_t ag_fields_digest_layout(const ag_fields_digest *fd, uint64_t h)
{
    h = ag_fields_layout(fd->fields, fd->n_fields, h);
    for (int i = 0; i < fd->n_extra; i++) h = ag_fnv1a(h, fd->extra[i], strlen(fd->extra[i]));
    return h;
}
