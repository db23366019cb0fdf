/* dist_check.c -- src/dist/dist_mpi.c under mpirun: every collective of dist.h across the ranks
 * of the job, with values each rank can predict. Prints one line per failure and exits 1, or
 * "dist_check: N ranks ok" (rank 0) and exits 0. Then the agreements of train/ddp.h built on
 * them (agree.c).
 *
 *   mpirun -np 3 --oversubscribe build/dist_check        (make test-mpi runs it)
 *
 * `dist_check --bcast-first` plays a rank of an older build instead: MPI_Init, then a blocking
 * MPI_Bcast on the world as its first collective, which the others' ag_dist_init never
 * matches (test_mpi.c: they must give up within --dist-timeout, not hang). */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "dist/dist.h"
#include "train/ddp.h"   /* ag_ranks_agree, ag_share_start: the agreements built on them */
#include "train/train.h"   /* ag_train_run's handshake */

static int failures;

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "dist_check: rank %d: ", rank);                                   \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            failures++;                                                                       \
        }                                                                                     \
    } while (0)

/* a gather of a fixed size from every rank: rank r's 8 bytes at [r] everywhere; a deadline that
 * no wait reaches changes nothing */
static void check_gather(ag_dist *d, int rank, int N)
{
    ag_error e = {0};
    long long all[64], mine = 1000 + rank;
    ag_dist_set_timeout(d, 30);
    if (N <= 64) {
        CHECK(ag_dist_allgather(d, &mine, all, sizeof mine, &e) == AG_OK, "allgather: %s", e.msg);
        for (int r = 0; r < N; r++) CHECK(all[r] == 1000 + r, "allgather[%d] = %lld", r, all[r]);
    }
    CHECK(ag_dist_voice(d) == -1, "voice %d without a failed wait", ag_dist_voice(d));
}

static const char *item_name(const void *user, int i)
{
    static const char *const names[] = {"same", "last differs", "first differs"};
    (void)user;
    return names[i];
}
static bool item_first(const void *user, int i) { return (void)user, i == 2; }

/* ag_fields_agree: a config's fields named by their flags (a key without one) and shown as the
 * field says, the program's items after them by their names, a hash shown as one, the data's
 * items first; the layout changes with an item's name */
typedef struct {
    int layers;
    double lr;
} fcfg;
static const ag_field fcfg_rows[] = {
    {"layers", "--layers", AG_FIELD_INT, offsetof(fcfg, layers), 1, 64, 0, 0, true, false, NULL, "blocks", false, false},
    {"lr", NULL, AG_FIELD_DOUBLE, offsetof(fcfg, lr), 0, 1, true, false, false, false, NULL, "rate", false, false},
};
static void check_fields_agree(ag_dist *d, int rank, int N)
{
    static const char *const extra[] = {"the count", "the text"};
    const ag_fields_digest fd = {.fields = fcfg_rows, .n_fields = 2, .extra = extra, .n_extra = 2,
                                 .hashes = 1u << 1, .first = 1u << 1, .what = "differ"};
    fcfg c = {.layers = 4, .lr = 0.5};
    uint64_t mine[4] = {0, 0, 12, 0xabcdef0123456789ull};
    ag_error e = {0};
    bool compared = false;
    CHECK(ag_fields_agree(d, &c, &fd, mine, &compared, &e) == AG_OK && compared, "fields agree: %s", e.msg);
    CHECK(mine[0] == 4, "the fields' words were not filled (%llu)", (unsigned long long)mine[0]);
    c.layers = rank == N - 1 ? 6 : 4;
    c.lr = rank == 0 ? 0.25 : 0.5;
    mine[2] = 12 + (rank == N - 1);
    mine[3] = rank == 0 ? 0x1234567800000000ull : 0xabcdef0123456789ull;
    char want[256], others[16] = "rank 1";
    if (N == 3) snprintf(others, sizeof others, "ranks 1 2");
    snprintf(want, sizeof want, "differ: the text: hash 12345678 on rank 0, hash abcdef01 on %s; --layers: 4 on "
             "rank%s 0%s, 6 on rank %d; lr: 0.25 on rank 0, 0.5 on %s; the count: 12 on rank%s 0%s, 13 on rank %d",
             others, N > 2 ? "s" : "", N > 2 ? " 1" : "", N - 1, others, N > 2 ? "s" : "", N > 2 ? " 1" : "", N - 1);
    CHECK(N > 3 || (ag_fields_agree(d, &c, &fd, mine, &compared, &e) == AG_ERR_ARG && strcmp(e.msg, want) == 0),
          "fields disagree: '%s', not '%s'", e.msg, want);
    const ag_fields_digest renamed = {.fields = fcfg_rows, .n_fields = 2, .extra = (const char *const[]){"a", "b"},
                                      .n_extra = 2};
    CHECK(ag_fields_digest_layout(&fd, 1) != ag_fields_digest_layout(&renamed, 1), "the layout ignores the names");
}

/* train/ddp.h's agreements: digests that differ are named item by item (the first ones first),
 * the ranks grouped by value, alike on every rank; rank 0's failed start is every rank's */
static void check_agree(ag_dist *d, int rank, int N)
{
    ag_error e = {0};
    bool compared = false, alike = false;
    const ag_digest dg = {.n = 3, .name = item_name, .first = item_first, .what = "differ"};
    uint64_t same[3] = {7, 1, 8}, mine[3] = {7, rank == N - 1 ? 2 : 1, rank == 0 ? 9 : 8};
    CHECK(ag_ranks_agree(d, same, &dg, &compared, &e) == AG_OK && compared, "agree: %s", e.msg);
    char want[256];
    snprintf(want, sizeof want, "differ: first differs: 9 on rank 0, 8 on rank%s 1%s; last differs: 1 on rank%s 0%s, "
             "2 on rank %d", N > 2 ? "s" : "", N > 2 ? " 2" : "", N > 2 ? "s" : "", N > 2 ? " 1" : "", N - 1);
    CHECK(N > 3 || (ag_ranks_agree(d, mine, &dg, &compared, &e) == AG_ERR_ARG && strcmp(e.msg, want) == 0),
          "disagree: '%s', not '%s'", e.msg, want);
    ag_error_clear(&e);
    ag_error why = {0};
    ag_seterr(&why, AG_ERR_IO, "rank %d's reason", rank);
    CHECK(ag_share_start(d, rank == 0 ? AG_ERR_IO : AG_OK, &why, &alike, &e) == AG_ERR_IO && alike &&
          strcmp(e.msg, "rank 0's reason") == 0, "share_start: %s", e.msg);
    CHECK(ag_share_start(d, AG_OK, &why, NULL, &e) == AG_OK, "share_start: %s", e.msg);
    check_fields_agree(d, rank, N);
}

/* ag_train_run's handshake (loop.c), its first exchange: a rank of another commit is refused on
 * every rank, naming the builds; with opts.build_checked (the program compared them itself) the
 * loop makes none, and the client's own fault (no params) is what every rank says */
static void check_train_build(ag_dist *d, int rank, int N)
{
    ag_error e = {0};
    ag_train_result r;
    const ag_train_client c = {.name = "tiny", .commit = rank == N - 1 ? "other" : "this"};
    ag_train_opts o = {.out_dir = "dist_check_unused", .steps = 1, .dist = d};
    CHECK(ag_train_run(&c, &o, &r, &e) == AG_ERR_ARG && strstr(e.msg, "the ranks run different builds of tiny"),
          "the loop's handshake: %s", e.msg);
    ag_error_clear(&e);
    o.build_checked = true;
    CHECK(ag_train_run(&c, &o, &r, &e) == AG_ERR_ARG && strstr(e.msg, "the client has no params"),
          "build_checked: %s", e.msg);
    CHECK(ag_train_layout() == ag_train_layout() && ag_train_layout() != 0, "ag_train_layout");
}

/* --bcast-first: a rank of an older build; waits until mpirun ends the job */
static int older_build(void)
{
    long v = 0;
    MPI_Init(NULL, NULL);
    MPI_Bcast(&v, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--bcast-first") == 0) return older_build();
    ag_dist *d;
    ag_error e = {0};
    if (ag_dist_init(&d, 30, &e)) return fprintf(stderr, "dist_check: %s\n", e.msg), 1;
    int rank = ag_dist_rank(d), N = ag_dist_size(d);
    CHECK(strcmp(ag_dist_backend(), "mpi") == 0, "backend %s", ag_dist_backend());

    /* blocking sum and max: rank r holds r+1 and -r at each index */
    enum { n = 1000 };
    static ag_real g[n];
    double m[2] = {(double)rank, -(double)rank};
    for (int i = 0; i < n; i++) g[i] = (ag_real)((rank + 1) * (i % 7));
    CHECK(ag_dist_allreduce(d, g, n, AG_DIST_REAL, AG_DIST_SUM, &e) == AG_OK, "allreduce: %s", e.msg);
    for (int i = 0; i < n; i++)
        CHECK(g[i] == (ag_real)(N * (N + 1) / 2 * (i % 7)), "sum[%d] = %g", i, (double)g[i]);
    CHECK(ag_dist_allreduce(d, m, 2, AG_DIST_DOUBLE, AG_DIST_MAX, &e) == AG_OK, "max: %s", e.msg);
    CHECK(m[0] == N - 1 && m[1] == 0, "max = %g, %g", m[0], m[1]);

    /* non-blocking: three slices started in turn (as the backward finishes blocks), a progress
     * call between them, one wait */
    for (int i = 0; i < n; i++) g[i] = (ag_real)(rank + i);
    double loss = 0.5 * rank;
    CHECK(ag_dist_allreduce_start(d, g + 600, 400, AG_DIST_REAL, &e) == AG_OK, "start: %s", e.msg);
    CHECK(ag_dist_progress(d, &e) == AG_OK, "progress: %s", e.msg);
    CHECK(ag_dist_allreduce_start(d, g + 100, 500, AG_DIST_REAL, &e) == AG_OK, "start: %s", e.msg);
    CHECK(ag_dist_allreduce_start(d, &loss, 1, AG_DIST_DOUBLE, &e) == AG_OK, "start: %s", e.msg);
    CHECK(ag_dist_progress(d, &e) == AG_OK, "progress: %s", e.msg);
    CHECK(ag_dist_allreduce_start(d, g, 100, AG_DIST_REAL, &e) == AG_OK, "start: %s", e.msg);
    CHECK(ag_dist_wait(d, &e) == AG_OK, "wait: %s", e.msg);
    for (int i = 0; i < n; i++)
        CHECK(g[i] == (ag_real)(N * (N - 1) / 2 + N * i), "isum[%d] = %g", i, (double)g[i]);
    CHECK(loss == 0.25 * N * (N - 1), "loss sum %g", loss);
    CHECK(ag_dist_wait(d, &e) == AG_OK, "a second wait with nothing in flight: %s", e.msg);

    /* broadcast from the last rank, then a barrier */
    char text[32];
    snprintf(text, sizeof text, "from rank %d", rank);
    CHECK(ag_dist_bcast(d, text, sizeof text, N - 1, &e) == AG_OK, "bcast: %s", e.msg);
    char want[32];
    snprintf(want, sizeof want, "from rank %d", N - 1);
    CHECK(strcmp(text, want) == 0, "bcast gave '%s'", text);
    CHECK(ag_dist_barrier(d, &e) == AG_OK, "barrier: %s", e.msg);

    check_gather(d, rank, N);
    check_agree(d, rank, N);
    check_train_build(d, rank, N);

    /* everyone agrees on the failure count before leaving */
    double bad = failures;
    ag_dist_allreduce(d, &bad, 1, AG_DIST_DOUBLE, AG_DIST_SUM, &e);
    if (bad > 0) {
        ag_dist_end(d, false);
        return 1;
    }
    if (rank == 0) printf("dist_check: %d ranks ok\n", N);
    ag_dist_end(d, true);
    return 0;
}
