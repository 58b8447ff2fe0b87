/*
 * lib/log.h — levelled, timestamped log lines on stderr with a rank/task prefix.
 *
 *     2026-11-21T10:04:05.123Z INFO  [task 3/8] dataprep: wrote shard 3 (12.4 MB)
 *     2026-11-21T10:04:05.123Z WARN  [rank 1/4] trainer: loss spike at step 120
 *
 * The prefix is derived once from the environment (lt_log_init): under a Slurm array
 * `task I/N` (SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT), under MPI or a multi-task
 * srun `rank R/N` (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID with
 * SLURM_NTASKS > 1), nothing otherwise. The level comes from `--log-level`, the config's
 * run.log_level, or $LONGTAIL_LOG (error, warn, info, debug), default info.
 *
 * Thread-safety: each line is formatted into a local buffer and written with one
 * fwrite under a lock, so lines from different threads never interleave.
 */
#ifndef LT_LOG_H
#define LT_LOG_H

#include <stdarg.h>
#include <stdio.h>

#include "lib/error.h" /* lt_status */

typedef enum lt_log_level {
    LT_LOG_ERROR = 0,
    LT_LOG_WARN = 1,
    LT_LOG_INFO = 2,
    LT_LOG_DEBUG = 3,
} lt_log_level;

/* Read the prefix and $LONGTAIL_LOG from the environment. Call once at start-up. */
void lt_log_init(void);

void lt_log_set_level(lt_log_level level);
lt_log_level lt_log_get_level(void);

/* "error" | "warn" | "info" | "debug" (case-insensitive) -> level; LT_ERR_USAGE otherwise. */
lt_status lt_log_parse_level(const char *name, lt_log_level *out);
const char *lt_log_level_name(lt_log_level level);

/* Redirect output (tests); NULL restores stderr. */
void lt_log_set_stream(FILE *out);

/* The rank/task prefix in use, e.g. "task 3/8", or "" when none. */
const char *lt_log_prefix(void);

/* Compute the prefix for an environment lookup function (exposed for tests). */
void lt_log_prefix_from_env(char *buf, size_t size, const char *(*getenv_fn)(const char *));

/* Whether a message at `level` would be printed (to skip expensive formatting). */
int lt_log_enabled(lt_log_level level);

void lt_log(lt_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lt_vlog(lt_log_level level, const char *fmt, va_list ap);

/* The same line format written to `out` (NULL: the log stream). */
void lt_log_to(FILE *out, lt_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void lt_vlog_to(FILE *out, lt_log_level level, const char *fmt, va_list ap);

#define LT_ERROR(...) lt_log(LT_LOG_ERROR, __VA_ARGS__)
#define LT_WARN(...) lt_log(LT_LOG_WARN, __VA_ARGS__)
#define LT_INFO(...) lt_log(LT_LOG_INFO, __VA_ARGS__)
#define LT_DEBUG(...) \
    do { if (lt_log_enabled(LT_LOG_DEBUG)) lt_log(LT_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif /* LT_LOG_H */
