/*
 * plans/store/store.h — the plan database: every step's plan of one run in SQLite, where users
 * read it with `sqlite3` and the trainer executes it. docs/plans-schema.md documents every
 * table and view with example queries.
 *
 * File: application_id 0x4C54504C ("LTPL"), user_version = the schema version, 2 (lib/db.h
 * migrations; a version-1 file, without unit cp, backward partitions and DP-Merge groups,
 * is refused, LT_ERR_VERSION "... built by an older planner ...; rebuild it", by
 * lt_store_open and lt_store_begin, as a newer one is). One run per file (run_id 1): its effective config (lt_config_dump text), the
 * corpus fingerprint (lt_corpus_fingerprint), the sampler and layout values, and the
 * baseline tuning (lt_strategies_params). Tables are STRICT (and WITHOUT ROWID where keyed, but
 * stages, whose rows hold the op lists):
 *
 *   runs(run_id, name, strategy, config, fingerprint, input, sample_policy, context_len,
 *        global_batch, seed, dp, pp, tp, layers, mem_cap_bytes, tuning, n_samples_total,
 *        longtail_version)
 *   steps(run_id, step, strategy, n_samples, n_tokens, predicted_ms, bubble_ratio,
 *         peak_mem_bytes, solve_ms (NULL with timings off), params, solver_status
 *         (none | optimal | feasible | timeout | infeasible, a CHECK), runner_up,
 *         runner_up_ms (NULL but for auto))
 *   step_samples(run_id, step, idx, sample_id, length, dp_rank, task, doc, tok)
 *         idx = the sample's index in the step (lt_slice.sample); sample_id = the sampler's
 *   pipelines(run_id, step, dp_rank, cp, predicted_ms)
 *   stages(run_id, step, dp_rank, stage, busy_ms, peak_mem_bytes, layer_begin, layer_end,
 *          n_ops, ops)
 *         [layer_begin, layer_end) the stage's layer block (lt_schedule_stage_layers); ops the
 *         stage's op list, one JSON array of n_ops elements in execution order (seq = the
 *         index): [kind, unit, recompute_layers, start_ns, finish_ns, mem_bytes] for an op
 *         over the whole block with part 'all', else the same plus [..., layer_begin,
 *         layer_end, part]; kind 0 F, 1 FK, 2 B; part 0 all, 1 pre, 2 attn, 3 post; times
 *         integer nanoseconds (docs/plans-schema.md, "The ops encoding")
 *   units_slices(run_id, step, dp_rank, passes, unit, seq, idx, tok_begin, tok_end, cp, slice)
 *         passes 'FB' (a symmetric schedule's units: the same in both passes), or 'F' (the
 *         units and slices) and 'B' (the bunits and bslices) of an asymmetric schedule
 *         (plans/schedule/schedule.h), each pass's units numbered from 0; cp the unit's cp, 0 stored
 *         as 1 (both mean no DP-Merge) and read back as 1; slice the row's position in the
 *         slice table of its pass (slices, or bslices for 'B'), so the tables round-trip
 *   heldout(run_id, idx, task, doc, length)    the documents held out for validation
 *         (data.holdout), created by lt_store_put_heldout when missing (heldout.c)
 *   dp_merges(run_id, step, idx, sample_id, dp_rank, cp)
 *         a row per DP-Merge group (lt_dp_merge): idx the sample (lt_dp_merge.sample),
 *         sample_id the sampler's, dp_rank the dp_rank of its first pipeline, cp its size
 *
 * Views (CONTRACTS.md columns first, then extras):
 *   step_summary(run_id, step, strategy, n_samples, n_tokens, predicted_ms, bubble_ratio,
 *                peak_mem_bytes, solve_ms, params, solver_status)
 *   plan_slices(run_id, step, dp_rank, pass, unit, seq, sample_id, tok_begin, tok_end, idx, cp)
 *            'FB' rows once per pass; 'F' rows as pass F, 'B' rows as pass B
 *   plan_ops(run_id, step, dp_rank, stage, seq, kind, unit, recompute_layers, layer_begin,
 *            layer_end, part, start_ms, finish_ms, mem_bytes)
 *            a row per op: the stages' op lists through json_each, kind 'F' | 'FK' | 'B',
 *            part 'all' | 'pre' | 'attn' | 'post', start_ms/finish_ms = ns / 1e6
 *   samples(run_id, step, sample_id, length, dp_rank, source, idx, task, doc, tok, merge_cp)
 *            source = 'task=T,doc=D,tok=O' (lt_sample_source_format); merge_cp the size of
 *            the sample's DP-Merge group (dp_merges.cp), 1 for none
 *   stage_timeline(run_id, step, dp_rank, stage, busy_ms, idle_ms, peak_mem_bytes,
 *                  headroom_bytes)              per-stage busy/idle and memory headroom
 *   dp_balance(run_id, step, pipelines, min_ms, max_ms, mean_ms, imbalance)
 *                  imbalance = max / mean of the pipelines' predicted_ms
 *
 * Writing (planner build): lt_store_begin works on a temporary file next to the target
 * (PATH.tmp.<pid>): a copy of PATH when PATH exists (resume), else a new file. Everything
 * goes in one transaction; lt_store_commit commits, syncs, and renames the temporary file
 * over PATH (then syncs the directory), so PATH is always either the old file or the new
 * one. lt_store_abort (or a crash) leaves PATH untouched; a stale temporary is harmless.
 * Determinism: the file holds nothing that depends on time, machine or thread count except
 * steps.solve_ms, which lt_store_begin's `timings = false` leaves NULL; with it off, the same
 * inputs give byte-identical files.
 * Units: the tables hold milliseconds (*_ms = seconds x 1e3, REAL) and bytes; reading divides
 * by 1e3, which may move a time by one ulp but keeps every ordering (the conversion is
 * monotone). Op times are integer nanoseconds (read back / 1e9: within 1 ns), written so
 * that an op finishing by its pipeline's time still does when read back; so a plan read
 * back passes lt_plan_validate whenever the plan put did.
 *
 * Thread-safety: a lt_store is used by one thread.
 */
#ifndef LT_STORE_H
#define LT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"             /* lt_status, lt_error */
#include "plans/strategies/plan.h" /* lt_step_plan */
#include "plans/batches/sampler.h" /* lt_sample */

#define LT_PLAN_DB_APPLICATION_ID 0x4C54504C /* "LTPL" */

/* The run a plan file belongs to. Strings are owned by whoever filled the struct
 * (lt_store_run_info's are freed by lt_run_info_free). */
typedef struct lt_run_info {
    char *name;          /* run.name */
    char *strategy;      /* plan.strategy */
    char *config;        /* the effective config, lt_config_dump's text */
    char *fingerprint;   /* lt_corpus_fingerprint, 64 hex digits */
    char *input;         /* the --data directory or --lengths file as given */
    char *sample_policy; /* "truncate" | "split" */
    char *tuning;        /* lt_strategies_params */
    char *version;       /* PACKAGE_VERSION of the writer */
    int64_t context_len, global_batch, seed;
    int dp, pp, tp, layers;
    double mem_cap;      /* bytes */
    uint64_t n_samples_total; /* samples of the sampler's table (one epoch) */
} lt_run_info;

void lt_run_info_free(lt_run_info *r); /* frees the strings, zeroes r */

typedef struct lt_store lt_store;

/* Start writing `path` for run `run`. When path exists it must be a plan file of the same
 * run: same config text and fingerprint; else LT_ERR_CONFIG "PATH was built from a different
 * config: [plan] seed = 99 here, 1234 in the file" (the first differing line of the two
 * config dumps; for the fingerprint, "... from different input data"), hint: another --db or
 * delete the file. Other files: lt_db_open's refusals, naming PATH. PATH is copied to the
 * temporary before the checks (the copy is deleted on refusal); an empty PATH counts as a new
 * file. A PATH in a missing directory is LT_ERR_IO naming PATH. The comparison: the values
 * (not their "; origin" comments; "256K" = "262144") of every key of [model], [parallel] and
 * [plan] but plan.steps, data.holdout and every [source.NAME] holdout, then the fingerprint, strategy, sample_policy and tuning. */
lt_status lt_store_begin(lt_store **out, const char *path, const lt_run_info *run, bool timings, lt_error *err);

/* Whether step `step` is already stored (resume skips it). */
lt_status lt_store_has_step(lt_store *st, uint64_t step, bool *has, lt_error *err);

/* Store plan p (its step must not be stored yet: LT_ERR_INTERNAL otherwise) with the step's
 * samples[0..p->n_samples) (sampler ids and sources; samples[i].length == p->lengths[i]).
 * The plan must have the run's shape (p->pp == run pp, every schedule pp stages x the run's
 * layers) and its pipelines in increasing dp_rank order: LT_ERR_INTERNAL before anything is
 * written otherwise. An op prediction the ops encoding cannot hold (a time not finite or
 * beyond 1e9 s, a byte count not finite) is LT_ERR_INPUT naming the op, also before anything
 * is written; so are a backward unit over bslices past the bslice table, an asymmetric
 * schedule with units of one pass only, and DP-Merge groups that are not by strictly
 * increasing sample, name a sample or first pipeline outside the step, or have cp < 2.
 * Units are stored with their slices in unit order, 'FB' for a symmetric schedule, 'F'
 * and 'B' for an asymmetric one, each row with its slice table position (the tables come
 * back in their order: a unit's slices must be consecutive in its table, as
 * lt_schedule_add_unit makes them), with merges as dp_merges rows. A failure while writing (I/O, or LT_ERR_INPUT for a
 * value a CHECK of the schema refuses) leaves the step half-written in a file without a
 * journal: after it only lt_store_abort is left (lt_store_commit refuses). */
lt_status lt_store_put_step(lt_store *st, const lt_step_plan *p, const lt_sample *samples, lt_error *err);

/* The named sources of the run's documents ([source.NAME]; "" = the unnamed data.input):
 * each range [doc_begin, doc_end) of a dataprep task belongs to `source` (table
 * source_ranges; docs/plans-schema.md). Written once per build; a resumed build writes
 * the same ranges again (replaced). */
typedef struct lt_store_source_range {
    uint32_t task;
    uint64_t doc_begin, doc_end;
    const char *source;
} lt_store_source_range;
lt_status lt_store_put_sources(lt_store *st, const lt_store_source_range *r, size_t n, lt_error *err);

/* The source of each sample of stored step `step`, in sample order: *src[i] indexes
 * *names (malloc'd strings, "" when no range holds the document); free each name, then
 * *names and *src. */
lt_status lt_store_sample_sources(lt_store *st, uint64_t step, char ***names, size_t *n_names, uint32_t **src,
                                  size_t *n_samples, lt_error *err);

/* The held-out documents of the run (data.holdout; plans/batches/sampler.h
 * lt_sampler_heldout), docs[0..n) in the sampler's held-out order, each a document's start
 * (offset 0, length = min(its length, context_len)): table heldout (created here when
 * missing; docs/plans-schema.md "Held-out documents"), its rows replaced, in the plans'
 * transaction. n = 0 leaves the table empty: "no held-out set" rather than "an older
 * planner". LT_ERR_INTERNAL for a document that is not a start of at least one token. */
lt_status lt_store_put_heldout(lt_store *st, const lt_sample *docs, size_t n, lt_error *err);

/* The held-out documents: *present false (and *n 0) when the file has no table heldout (a
 * plan file of a planner before data.holdout); else *docs (malloc'd, free() it; NULL when
 * *n == 0) in idx order as samples (task, doc, offset 0, length; id UINT64_MAX, corpus_doc 0).
 * LT_ERR_INPUT naming the file for rows that do not number 0, 1, ... or hold bad values. */
lt_status lt_store_heldout(lt_store *st, bool *present, lt_sample **docs, size_t *n, lt_error *err);

/* Commit, sync, rename over the target; frees st (also on error, after removing the
 * temporary file). */
lt_status lt_store_commit(lt_store *st, lt_error *err);
/* Drop everything written since lt_store_begin; removes the temporary file; NULL-safe. */
void lt_store_abort(lt_store *st);

/* ---- reading ---- */

/* Open an existing plan file read-only. LT_ERR_IO when missing, lt_db_open's refusals. */
lt_status lt_store_open(lt_store **out, const char *path, lt_error *err);
void lt_store_close(lt_store *st); /* NULL-safe */

/* The file's run (strings allocated; lt_run_info_free). */
lt_status lt_store_run_info(lt_store *st, lt_run_info *out, lt_error *err);

/* The stored step numbers in increasing order (*steps malloc'd, free() it; may be NULL when
 * *n == 0). */
lt_status lt_store_steps(lt_store *st, uint64_t **steps, size_t *n, lt_error *err);

/* How many stored steps strategy `strategy` (its name, lt_strategy_name) planned. */
lt_status lt_store_count_strategy(lt_store *st, const char *strategy, int64_t *n, lt_error *err);

/* Read step `step` back into *out (freed first) and, when samples != NULL, its samples into
 * a malloc'd array *samples[out->n_samples]. LT_ERR_INPUT when the step is not stored (hint:
 * the stored range) or its rows are inconsistent (naming the table and row; for an op list
 * that is malformed, has another length than n_ops, or names an unknown unit, kind or part:
 * the step, dp_rank, stage, op and byte). A pipeline's 'F' and 'B' rows come back as an
 * asymmetric schedule (a pipeline with both 'FB' and 'F'/'B' rows, or one of 'F' and 'B'
 * only, is LT_ERR_INPUT), a unit's cp from its rows (all equal), the slice tables at the
 * rows' slice positions (0 .. rows-1 per pass, each once, a unit's consecutive), the
 * dp_merges rows as out->merges. Samples come back with id,
 * task, doc, offset and length; corpus_doc is not stored and is 0. solve_ms is 0 when the
 * file has none (--no-timings). Each trainer rank reads its whole step this way and keeps
 * its own (dp_rank, stage): the executor orders ops and matches stage-to-stage transfers on
 * the dependency graph of the whole pipeline (plans/schedule/deps.h), which one stage's op
 * list alone does not give. */
lt_status lt_store_get_step(lt_store *st, uint64_t step, lt_step_plan *out, lt_sample **samples, lt_error *err);

/* The raw-row checks of one stored step, run by lt_store_validate before it reads the step
 * back (plans/store/checks.c; public for plans/store/validate.c and the tests): per pass,
 * the units_slices rows cover every sample's tokens exactly once on the sample's dp_rank, a
 * DP-merged sample exactly once on every dp_rank of its group with the same token ranges,
 * and no row holds tokens elsewhere; a row's cp is its sample's group cp (1 when not merged); every
 * dp_merges row names a sample of the step (idx, and sample_id as step_samples has it) on
 * its step_samples dp_rank, with cp pipelines from there; the steps row's n_samples and
 * n_tokens equal the step_samples rows' count and sum. LT_ERR_INPUT naming the table. */
lt_status lt_store_check_rows(lt_store *st, uint64_t step, lt_error *err);

/* ---- what the trainer measured (trainer train --db) ---- */

/* Record beside the plan of `step` in the plan file `path` what executing it measured: the
 * ops (n of them), the step's wall time, the peak bytes the executor held and per stage the
 * peak bytes one pipeline's stage held (n_stages of them). In one transaction on a
 * read-write connection; the tables measured_steps, measured_stages and measured_ops and
 * the view step_measured(run_id, step, measured_ms, predicted_ms, peak_bytes) are created
 * when missing (docs/plans-schema.md "What the trainer measured"); a step measured again
 * replaces its rows. LT_ERR_INPUT when the step is not stored; lt_db_open's errors. */
lt_status lt_store_put_measured(const char *path, uint64_t step, const lt_measured_op *ops, size_t n,
                                double measured_s, double peak_bytes, const size_t *stage_peak_bytes, int n_stages,
                                lt_error *err);

#endif /* LT_STORE_H */
