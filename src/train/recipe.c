/* recipe.c -- the recipe a time budget picks from the compute it measures (recipe.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "recipe.h"
#include "budget.h"          /* ag_format_duration */
#include "../nn/trace.h"     /* ag_format_thousands */
#include "../tensor/debug.h" /* ag_now_s */

#define CAL_SKIP 3          /* probe steps not timed: the arena grows, the thread pools start */
#define CAL_MIN 3           /* timed probe steps, at least */
#define CAL_MAX 200         /* and at most */
#define RUN_SHARE 0.95      /* of the budget left, the share steps get: the rest evaluates, checkpoints
                               and keeps the budget's 2% reserve */
#define PROBE_SHARE 0.02    /* the probe times steps for 2% of the budget, */
#define PROBE_MIN_S 0.2     /*   at least this long */
#define PROBE_MAX_S 3.0     /*   at most this long */
#define SETUP_S 1.0         /* the data read, the model made, before the first step */

static ag_status check_table(const ag_recipe *table, int n, int ref, ag_error *err)
{
    if (n < 1 || n > AG_RECIPE_MAX)
        return ag_seterr(err, AG_ERR_ARG, "recipes: %d in the table, it takes 1 to %d", n, AG_RECIPE_MAX);
    if (ref < 0 || ref >= n) return ag_seterr(err, AG_ERR_ARG, "recipes: the reference %d is not in the table", ref);
    for (int i = 0; i < n; i++)
        if (!(table[i].cost > 0))
            return ag_seterr(err, AG_ERR_ARG, "recipes: %s's cost %g is not > 0", table[i].name, table[i].cost);
    return AG_OK;
}

/* Each candidate's steps in what is left of the budget after the probes, and the pick: the last
 * that gets its min_steps, else the first. */
static void count_and_pick(const ag_recipe *table, int n, ag_recipe_choice *ch)
{
    double left = fmax(0, ch->budget_s - ch->probe_s - SETUP_S) * RUN_SHARE;
    ch->pick = 0;
    for (int i = 0; i < n; i++) {
        ch->steps[i] = ch->step_s[i] > 0 ? (long)fmin(floor(left / ch->step_s[i]), 1e9) : 0;
        if (ch->steps[i] >= table[i].min_steps) ch->pick = i;
    }
}

ag_status ag_recipe_pick(const ag_recipe *table, int n, int ref, double budget_s, double probe_s, double ref_step_s,
                         ag_recipe_choice *ch, ag_error *err)
{
    memset(ch, 0, sizeof *ch);
    ag_status s = check_table(table, n, ref, err);
    if (s) return s;
    ch->budget_s = budget_s;
    ch->probe_s = probe_s;
    ch->n = n;
    ch->timed[ref] = true;
    for (int i = 0; i < n; i++) ch->step_s[i] = ref_step_s / table[ref].cost * table[i].cost;
    count_and_pick(table, n, ch);
    return AG_OK;
}

int ag_recipe_close_call(const ag_recipe *table, const ag_recipe_choice *ch)
{
    int up = ch->pick + 1;
    if (up >= ch->n || ch->timed[up]) return -1;
    return ch->steps[up] >= AG_RECIPE_CLOSE * (double)table[up].min_steps ? up : -1;
}

void ag_recipe_timed(const ag_recipe *table, int i, double step_s, double probe_s, ag_recipe_choice *ch)
{
    if (i < 0 || i >= ch->n || !(step_s > 0) || !(ch->step_s[i] > 0)) return;   /* nothing measured */
    double scale = step_s / ch->step_s[i];   /* the larger ones: as much off as i's prediction */
    for (int j = i + 1; j < ch->n; j++) ch->step_s[j] *= scale;
    ch->step_s[i] = step_s;
    ch->timed[i] = true;
    ch->probe_s += probe_s;
    count_and_pick(table, ch->n, ch);
}

void ag_recipe_line(char *buf, size_t n, const ag_recipe *table, int n_table, const ag_recipe_choice *ch,
                    const char *what)
{
    char d[32], steps[32];
    int p = ch->pick;
    ag_format_duration(d, sizeof d, ch->budget_s);
    ag_format_thousands(steps, sizeof steps, ch->steps[p]);
    int w = snprintf(buf, n, "time budget %s at %.3g s a step: about %s steps -> recipe %s%s%s%s", d, ch->step_s[p],
                     steps, table[p].name, what ? " (" : "", what ? what : "", what ? ")" : "");
    if (p + 1 < n_table && w >= 0 && (size_t)w < n) {   /* why not the next one up */
        char got[32], need[32];
        ag_format_thousands(got, sizeof got, ch->steps[p + 1]);
        ag_format_thousands(need, sizeof need, table[p + 1].min_steps);
        snprintf(buf + w, n - (size_t)w, "; %s would get %s%s, it needs %s", table[p + 1].name, got,
                 ch->timed[p + 1] ? " (its steps timed)" : "", need);
    }
}

static double probe_now(const ag_recipe_probe_opts *o) { return o->clock ? o->clock(o->clock_user) : ag_now_s(); }

ag_status ag_recipe_probe(const ag_recipe_probe_opts *o, double budget_s, double *step_s, ag_error *err)
{
    double seconds = fmin(fmax(PROBE_SHARE * budget_s, PROBE_MIN_S), PROBE_MAX_S), timed = 0, t0 = 0;
    const volatile sig_atomic_t *stop = o->stop;
    ag_status s = AG_OK;
    long n = 0;
    for (long t = 1; s == AG_OK && n < CAL_MAX && (n < CAL_MIN || timed < seconds) && !(stop && *stop); t++) {
        if (t > CAL_SKIP) t0 = probe_now(o);
        s = o->step(o->user, t, err);
        if (t > CAL_SKIP) timed += probe_now(o) - t0, n++;
    }
    double mean[3] = {n ? timed / (double)n : 0, 1, stop && *stop};
    if (s == AG_OK && o->sum) s = o->sum(o->sum_user, mean, 3, err);   /* every rank alike */
    *step_s = mean[2] > 0 ? 0 : mean[0] / mean[1];   /* a rank stopped: all stop */
    return s;
}
