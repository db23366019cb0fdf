/* fields_io.c -- a config table's struct in and out (fields.h): to and from one flat JSON object
 * (jansson reads it), its --help lines, and the flag loop of a command line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "fields.h"
#include "ddp.h"   /* ag_msg_append */

#define AT(o, f, T) ((T *)((char *)(o) + (f)->offset))
#define CAT(o, f, T) ((const T *)((const char *)(o) + (f)->offset))

// --- JSON ---

/* A row JSON holds: one with a key, not a _STR (the command line's text). */
static bool in_json(const ag_field *f) { return f->key && f->type != AG_FIELD_STR; }

/* f's value in obj as JSON into v (n bytes): 64, 0.001, 1.0, "adamw", true. */
static void json_value(const void *obj, const ag_field *f, char *v, size_t n)
{
    switch (f->type) {
    case AG_FIELD_ENUM: snprintf(v, n, "\"%s\"", ag_switch_name(f->sw, *CAT(obj, f, int))); break;
    case AG_FIELD_SIGNAL: snprintf(v, n, "%d", *CAT(obj, f, int)); break;
    case AG_FIELD_DOUBLE:   /* always a JSON real ("0.0", "1e-05"), so a reader sees the type */
        ag_format_real(v, n - 2, *CAT(obj, f, double));
        if (!strpbrk(v, ".eEn")) strcat(v, ".0");
        break;
    default: ag_field_format(obj, f, v, n); break;
    }
}

char *ag_fields_to_json(const void *obj, const ag_field *tab, int n)
{
    size_t cap = 256, len = 1;
    char *s = malloc(cap);
    if (!s) return NULL;
    strcpy(s, "{");
    for (int i = 0; i < n; i++) {
        char v[64];
        if (!in_json(&tab[i])) continue;
        json_value(obj, &tab[i], v, sizeof v);
        size_t need = len + strlen(tab[i].key) + strlen(v) + 8;   /* , "key": v} and the NUL */
        if (need > cap) {
            char *t = realloc(s, cap = 2 * need);
            if (!t) return free(s), NULL;
            s = t;
        }
        len += (size_t)sprintf(s + len, "%s\"%s\": %s", len > 1 ? ", " : "", tab[i].key, v);
    }
    strcpy(s + len, "}");
    return s;
}

/* Every key of root is a row of tab. */
static ag_status check_keys(json_t *root, const ag_field *tab, int n, ag_error *err)
{
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        const ag_field *f = ag_field_by_key(tab, n, key);
        if (!f || !in_json(f)) return ag_seterr(err, AG_ERR_FORMAT, "config: unknown key \"%s\"", key);
    }
    return AG_OK;
}

/* Field f of obj from the JSON value v; false when v has the wrong type or is out of range. */
static bool read_field(void *obj, const ag_field *f, json_t *v)
{
    switch (f->type) {
    case AG_FIELD_ENUM: {
        int o = json_is_string(v) ? ag_switch_parse(f->sw, json_string_value(v)) : -1;
        if (o >= 0) *AT(obj, f, int) = o;
        return o >= 0;
    }
    case AG_FIELD_BOOL:
        if (json_is_boolean(v)) *AT(obj, f, bool) = json_is_true(v);
        return json_is_boolean(v);
    case AG_FIELD_DOUBLE:
        if (json_is_number(v)) *AT(obj, f, double) = json_number_value(v);
        return json_is_number(v);
    case AG_FIELD_STR: return false;   /* not in JSON (in_json) */
    case AG_FIELD_SIGNAL:
        if (json_is_integer(v)) *AT(obj, f, int) = (int)json_integer_value(v);
        return json_is_integer(v);   /* which signal: ag_fields_check */
    case AG_FIELD_U64:
        if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
        *AT(obj, f, uint64_t) = (uint64_t)json_integer_value(v);
        return true;
    case AG_FIELD_INT:
    case AG_FIELD_LONG: {
        json_int_t k = json_is_integer(v) ? json_integer_value(v) : 0;
        if (!json_is_integer(v) || !((double)k >= f->lo && (double)k <= f->hi)) return false;
        if (f->type == AG_FIELD_INT) *AT(obj, f, int) = (int)k;
        else *AT(obj, f, long) = (long)k;
        return true;
    }
    }
    return false;
}

/* Every row of tab from root (an optional one may be missing), then every range. */
static ag_status read_fields(void *obj, const ag_field *tab, int n, json_t *root, ag_error *err)
{
    for (int i = 0; i < n; i++) {
        if (!in_json(&tab[i])) continue;
        json_t *v = json_object_get(root, tab[i].key);
        if (!v && tab[i].optional) continue;   /* written before the field existed: left as it was */
        if (!v) return ag_seterr(err, AG_ERR_FORMAT, "config: missing \"%s\"", tab[i].key);
        if (!read_field(obj, &tab[i], v))
            return ag_seterr(err, AG_ERR_FORMAT, "config: bad value for \"%s\"", tab[i].key);
    }
    ag_error why = {0};
    for (int i = 0; i < n; i++)   /* the ranges of the rows JSON holds */
        if (in_json(&tab[i]) && ag_field_check(obj, &tab[i], &why))
            return ag_seterr(err, AG_ERR_FORMAT, "config: %s", why.msg);
    return AG_OK;
}

ag_status ag_fields_from_json(void *obj, const ag_field *tab, int n, const char *json, ag_error *err)
{
    json_error_t je;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &je);
    if (!root || !json_is_object(root)) {
        ag_seterr(err, AG_ERR_FORMAT, "config is not a JSON object (%s)", root ? "other JSON value" : je.text);
        json_decref(root);
        return AG_ERR_FORMAT;
    }
    ag_status st = check_keys(root, tab, n, err);
    if (st == AG_OK) st = read_fields(obj, tab, n, root, err);
    json_decref(root);
    return st;
}

ag_status ag_fields_set(void *obj, const ag_field *tab, int n, const char *text, ag_error *err)
{
    for (const char *p = text + strspn(text, " "); *p; p += strspn(p, " ")) {
        char pair[128], *eq;
        size_t len = strcspn(p, " ");
        snprintf(pair, sizeof pair, "%.*s", (int)len, p);
        p += len;
        const ag_field *f = (eq = strchr(pair, '=')) ? (*eq = '\0', ag_field_by_key(tab, n, pair)) : NULL;
        if (!f || !in_json(f)) {
            if (eq) *eq = '=';
            return ag_seterr(err, AG_ERR_ARG, "not a field of the table: '%s'", pair);
        }
        if (ag_field_parse(obj, f, eq + 1, err)) return AG_ERR_ARG;
    }
    return AG_OK;
}

// --- usage lines ---

void ag_field_usage(const ag_field *f, char *buf, size_t cap, size_t *len)
{
    static const char *const meta[] = {[AG_FIELD_INT] = " N", [AG_FIELD_LONG] = " N", [AG_FIELD_DOUBLE] = " X",
                                       [AG_FIELD_U64] = " N", [AG_FIELD_ENUM] = " NAME", [AG_FIELD_BOOL] = "",
                                       [AG_FIELD_SIGNAL] = " SIG", [AG_FIELD_STR] = " TEXT"};
    if (!f->flag || cap == 0) return;
    char head[96];
    snprintf(head, sizeof head, "%s%s", f->flag, f->duration ? " DURATION" : meta[f->type]);
    ag_msg_append(buf, cap, len, "  %-22s %s%s\n", head, f->help ? f->help : "", f->type == AG_FIELD_ENUM ? ":" : "");
    for (int v = 0; f->type == AG_FIELD_ENUM && v < f->sw->n; v++)
        ag_msg_append(buf, cap, len, "  %-22s   %-10s %s%s\n", "", f->sw->names[v], f->sw->help[v],
                      v == 0 ? " (default)" : "");
}

size_t ag_fields_usage(const ag_field *tab, int n, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap > 0) buf[0] = '\0';
    for (int i = 0; i < n; i++) ag_field_usage(&tab[i], buf, cap, &len);
    return len;
}

size_t ag_fields_usage_text(const char *text, const ag_field *tab, int n, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap > 0) buf[0] = '\0';
    for (const char *line = text; *line;) {
        int w = (int)strcspn(line, "\n");
        bool newline = line[w] == '\n';
        char key[64] = "";
        if (line[0] == '@') snprintf(key, sizeof key, "%.*s", w - 1, line + 1);
        const ag_field *f = key[0] ? ag_field_by_key(tab, n, key) : NULL;
        if (f && f->flag) ag_field_usage(f, buf, cap, &len);
        else ag_msg_append(buf, cap, &len, "%.*s%s", w, line, newline ? "\n" : "");
        line += w + newline;
    }
    return len;
}

// --- a command line, flag by flag ---

ag_arg ag_args(int argc, char **argv, int first)
{
    return (ag_arg){.argc = argc, .argv = argv, .i = first - 1};
}

bool ag_args_next(ag_arg *a)
{
    if (++a->i >= a->argc) return false;
    const char *s = a->argv[a->i];
    const char *eq = strncmp(s, "--", 2) == 0 ? strchr(s, '=') : NULL;
    a->value = eq ? eq + 1 : NULL;
    a->inline_value = eq != NULL;
    if (eq) {
        size_t n = (size_t)(eq - s) < sizeof a->flag - 1 ? (size_t)(eq - s) : sizeof a->flag - 1;
        memcpy(a->flag, s, n);
        a->flag[n] = '\0';
    } else {
        snprintf(a->flag, sizeof a->flag, "%s", s);
    }
    return true;
}

ag_status ag_arg_value(ag_arg *a, ag_error *err)
{
    if (a->inline_value) return AG_OK;
    if (a->i + 1 >= a->argc) return ag_seterr(err, AG_ERR_ARG, "%s needs a value", a->flag);
    a->value = a->argv[++a->i];
    return AG_OK;
}

ag_status ag_arg_no_value(const ag_arg *a, ag_error *err)
{
    if (!a->inline_value) return AG_OK;
    return ag_seterr(err, AG_ERR_ARG, "%s takes no value", a->flag);
}

ag_status ag_arg_unknown(const ag_arg *a, const char *prog, const char *cmd, ag_error *err)
{
    const char *arg = a->argv[a->i];
    if (arg[0] == '-')
        return ag_seterr(err, AG_ERR_ARG, "unknown flag '%s' for %s (see: %s %s --help)", arg, cmd, prog, cmd);
    return ag_seterr(err, AG_ERR_ARG, "unexpected argument '%s' (see: %s %s --help)", arg, prog, cmd);
}

ag_status ag_arg_pass_over(void *user, ag_arg *a, bool *found, ag_error *err)
{
    (void)user, (void)a, (void)err;
    *found = true;
    return AG_OK;
}

ag_status ag_arg_required(const char *v, const char *flag, const char *prog, const char *cmd, ag_error *err)
{
    if (v && *v) return AG_OK;
    if (v) return ag_seterr(err, AG_ERR_ARG, "%s must not be empty", flag);
    return ag_seterr(err, AG_ERR_ARG, "%s is required (see: %s %s --help)", flag, prog, cmd);
}

bool ag_args_want_help(int argc, char **argv, int first)
{
    for (int i = first; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

ag_status ag_parse_choice(const char *flag, const char *const *names, const char *s, int *out, ag_error *err)
{
    ag_switch sw = {flag, 0, names, NULL};   /* the names as a switch: its parse, its list of choices */
    while (names[sw.n]) sw.n++;
    int v = ag_switch_parse(&sw, s);
    char choices[256];
    if (v < 0) return ag_seterr(err, AG_ERR_ARG, "%s must be %s (got '%s')", flag, ag_switch_choices(&sw, choices,
                                sizeof choices), s);
    *out = v;
    return AG_OK;
}

ag_status ag_field_arg(void *obj, const ag_field *f, ag_arg *a, ag_error *err)
{
    if (f->type == AG_FIELD_BOOL) {   /* --no-scale, or --no-scale=false to undo a preset's */
        if (!a->inline_value) a->value = "true";
    } else if (ag_arg_value(a, err)) {
        return AG_ERR_ARG;
    }
    return ag_field_parse(obj, f, a->value, err);
}

ag_status ag_fields_arg(void *obj, const ag_field *tab, int n, bool *given, ag_arg *a, bool *found, ag_error *err)
{
    const ag_field *f = ag_field_by_flag(tab, n, a->flag);
    *found = f != NULL;
    if (!f) return AG_OK;
    if (given) given[f - tab] = true;
    return ag_field_arg(obj, f, a, err);
}

ag_status ag_args_parse(int argc, char **argv, int first, const ag_field_table *tabs, int ntabs, ag_arg_fn other,
                        void *user, const char *prog, const char *cmd, ag_error *err)
{
    ag_status s = AG_OK;
    for (ag_arg a = ag_args(argc, argv, first); s == AG_OK && ag_args_next(&a);) {
        bool found = false;
        for (int t = 0; t < ntabs && !found; t++)
            s = ag_fields_arg(tabs[t].obj, tabs[t].rows, tabs[t].n, tabs[t].given, &a, &found, err);
        if (!found && other) s = other(user, &a, &found, err);
        if (!found) s = ag_arg_unknown(&a, prog, cmd, err);
    }
    for (int t = 0; t < ntabs; t++)
        for (int i = 0; s == AG_OK && i < tabs[t].n; i++)
            if (tabs[t].rows[i].required)
                s = ag_arg_required(*AT(tabs[t].obj, &tabs[t].rows[i], const char *), tabs[t].rows[i].flag, prog, cmd,
                                    err);
    return s;
}
