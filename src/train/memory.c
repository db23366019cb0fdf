/* memory.c -- what a run may hold, for any model (train.h): the memory this process may take
 * (the machine's, or its cgroup's limit where lower: a container, a Slurm job), the ranks of a
 * job on this machine, and the refusals of a run that cannot fit, in memory or in a checkpoint
 * file, before anything of its size is allocated. The model's own estimate is its program's
 * (ag_train_client's step_bytes; a GPT's: nn.h's ag_gpt_train_bytes, lm/lm.h's ag_gpt_check_train). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "train.h"

#define PATHLEN 4096

/* The lowest limit in file `name` of dir and each directory above it down to top (a file that
 * is missing, "max", or 2^62 and more: no limit); 0 when none. dir is cut as it goes. */
static double lowest_limit(const char *top, char *dir, const char *name)
{
    double low = 0;
    for (;;) {
        char path[PATHLEN], text[64], *end = NULL;
        FILE *f = snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path ? fopen(path, "r") : NULL;
        double v = f && fgets(text, sizeof text, f) ? strtod(text, &end) : 0;
        if (f) fclose(f);
        if (end && end != text && v > 0 && v < 0x1p62 && (low == 0 || v < low)) low = v;
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < strlen(top)) return low;
        *slash = '\0';
    }
}

/* One line of /proc/self/cgroup, "ID:CONTROLLERS:PATH" (v2: "0::PATH"): the hierarchy that holds
 * the memory controller ("/memory" under the cgroup filesystem for v1, "" for v2) and its path
 * (at most n bytes); false for another controller's line. */
static bool memory_line(const char *line, size_t len, const char **sub, char *path, size_t n)
{
    const char *c1 = memchr(line, ':', len), *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
    if (!c2) return false;
    bool v2 = c2 == c1 + 1, v1 = false;
    for (const char *m = c1 + 1; m + 6 <= c2; m++)   /* "memory" as one of the controllers */
        v1 |= strncmp(m, "memory", 6) == 0 && (m == c1 + 1 || m[-1] == ',') && (m + 6 == c2 || m[6] == ',');
    int k = (int)(line + len - (c2 + 1));
    if ((!v1 && !v2) || snprintf(path, n, "%.*s", k, c2 + 1) >= (int)n) return false;
    *sub = v1 ? "/memory" : "";
    return true;
}

double ag_cgroup_bytes(const char *root, const char *self)
{
    double low = 0;
    for (const char *line = self; line && *line;) {
        const char *nl = strchr(line, '\n'), *sub;
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char path[PATHLEN], top[PATHLEN], dir[2 * PATHLEN];
        if (memory_line(line, len, &sub, path, sizeof path)) {
            snprintf(top, sizeof top, "%s%s", root, sub);
            snprintf(dir, sizeof dir, "%s%s", top, path);
            size_t end = strlen(dir);
            while (end > strlen(top) && dir[end - 1] == '/') dir[--end] = '\0';   /* "0::/": top itself */
            double v = lowest_limit(top, dir, *sub ? "memory.limit_in_bytes" : "memory.max");
            if (v > 0 && (low == 0 || v < low)) low = v;
        }
        line = nl ? nl + 1 : NULL;
    }
    return low;
}

double ag_machine_bytes(char *what)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    double have = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    char self[4096] = "";   /* /proc/self/cgroup: a line per hierarchy, a dozen at most */
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f) self[fread(self, 1, sizeof self - 1, f)] = '\0', fclose(f);
    double limit = ag_cgroup_bytes("/sys/fs/cgroup", self);
    bool cgroup = limit > 0 && (have <= 0 || limit < have);
    if (cgroup) have = limit;
    if (what) snprintf(what, 64, "%s %.1f GB", cgroup ? "the memory limit of this process's cgroup," : "this machine's",
                       have / 1e9);
    return have;
}

int ag_local_ranks(const ag_dist *d)
{
    int size = ag_dist_size(d);
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!v) v = getenv("MPI_LOCALNRANKS");
    long n = v && size > 1 ? strtol(v, NULL, 10) : 1;
    return n >= 1 && n <= size ? (int)n : 1;
}

ag_status ag_check_memory(double bytes, const char *who, const char *shape, ag_error *err)
{
    char room[64], need[24];
    double have = ag_machine_bytes(room);
    if (have <= 0 || bytes <= have) return AG_OK;   /* unknown: nothing to compare with */
    return ag_seterr(err, AG_ERR_ARG, "%s: %s needs about %s of memory for one step, more than %s; refused before "
                     "allocating", who, shape, ag_bytes_str(bytes, need), room);
}

ag_status ag_check_checkpointable(double params, const char *who, const char *model, ag_error *err)
{
    double most = (double)(AG_ST_MAX_FILE - AG_ST_MAX_HEADER) / 8;
    if (params <= most) return AG_OK;
    return ag_seterr(err, AG_ERR_ARG, "%s: %s has at least %.0f parameters; Adam's state (8 bytes each) would not "
                     "fit the 4 GiB a checkpoint file holds (at most %.0f parameters); refused before training", who,
                     model, params, most);
}
