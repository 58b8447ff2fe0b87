/*
 * lib/log.c — levelled, timestamped log lines (see log.h).
 */
#include "lib/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static lt_log_level current_level = LT_LOG_INFO;
static FILE *log_stream = NULL;
static char log_prefix[64];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const char *const level_tags[] = {"ERROR", "WARN ", "INFO ", "DEBUG"};

static const char *env_lookup(const char *name) { return getenv(name); }

static int env_nonempty(const char *(*getenv_fn)(const char *), const char *name,
                        const char **value) {
    const char *v = getenv_fn(name);
    if (v == NULL || v[0] == '\0') return 0;
    *value = v;
    return 1;
}

void lt_log_prefix_from_env(char *buf, size_t size, const char *(*getenv_fn)(const char *)) {
    const char *id = NULL, *count = NULL;
    buf[0] = '\0';
    if (size == 0) return;
    /* A Slurm array element is a task of the array. */
    if (env_nonempty(getenv_fn, "SLURM_ARRAY_TASK_ID", &id)) {
        if (env_nonempty(getenv_fn, "SLURM_ARRAY_TASK_COUNT", &count))
            snprintf(buf, size, "task %s/%s", id, count);
        else
            snprintf(buf, size, "task %s", id);
        return;
    }
    /* An MPI rank: the launcher's own variables first, then srun's. */
    static const char *const rank_vars[][2] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        {"PMIX_RANK", "SLURM_NTASKS"},
        {"PMI_RANK", "PMI_SIZE"},
    };
    for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++) {
        if (env_nonempty(getenv_fn, rank_vars[i][0], &id)) {
            if (env_nonempty(getenv_fn, rank_vars[i][1], &count))
                snprintf(buf, size, "rank %s/%s", id, count);
            else
                snprintf(buf, size, "rank %s", id);
            return;
        }
    }
    if (env_nonempty(getenv_fn, "SLURM_PROCID", &id) &&
        env_nonempty(getenv_fn, "SLURM_NTASKS", &count) && atoi(count) > 1) {
        snprintf(buf, size, "rank %s/%s", id, count);
    }
}

void lt_log_init(void) {
    lt_log_prefix_from_env(log_prefix, sizeof log_prefix, env_lookup);
    const char *env = getenv("LONGTAIL_LOG");
    lt_log_level level;
    if (env != NULL && env[0] != '\0' && lt_log_parse_level(env, &level) == LT_OK)
        current_level = level;
}

void lt_log_set_level(lt_log_level level) { current_level = level; }
lt_log_level lt_log_get_level(void) { return current_level; }
const char *lt_log_prefix(void) { return log_prefix; }
void lt_log_set_stream(FILE *out) { log_stream = out; }
int lt_log_enabled(lt_log_level level) { return level <= current_level; }

lt_status lt_log_parse_level(const char *name, lt_log_level *out) {
    for (int i = 0; i <= LT_LOG_DEBUG; i++) {
        if (name != NULL && strcasecmp(name, level_names[i]) == 0) {
            *out = (lt_log_level)i;
            return LT_OK;
        }
    }
    if (name != NULL && strcasecmp(name, "warning") == 0) {
        *out = LT_LOG_WARN;
        return LT_OK;
    }
    return LT_ERR_USAGE;
}

const char *lt_log_level_name(lt_log_level level) {
    return (level >= LT_LOG_ERROR && level <= LT_LOG_DEBUG) ? level_names[level] : "?";
}

void lt_vlog_to(FILE *stream, lt_log_level level, const char *fmt, va_list ap) {
    if (!lt_log_enabled(level)) return;
    char line[4096];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s%s%s%s: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000L, level_tags[level],
                     log_prefix[0] ? "[" : "", log_prefix, log_prefix[0] ? "] " : "",
                     lt_program());
    if (n < 0) return;
    size_t used = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    int m = vsnprintf(line + used, sizeof line - used, fmt, ap);
    if (m > 0) used += (size_t)m < sizeof line - used ? (size_t)m : sizeof line - used - 1;
    if (used >= sizeof line - 1) used = sizeof line - 2; /* truncated: keep room for '\n' */
    line[used++] = '\n';
    FILE *out = stream ? stream : (log_stream ? log_stream : stderr);
    pthread_mutex_lock(&log_lock);
    fwrite(line, 1, used, out);
    fflush(out);
    pthread_mutex_unlock(&log_lock);
}

void lt_vlog(lt_log_level level, const char *fmt, va_list ap) { lt_vlog_to(NULL, level, fmt, ap); }

void lt_log_to(FILE *out, lt_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    lt_vlog_to(out, level, fmt, ap);
    va_end(ap);
}

void lt_log(lt_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    lt_vlog(level, fmt, ap);
    va_end(ap);
}
