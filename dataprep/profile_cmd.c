/*
 * dataprep/profile_cmd.c — `dataprep profile DIR`: the length profile of every finished
 * task of an output directory (dataprep/profile.h), as a table, --json, or --svg FILE.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/dataprep.h" /* profile_command */
#include "dataprep/dataset.h"  /* lt_dataset */
#include "dataprep/profile.h"  /* lt_profile_* */
#include "lib/files.h"         /* lt_atomic_* */
#include "lib/json.h"          /* lt_json */
#include "lib/model.h"         /* lt_model_from_config */

int profile_command(lt_cli_ctx *ctx) {
    const char *dir = NULL, *model = NULL, *svg = NULL;
    bool json = false;
    for (int i = 1; i < ctx->argc; i++) {
        const char *a = ctx->argv[i], *v;
        int missing = 0;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--model", &missing))) model = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--svg", &missing))) svg = v;
        else if (missing) {
            return lt_cli_usage(ctx, "option '%.200s' needs a value", a);
        } else if (strcmp(a, "--json") == 0) json = true;
        else if (a[0] == '-' && a[1] != '\0') return lt_cli_unknown_option(ctx, a);
        else if (!dir) dir = a;
        else {
            return lt_cli_usage(ctx, "unexpected argument '%.200s' (one DIR)", a);
        }
    }
    if (!dir) return lt_cli_usage(ctx, "which directory? give DIR (a dataprep run --out directory)");
    lt_error err;
    lt_error_clear(&err);
    lt_model_shape m;
    /* --model NAME, else the config's [model] (preset + dimension overrides), else llama-7b */
    lt_status st = lt_model_from_config(ctx->config, model, &m, &err);
    if (st != LT_OK) return lt_error_exit(&err);
    lt_dataset *ds = NULL;
    if ((st = lt_dataset_open(&ds, dir, -1, &err)) != LT_OK) return lt_error_exit(&err);
    uint64_t n = 0;
    for (uint32_t t = 0; t < ds->num_tasks; t++) n += lt_index_n_docs(ds->tasks[t].index);
    uint64_t *lens = lt_malloc_check((n ? n : 1) * sizeof *lens);
    uint32_t *src = lt_malloc_check((n ? n : 1) * sizeof *src);
    /* each document's named source (its input file's; "" = the unnamed data.input) */
    const char **names = NULL;
    size_t n_src = 0, k = 0;
    bool named = false;
    for (uint32_t t = 0; t < ds->num_tasks; t++) {
        const lt_index *ix = ds->tasks[t].index;
        for (uint64_t d = 0; d < lt_index_n_docs(ix); d++) {
            lt_index_source is;
            lt_index_doc_source(ix, d, &is);
            const char *name = lt_index_file_source(ix, is.file);
            size_t i = 0;
            while (i < n_src && strcmp(names[i], name) != 0) i++;
            if (i == n_src) {
                names = lt_realloc_check(names, (n_src + 1) * sizeof *names);
                names[n_src++] = name;
                named |= name[0] != '\0';
            }
            src[k] = (uint32_t)i;
            lens[k++] = lt_index_doc_len(ix, d);
        }
    }
    lt_profile p;
    lt_profile *per = NULL;
    st = lt_profile_compute(lens, (size_t)n, &m, &p, &err);
    if (!named) n_src = 0; /* one unnamed source: the profile is the whole */
    if (st == LT_OK && n_src > 0) {
        per = lt_calloc_check(n_src, sizeof *per);
        uint64_t *sl = lt_malloc_check((n ? n : 1) * sizeof *sl);
        for (size_t i = 0; i < n_src && st == LT_OK; i++) {
            size_t c = 0;
            for (uint64_t d = 0; d < n; d++)
                if (src[d] == i) sl[c++] = lens[d];
            st = lt_profile_compute(sl, c, &m, &per[i], &err);
        }
        free(sl);
    }
    free(lens);
    free(src);
    if (st == LT_OK) {
        if (json) {
            lt_json j;
            lt_json_init(&j);
            lt_profile_json_sources(&p, per, names, n_src, &j);
            st = lt_json_fwrite_line(&j, stdout, "standard output", &err);
            lt_json_free(&j);
        } else {
            lt_profile_print_table(&p, stdout);
            if (n_src > 0) lt_profile_print_sources(&p, per, names, n_src, stdout);
        }
        if (st == LT_OK && (fflush(stdout) != 0 || ferror(stdout)))
            st = lt_fail(&err, LT_ERR_IO, "standard output", "write failed: %s", strerror(errno));
    }
    if (st == LT_OK && svg) {
        lt_atomic_file af;
        if ((st = lt_atomic_open(&af, svg, &err)) == LT_OK) {
            char title[512];
            snprintf(title, sizeof title, "Length profile of %s", dir);
            st = lt_profile_svg_sources(&p, per, names, n_src, title, af.fp, &err);
            if (st == LT_OK) st = lt_atomic_commit(&af, &err);
            else lt_atomic_abort(&af);
        }
    }
    free(per);
    free(names);
    lt_dataset_close(ds);
    return st == LT_OK ? 0 : lt_error_exit(&err);
}
