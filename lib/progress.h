/*
 * lib/progress.h — progress of long work: a bar with rate and ETA on a terminal, a
 * periodic one-line report when the output is a file (Slurm logs).
 *
 *  terminal:  tokenize [##########----------]  50.0% 5000/10000 docs  1.2k docs/s  ETA 00:00:04
 *  log file:  2026-11-21T10:04:05.123Z INFO  [task 3/8] dataprep: tokenize: 50.0% (5000/10000 docs),
 *             1.2k docs/s, 12.3 MB/s, 3.40M tokens/s, elapsed 00:00:04, ETA 00:00:04
 *
 * Progress goes to stderr (stdout carries data, e.g. `dataprep encode`), so "on a
 * terminal" means stderr is a TTY. The report interval in log mode is 30 s by default
 * ($LONGTAIL_PROGRESS_INTERVAL seconds overrides); the bar redraws at most 10 times/s.
 * Besides the main counter (with an optional total, for % and ETA) a report can carry up
 * to LT_PROGRESS_MAX_EXTRA extra counters shown as rates (bytes, tokens, ...).
 *
 * Thread-safety: lt_progress_add / lt_progress_add_extra may be called from any number
 * of threads (atomic counters; one thread at a time renders). start/finish from one.
 */
#ifndef LT_PROGRESS_H
#define LT_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#define LT_PROGRESS_MAX_EXTRA 3

typedef struct lt_progress lt_progress;

typedef struct lt_progress_options {
    FILE *out;          /* default stderr */
    int tty;            /* 1 bar, 0 log lines, -1 decide from isatty(out) (default) */
    double interval_s;  /* seconds between log lines; <= 0: default (30 or the env var) */
    double (*clock)(void *ctx); /* monotonic seconds; default CLOCK_MONOTONIC (tests inject) */
    void *clock_ctx;
    int quiet;          /* 1: count but never print (e.g. --quiet) */
} lt_progress_options;

/* Start reporting. `total` 0 = unknown (no %, no ETA). `unit` names the main counter
 * ("docs", "steps"). Returns NULL only on allocation failure (then all calls are no-ops). */
lt_progress *lt_progress_start(const char *label, uint64_t total, const char *unit);
lt_progress *lt_progress_start_opts(const char *label, uint64_t total, const char *unit,
                                    const lt_progress_options *opts);

/* Declare extra counter `index` (< LT_PROGRESS_MAX_EXTRA): shown as value/scale per second
 * with `unit`, e.g. lt_progress_extra(p, 0, "MB", 1e6) for a byte counter. */
void lt_progress_extra(lt_progress *p, int index, const char *unit, double scale);

void lt_progress_add(lt_progress *p, uint64_t n);
void lt_progress_add_extra(lt_progress *p, int index, uint64_t n);
void lt_progress_set_total(lt_progress *p, uint64_t total);

/* Current main count. */
uint64_t lt_progress_done(const lt_progress *p);

/* Print a report now if one is due (called by add; exposed for idle loops). */
void lt_progress_tick(lt_progress *p);

/* Final report (always printed unless quiet), then free. NULL-safe. */
void lt_progress_finish(lt_progress *p);

/* Helpers shared with other reports: "1.23k", "4.56M"; "01:02:03" (or "--:--:--"). */
void lt_format_si(double value, char *buf, size_t size);
void lt_format_hms(double seconds, char *buf, size_t size);

#endif /* LT_PROGRESS_H */
