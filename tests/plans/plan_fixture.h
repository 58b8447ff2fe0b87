/*
 * tests/plans/plan_fixture.h — what the planner's strategy tests share: finding etc/hardware
 * and the shared length distributions, planner configs, and steps sampled from a lengths
 * file. Static functions: include it from one test file each.
 */
#ifndef LT_TEST_PLAN_FIXTURE_H
#define LT_TEST_PLAN_FIXTURE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/model.h"
#include "plans/cost/cost.h"
#include "plans/cost/hardware.h"
#include "plans/strategies/plan.h"
#include "plans/batches/sampler.h"

#define GIB 1073741824.0

static char hw_dir[4096];      /* the source tree's etc/hardware, or "" */
static char lengths_dir[4096]; /* $LONGTAIL_SHARED/lengths, ../shared/lengths beside the source tree, or "" */

/* The source tree: $top_srcdir (make check), $srcdir, ".", "..", "../..". */
static inline void find_dirs(void) {
    const char *roots[] = {getenv("top_srcdir"), getenv("srcdir"), ".", "..", "../.."};
    hw_dir[0] = lengths_dir[0] = '\0';
    const char *shared = getenv("LONGTAIL_SHARED"); /* scripts/test.sh: the shared data of a CI clone */
    if (shared && shared[0]) {
        char buf[4200];
        snprintf(buf, sizeof buf, "%.4000s/lengths/commoncrawl.txt", shared);
        if (access(buf, R_OK) == 0) snprintf(lengths_dir, sizeof lengths_dir, "%.4000s/lengths", shared);
    }
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (roots[i] == NULL) continue;
        char buf[4200];
        snprintf(buf, sizeof buf, "%.4000s/etc/hardware/h200.ini", roots[i]);
        if (hw_dir[0] == '\0' && access(buf, R_OK) == 0)
            snprintf(hw_dir, sizeof hw_dir, "%.4000s/etc/hardware", roots[i]);
        snprintf(buf, sizeof buf, "%.4000s/../shared/lengths/commoncrawl.txt", roots[i]);
        if (lengths_dir[0] == '\0' && access(buf, R_OK) == 0)
            snprintf(lengths_dir, sizeof lengths_dir, "%.4000s/../shared/lengths", roots[i]);
    }
}

static inline lt_hardware load_hw(const char *name) {
    lt_hardware hw;
    lt_error err;
    if (lt_hardware_load(&hw, name, hw_dir, &err) != LT_OK) {
        fprintf(stderr, "%s: %s (%s)\n", name, err.what, err.where);
        exit(1);
    }
    return hw;
}

/* A planner config: model shape `m` on h200, the given layout, mem_cap in GiB (0 = HBM),
 * ZeRO-1, strategy megatron, the config's defaults for the other [plan] keys. */
static inline lt_plan_config config_of_shape(const lt_model_shape *m, int dp, int pp, int tp, int64_t context,
                                                int max_cp, double mem_gib) {
    lt_plan_config pc;
    memset(&pc, 0, sizeof pc);
    lt_hardware hw = load_hw("h200");
    lt_error err;
    if (lt_cost_model_init(&pc.cm, m, &hw, pp, tp, dp, &err) != LT_OK) {
        fprintf(stderr, "cost model %s: %s\n", m->name ? m->name : "(unnamed)", err.what);
        exit(1);
    }
    pc.cm.shard = LT_SHARD_ZERO1;
    if (mem_gib > 0) pc.cm.mem_cap = mem_gib * GIB;
    pc.strategy = LT_STRATEGY_MEGATRON;
    pc.context_len = context;
    pc.max_cp = max_cp;
    pc.seq1f1b_slices = 4;
    pc.dp_merge_margin = 0.1; /* the config's defaults (lib/config_schema.c) */
    pc.milp_time_limit = 0;
    pc.milp_max_nodes = 1000;
    pc.milp_gap = 0.001;
    return pc;
}

/* The same for the preset named `model`. */
static inline lt_plan_config config_of(const char *model, int dp, int pp, int tp, int64_t context, int max_cp,
                                          double mem_gib) {
    const lt_model_shape *m = lt_model_preset(model);
    if (!m) {
        fprintf(stderr, "no model preset %s\n", model);
        exit(1);
    }
    return config_of_shape(m, dp, pp, tp, context, max_cp, mem_gib);
}

#define NEED_HW()                                                                                                \
    do {                                                                                                         \
        if (hw_dir[0] == '\0') {                                                                                 \
            print_message("skipped: etc/hardware not found (set top_srcdir)\n");                                 \
            skip();                                                                                              \
        }                                                                                                        \
    } while (0)

#define NEED_LENGTHS()                                                                                           \
    do {                                                                                                         \
        if (lengths_dir[0] == '\0') {                                                                            \
            print_message("skipped: no $LONGTAIL_SHARED/lengths nor ../shared/lengths\n");                       \
            skip();                                                                                              \
        }                                                                                                        \
    } while (0)

static inline lt_strategies *planner_of(const lt_plan_config *pc) {
    lt_strategies *p = NULL;
    lt_error err;
    lt_status st = lt_strategies_create(&p, pc, &err);
    if (st != LT_OK) fail_msg("lt_strategies_create: %s (hint: %s)", err.what, err.hint);
    return p;
}

/* "key=value" of a plan's params (or -1 when absent). */
static inline long param_of(const char *params, const char *key) {
    size_t n = strlen(key);
    for (const char *q = params; (q = strstr(q, key)) != NULL; q += n)
        if ((q == params || q[-1] == ' ') && q[n] == '=') return strtol(q + n + 1, NULL, 10);
    return -1;
}

/* The samples of one step of `file` (truncate to context, global batch 512, seed 1234). */
typedef struct corpus_steps {
    lt_corpus *corpus;
    lt_sampler *sampler;
} corpus_steps;

static inline lt_sampler_config sampler_config_of(int64_t context) {
    lt_sampler_config sc = {.context_len = context, .global_batch = 512, .seed = 1234, .policy = LT_SAMPLE_TRUNCATE};
    return sc;
}

static inline corpus_steps open_steps(const char *file, int64_t context) {
    corpus_steps cs = {NULL, NULL};
    lt_error err;
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", lengths_dir, file);
    if (lt_corpus_load_lengths(&cs.corpus, path, &err) != LT_OK) fail_msg("%s: %s", path, err.what);
    lt_sampler_config sc = sampler_config_of(context);
    if (lt_sampler_create(&cs.sampler, cs.corpus, &sc, &err) != LT_OK) fail_msg("sampler: %s", err.what);
    return cs;
}

/* The same steps for a --bench mode (outside cmocka): the lengths file at `path`; false, with
 * the error on stderr, when it cannot be read. */
static inline bool bench_sampler(const char *path, int64_t context, lt_corpus **corpus, lt_sampler **sampler) {
    lt_error err;
    if (lt_corpus_load_lengths(corpus, path, &err) != LT_OK) {
        fprintf(stderr, "%s: %s\n", path, err.what);
        return false;
    }
    lt_sampler_config sc = sampler_config_of(context);
    if (lt_sampler_create(sampler, *corpus, &sc, &err) != LT_OK) {
        fprintf(stderr, "sampler: %s\n", err.what);
        lt_corpus_free(*corpus);
        return false;
    }
    return true;
}

static inline void step_lengths(corpus_steps *cs, uint64_t t, int64_t *lengths) {
    lt_error err;
    if (lt_sampler_step_lengths(cs->sampler, t, lengths, &err) != LT_OK) fail_msg("sampler: %s", err.what);
}

static inline void close_steps(corpus_steps *cs) {
    lt_sampler_free(cs->sampler);
    lt_corpus_free(cs->corpus);
}


__attribute__((unused)) static const char *const corpora[] = {"chunkflow-eval.txt", "commoncrawl.txt", "github.txt", "lmsys-chat.txt",
                                      "wikipedia.txt"};

#endif /* LT_TEST_PLAN_FIXTURE_H */
