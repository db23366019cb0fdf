/* switches.c -- the descriptions of the model's switches, made from their tables in switches.h,
 * and the few things a program does with a switch by name. */
#include <stdio.h>
#include <string.h>
#include "switches.h"

AG_SWITCH_DEFINE(ag_norm_position_switch, "norm_position", AG_NORM_POSITIONS);
AG_SWITCH_DEFINE(ag_norm_switch, "norm", AG_NORM_KINDS);
AG_SWITCH_DEFINE(ag_mlp_switch, "mlp", AG_MLP_KINDS);
AG_SWITCH_DEFINE(ag_init_switch, "init", AG_WEIGHT_INITS);
AG_SWITCH_DEFINE(ag_mask_fill_switch, "mask_fill", AG_MASK_FILLS);

const char *ag_switch_name(const ag_switch *sw, int v)
{
    return v >= 0 && v < sw->n ? sw->names[v] : "?";
}

int ag_switch_parse(const ag_switch *sw, const char *s)
{
    for (int v = 0; v < sw->n; v++)
        if (strcmp(s, sw->names[v]) == 0) return v;
    return -1;
}

const char *ag_switch_choices(const ag_switch *sw, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int v = 0; v < sw->n && len < n; v++) {
        const char *sep = v == 0 ? "" : v + 1 < sw->n ? ", " : " or ";
        int w = snprintf(buf + len, n - len, "%s%s", sep, sw->names[v]);
        if (w < 0) break;
        len += (size_t)w;
    }
    return buf;
}

ag_status ag_switch_check(const ag_switch *sw, int v, ag_error *err)
{
    if (v >= 0 && v < sw->n) return AG_OK;
    char choices[256];
    ag_switch_choices(sw, choices, sizeof choices);
    return ag_seterr(err, AG_ERR_ARG, "%s must be %s (got %d)", sw->field, choices, v);
}
