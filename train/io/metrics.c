/*
 * train/io/metrics.c — OUT/metrics.jsonl and OUT/loss.svg of `trainer train --db`
 * (train/io/metrics.h).
 */
#include "train/io/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/files.h" /* lt_read_file, lt_write_file_atomic */

static char *path_in(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

lt_status lt_metrics_append(const char *dir, const lt_metrics_row *r, lt_error *err) {
    char *path = path_in(dir, "metrics.jsonl");
    if (!path) return lt_fail(err, LT_ERR_NOMEM, dir, "out of memory");
    FILE *f = fopen(path, "a");
    lt_status st = LT_OK;
    if (!f) {
        st = lt_fail(err, LT_ERR_IO, path, "cannot open for appending: %s", strerror(errno));
    } else {
        int w = fprintf(f,
                        "{\"step\":%" PRId64 ",\"plan_step\":%" PRIu64 ",\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,"
                        "\"tokens\":%" PRId64 ",\"predicted\":%" PRId64 ",\"seconds\":%.9g,\"predicted_ms\":%.9g}\n",
                        r->step, r->plan_step, r->loss, r->lr, r->grad_norm, r->tokens, r->n_predicted, r->seconds,
                        r->predicted_ms);
        if (w < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0)
            st = lt_fail(err, LT_ERR_IO, path, "cannot write: %s", strerror(errno));
        if (fclose(f) != 0 && st == LT_OK) st = lt_fail(err, LT_ERR_IO, path, "cannot close: %s", strerror(errno));
    }
    free(path);
    return st;
}

/* The lines of DIR/metrics.jsonl: *text (malloc'd; NULL when the file is missing). */
static lt_status read_lines(const char *path, char **text, lt_error *err) {
    *text = NULL;
    if (access(path, F_OK) != 0) return LT_OK;
    size_t len;
    return lt_read_file(path, text, &len, err);
}

/* step and loss of one metrics line; false if it is not one. */
static bool parse_line(const char *line, long long *step, double *loss) {
    const char *l = strstr(line, "\"loss\":");
    return sscanf(line, "{\"step\":%lld,", step) == 1 && l && sscanf(l + 7, "%lf", loss) == 1;
}

lt_status lt_metrics_trim(const char *dir, int64_t max_step, lt_error *err) {
    char *path = path_in(dir, "metrics.jsonl"), *text = NULL;
    if (!path) return lt_fail(err, LT_ERR_NOMEM, dir, "out of memory");
    lt_status st = read_lines(path, &text, err);
    char *out = text ? malloc(strlen(text) + 1) : NULL;
    if (st == LT_OK && text && !out) st = lt_fail(err, LT_ERR_NOMEM, path, "out of memory");
    size_t used = 0, lineno = 0;
    for (char *line = text; st == LT_OK && line && *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) + 1 : strlen(line);
        long long step;
        double loss;
        lineno++;
        if (!parse_line(line, &step, &loss)) {
            st = lt_fail(err, LT_ERR_INPUT, path, "line %zu is not a metrics line", lineno);
            break;
        }
        if (step <= max_step) memcpy(out + used, line, n), used += n;
        line += n;
    }
    if (st == LT_OK && text) st = lt_write_file_atomic(path, out, used, err);
    free(out), free(text), free(path);
    return st;
}

lt_status lt_metrics_svg(const char *dir, lt_error *err) {
    char *path = path_in(dir, "metrics.jsonl"), *svg_path = path_in(dir, "loss.svg"), *text = NULL;
    if (!path || !svg_path) {
        free(path), free(svg_path);
        return lt_fail(err, LT_ERR_NOMEM, dir, "out of memory");
    }
    lt_status st = read_lines(path, &text, err);
    size_t n = 0, cap = 0;
    double *xs = NULL, *ys = NULL;
    for (char *line = text; st == LT_OK && line && *line;) {
        char *nl = strchr(line, '\n');
        long long step;
        double loss;
        if (parse_line(line, &step, &loss) && isfinite(loss)) {
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                double *nx = realloc(xs, cap * sizeof *xs), *ny = nx ? realloc(ys, cap * sizeof *ys) : NULL;
                if (nx) xs = nx;
                if (ny) ys = ny;
                if (!nx || !ny) st = lt_fail(err, LT_ERR_NOMEM, path, "out of memory");
            }
            if (st == LT_OK) xs[n] = (double)step, ys[n] = loss, n++;
        }
        line = nl ? nl + 1 : line + strlen(line);
    }
    /* the plot: 640 x 360, margins for the axis labels */
    const double W = 640, H = 360, ml = 60, mr = 20, mt = 20, mb = 40;
    double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || xs[i] < x0) x0 = xs[i];
        if (i == 0 || xs[i] > x1) x1 = xs[i];
        if (i == 0 || ys[i] < y0) y0 = ys[i];
        if (i == 0 || ys[i] > y1) y1 = ys[i];
    }
    if (x1 <= x0) x1 = x0 + 1;
    if (y1 <= y0) y1 = y0 + 1;
    size_t size = 2048 + n * 32;
    char *svg = st == LT_OK ? malloc(size) : NULL;
    if (st == LT_OK && !svg) st = lt_fail(err, LT_ERR_NOMEM, svg_path, "out of memory");
    if (st == LT_OK) {
        size_t u = (size_t)snprintf(
            svg, size,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%.0f\" y=\"14\">training loss (mean next-token cross-entropy) per step, %zu steps</text>\n"
            "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n"
            "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n"
            "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.4g</text>\n"
            "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.4g</text>\n"
            "<text x=\"%.0f\" y=\"%.0f\">step %.0f</text>\n"
            "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">step %.0f</text>\n<polyline fill=\"none\" "
            "stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"",
            W, H, ml, n, ml, H - mb, W - mr, H - mb, ml, mt, ml, H - mb, ml - 4, mt + 4, y1, ml - 4, H - mb, y0, ml,
            H - mb + 16, x0, W - mr, H - mb + 16, x1);
        for (size_t i = 0; i < n && u < size; i++)
            u += (size_t)snprintf(svg + u, size - u, "%s%.1f,%.1f", i ? " " : "",
                                  ml + (xs[i] - x0) / (x1 - x0) * (W - ml - mr),
                                  H - mb - (ys[i] - y0) / (y1 - y0) * (H - mt - mb));
        if (u < size) u += (size_t)snprintf(svg + u, size - u, "\"/>\n</svg>\n");
        if (u >= size) st = lt_fail(err, LT_ERR_INTERNAL, svg_path, "the drawing outgrew its buffer");
        else st = lt_write_file_atomic(svg_path, svg, u, err);
    }
    free(svg), free(xs), free(ys), free(text), free(path), free(svg_path);
    return st;
}
