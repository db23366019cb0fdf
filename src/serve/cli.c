/* cli.c -- serve's command line (serve.h): `PROGRAM serve --run DIR [--port N] [--host ADDR]`,
 * the program's name from ag_train_name, and the command whole (ag_serve_main). */
#include <stdlib.h>
#include <string.h>
#include "serve.h"
#include "../train/program.h"   /* ag_say_error, ag_stop_catch, ag_stopped_code */
#include "../train/train.h"   /* ag_flag_is */
#include "../train/train_impl.h"   /* ag__train_program */

void ag_serve_usage(FILE *f, const ag_serve_client *c)
{
    const char *p = ag__train_program();
    fprintf(f, "usage: %s serve --run DIR [--port 8080] [--host 127.0.0.1]\n"
            "\n"
            "A page and a JSON API over a run directory (docs/serve.md): %s, training, report.\n"
            "It may run beside a `train` on DIR: each request uses the latest checkpoint.\n"
            "\n"
            "  --run DIR     the run directory (%s train --out DIR)\n"
            "  --port N      the TCP port (default 8080; 0: any free port, printed)\n"
            "  --host ADDR   the IPv4 address to listen on (default 127.0.0.1, this machine only;\n"
            "                0.0.0.0: every interface, with a warning)\n", p, c->what, p);
}

/* --flag VALUE or --flag=VALUE at argv[*i]; the value, or NULL when the flag is not name. */
static const char *flag_value(int argc, char **argv, int *i, const char *name, ag_error *err)
{
    const char *v;
    if (!ag_flag_is(argv[*i], name, &v)) return NULL;
    if (v) return v;
    if (*i + 1 >= argc) {
        ag_seterr(err, AG_ERR_ARG, "%s needs a value (see: %s serve --help)", name, ag__train_program());
        return NULL;
    }
    return argv[++*i];
}

ag_status ag_serve_parse(ag_serve_args *a, int argc, char **argv, bool *help, ag_error *err)
{
    const char *p = ag__train_program();
    *a = (ag_serve_args){ NULL, "127.0.0.1", 8080 };
    *help = false;
    for (int i = 2; i < argc; i++) {
        const char *v, *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            *help = true;
        } else if ((v = flag_value(argc, argv, &i, "--run", err))) {
            a->run = v;
        } else if ((v = flag_value(argc, argv, &i, "--host", err))) {
            a->host = v;
        } else if ((v = flag_value(argc, argv, &i, "--port", err))) {
            char *end;
            long port = strtol(v, &end, 10);
            if (!*v || *end || port < 0 || port > 65535)
                return ag_seterr(err, AG_ERR_ARG, "--port '%s': give a number from 0 to 65535", v);
            a->port = (int)port;
        } else {
            return err->status ? err->status
                 : ag_seterr(err, AG_ERR_ARG, "unknown flag '%s' for serve (see: %s serve --help)", arg, p);
        }
    }
    if (!*help && !a->run) return ag_seterr(err, AG_ERR_ARG, "--run is required (see: %s serve --help)", p);
    return AG_OK;
}

int ag_serve_main(const ag_serve_client *c, int argc, char **argv, const char *lead)
{
    ag_error e = {0};
    ag_serve_args a;
    bool help;
    if (ag_serve_parse(&a, argc, argv, &help, &e)) return ag_say_error(lead, AG_ERR_ARG, &e);
    if (help) return ag_serve_usage(stdout, c), fflush(stdout) == 0 ? 0 : 1;
    const volatile sig_atomic_t *stop = ag_stop_catch(false, 0);
    ag_status s = ag_serve_run(c, &a, stop, stdout, stderr, NULL, &e);
    if (s) return ag_say_error(lead, s, &e);
    return ag_stopped_code(*stop);
}
