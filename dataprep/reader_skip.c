/*
 * dataprep/reader_skip.c — a skipped record, for every reader backend (dataprep/reader.h
 * lt_reader_skip): counted in the reader's statistics and reported through the reader's
 * on_skip. A file of its own, below the backends and dataprep/reader.c, so that the calls
 * go one way: reader.c calls the backends, the backends call this.
 */
#include "dataprep/reader.h"

#include <stdarg.h>
#include <stdio.h>

void lt_reader_skip(lt_reader_core *core, const char *where, lt_skip_reason reason, const char *fmt, ...) {
    if (reason < LT_SKIP_N_REASONS) core->stats->skipped[reason]++;
    if (core->opts->on_skip == NULL) return;
    char msg[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    core->opts->on_skip(core->opts->skip_ctx, where, reason, msg);
}
