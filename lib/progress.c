/*
 * lib/progress.c — progress bar / periodic progress log lines (see progress.h).
 */
#include "lib/progress.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/error.h"
#include "lib/log.h"

#define BAR_WIDTH 24
#define TTY_INTERVAL_S 0.1
#define DEFAULT_LOG_INTERVAL_S 30.0

struct lt_progress {
    char label[64];
    char unit[16];
    _Atomic uint64_t done;
    _Atomic uint64_t total;
    _Atomic uint64_t extra[LT_PROGRESS_MAX_EXTRA];
    char extra_unit[LT_PROGRESS_MAX_EXTRA][16];
    double extra_scale[LT_PROGRESS_MAX_EXTRA];
    atomic_flag rendering;
    FILE *out;
    int tty;
    int quiet;
    double interval_s;
    double (*clock)(void *ctx);
    void *clock_ctx;
    double start_s;
    _Atomic double next_report_s; /* written only by the rendering thread */
};

static double monotonic_seconds(void *ctx) {
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void lt_format_si(double value, char *buf, size_t size) {
    /* three significant digits with an SI suffix: 5.00, 25.0, 999, 1.23k, 45.6M */
    static const char suffix[] = {'\0', 'k', 'M', 'G', 'T', 'P'};
    int i = 0;
    while (fabs(value) >= 999.5 && i < (int)sizeof suffix - 1) {
        value /= 1000.0;
        i++;
    }
    int decimals = fabs(value) < 9.995 ? 2 : (fabs(value) < 99.95 ? 1 : 0);
    if (i == 0)
        snprintf(buf, size, "%.*f", decimals, value);
    else
        snprintf(buf, size, "%.*f%c", decimals, value, suffix[i]);
}

void lt_format_hms(double seconds, char *buf, size_t size) {
    if (!(seconds >= 0) || seconds > 99.0 * 3600 * 24) { /* NaN, negative or absurd */
        snprintf(buf, size, "--:--:--");
        return;
    }
    unsigned long s = (unsigned long)(seconds + 0.5);
    snprintf(buf, size, "%02lu:%02lu:%02lu", s / 3600, (s / 60) % 60, s % 60);
}

lt_progress *lt_progress_start_opts(const char *label, uint64_t total, const char *unit,
                                    const lt_progress_options *opts) {
    lt_progress *p = calloc(1, sizeof *p);
    if (p == NULL) return NULL;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "progress");
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "items");
    atomic_init(&p->done, 0);
    atomic_init(&p->total, total);
    for (int i = 0; i < LT_PROGRESS_MAX_EXTRA; i++) atomic_init(&p->extra[i], 0);
    atomic_flag_clear(&p->rendering);
    p->out = (opts && opts->out) ? opts->out : stderr;
    p->tty = (opts && opts->tty >= 0) ? opts->tty : isatty(fileno(p->out));
    p->quiet = opts ? opts->quiet : 0;
    p->clock = (opts && opts->clock) ? opts->clock : monotonic_seconds;
    p->clock_ctx = opts ? opts->clock_ctx : NULL;
    double interval = opts ? opts->interval_s : 0;
    if (interval <= 0) {
        const char *env = getenv("LONGTAIL_PROGRESS_INTERVAL");
        interval = env ? atof(env) : 0;
        if (interval <= 0) interval = DEFAULT_LOG_INTERVAL_S;
    }
    p->interval_s = p->tty ? TTY_INTERVAL_S : interval;
    p->start_s = p->clock(p->clock_ctx);
    atomic_init(&p->next_report_s, p->start_s + p->interval_s);
    return p;
}

lt_progress *lt_progress_start(const char *label, uint64_t total, const char *unit) {
    lt_progress_options opts = {.tty = -1};
    return lt_progress_start_opts(label, total, unit, &opts);
}

void lt_progress_extra(lt_progress *p, int index, const char *unit, double scale) {
    if (p == NULL || index < 0 || index >= LT_PROGRESS_MAX_EXTRA) return;
    snprintf(p->extra_unit[index], sizeof p->extra_unit[index], "%s", unit ? unit : "");
    p->extra_scale[index] = scale > 0 ? scale : 1.0;
}

uint64_t lt_progress_done(const lt_progress *p) {
    return p ? atomic_load(&((lt_progress *)p)->done) : 0;
}

void lt_progress_set_total(lt_progress *p, uint64_t total) {
    if (p) atomic_store(&p->total, total);
}

/* Append printf-style text to buf (size > 0), truncating at the end of buf. */
static void appendf(char *buf, size_t size, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void appendf(char *buf, size_t size, size_t *used, const char *fmt, ...) {
    if (*used + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, size - *used, fmt, ap);
    va_end(ap);
    if (n > 0) *used += (size_t)n < size - *used ? (size_t)n : size - *used - 1;
}

/* The extra counters as rates, each preceded by `sep`: "  5.00 MB/s  1.20M tokens/s". */
static void append_extra_rates(lt_progress *p, double elapsed, const char *sep, char *buf,
                               size_t size, size_t *used) {
    for (int i = 0; i < LT_PROGRESS_MAX_EXTRA; i++) {
        if (p->extra_unit[i][0] == '\0') continue;
        double value = (double)atomic_load(&p->extra[i]) / p->extra_scale[i];
        char rate[32];
        lt_format_si(elapsed > 0 ? value / elapsed : 0, rate, sizeof rate);
        appendf(buf, size, used, "%s%s %s/s", sep, rate, p->extra_unit[i]);
    }
}

/* Format the report body (everything after the label) into buf. */
static void render(lt_progress *p, double now, int final, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    uint64_t done = atomic_load(&p->done), total = atomic_load(&p->total);
    double elapsed = now - p->start_s;
    double rate = elapsed > 0 ? (double)done / elapsed : 0;
    char rate_s[32], done_s[32], total_s[32], el_s[16], eta_s[16];
    lt_format_si(rate, rate_s, sizeof rate_s);
    snprintf(done_s, sizeof done_s, "%llu", (unsigned long long)done);
    snprintf(total_s, sizeof total_s, "%llu", (unsigned long long)total);
    lt_format_hms(elapsed, el_s, sizeof el_s);
    double eta = (total > 0 && rate > 0 && done <= total) ? (double)(total - done) / rate : NAN;
    lt_format_hms(eta, eta_s, sizeof eta_s);
    double frac = total > 0 ? (double)done / (double)total : 0;
    if (frac > 1) frac = 1;
    if (p->tty) {
        if (total > 0) {
            char bar[BAR_WIDTH + 1];
            int filled = (int)(frac * BAR_WIDTH);
            for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '#' : '-';
            bar[BAR_WIDTH] = '\0';
            appendf(buf, size, &used, "[%s] %5.1f%% %s/%s %s", bar, 100 * frac, done_s, total_s, p->unit);
        } else {
            appendf(buf, size, &used, "%s %s", done_s, p->unit);
        }
        appendf(buf, size, &used, "  %s %s/s", rate_s, p->unit);
        append_extra_rates(p, elapsed, "  ", buf, size, &used);
        if (final)
            appendf(buf, size, &used, "  in %s", el_s);
        else if (total > 0)
            appendf(buf, size, &used, "  ETA %s", eta_s);
    } else {
        if (total > 0)
            appendf(buf, size, &used, "%.1f%% (%s/%s %s), ", 100 * frac, done_s, total_s, p->unit);
        else
            appendf(buf, size, &used, "%s %s, ", done_s, p->unit);
        appendf(buf, size, &used, "%s %s/s", rate_s, p->unit);
        append_extra_rates(p, elapsed, ", ", buf, size, &used);
        appendf(buf, size, &used, ", elapsed %s", el_s);
        if (final)
            appendf(buf, size, &used, ", done");
        else if (total > 0)
            appendf(buf, size, &used, ", ETA %s", eta_s);
    }
}

static void report(lt_progress *p, double now, int final) {
    char body[512];
    render(p, now, final, body, sizeof body);
    if (p->tty) {
        /* \r + clear to end of line: the bar redraws in place */
        fprintf(p->out, "\r%s %s\033[K%s", p->label, body, final ? "\n" : "");
        fflush(p->out);
    } else {
        lt_log_to(p->out == stderr ? NULL : p->out, LT_LOG_INFO, "%s: %s", p->label, body);
    }
}

void lt_progress_tick(lt_progress *p) {
    if (p == NULL || p->quiet) return;
    double now = p->clock(p->clock_ctx);
    if (now < atomic_load(&p->next_report_s)) return;
    if (atomic_flag_test_and_set(&p->rendering)) return; /* another thread is reporting */
    if (now >= atomic_load(&p->next_report_s)) {
        report(p, now, 0);
        atomic_store(&p->next_report_s, now + p->interval_s);
    }
    atomic_flag_clear(&p->rendering);
}

void lt_progress_add(lt_progress *p, uint64_t n) {
    if (p == NULL) return;
    atomic_fetch_add(&p->done, n);
    lt_progress_tick(p);
}

void lt_progress_add_extra(lt_progress *p, int index, uint64_t n) {
    if (p == NULL || index < 0 || index >= LT_PROGRESS_MAX_EXTRA) return;
    atomic_fetch_add(&p->extra[index], n);
}

void lt_progress_finish(lt_progress *p) {
    if (p == NULL) return;
    if (!p->quiet) report(p, p->clock(p->clock_ctx), 1);
    free(p);
}
