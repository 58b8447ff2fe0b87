/*
 * train/io/metrics.c — OUT/metrics.jsonl (step and validation lines) and OUT/loss.svg (the
 * training and validation curves) of `trainer train --db` (train/io/metrics.h).
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

/* Append one formatted line to DIR/metrics.jsonl, flushed and synced. */
static lt_status append_line(const char *dir, const char *line, lt_error *err) {
    char *path = path_in(dir, "metrics.jsonl");
    if (!path) return lt_fail(err, LT_ERR_NOMEM, dir, "out of memory");
    FILE *f = fopen(path, "a");
    lt_status st = LT_OK;
    if (!f) {
        st = lt_fail(err, LT_ERR_IO, path, "cannot open for appending: %s", strerror(errno));
    } else {
        int w = fputs(line, f);
        if (w < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0)
            st = lt_fail(err, LT_ERR_IO, path, "cannot write: %s", strerror(errno));
        if (fclose(f) != 0 && st == LT_OK) st = lt_fail(err, LT_ERR_IO, path, "cannot close: %s", strerror(errno));
    }
    free(path);
    return st;
}

lt_status lt_metrics_append(const char *dir, const lt_metrics_row *r, lt_error *err) {
    char line[512];
    snprintf(line, sizeof line,
             "{\"step\":%" PRId64 ",\"plan_step\":%" PRIu64 ",\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,"
             "\"tokens\":%" PRId64 ",\"predicted\":%" PRId64 ",\"seconds\":%.9g,\"predicted_ms\":%.9g}\n",
             r->step, r->plan_step, r->loss, r->lr, r->grad_norm, r->tokens, r->n_predicted, r->seconds,
             r->predicted_ms);
    return append_line(dir, line, err);
}

lt_status lt_metrics_append_val(const char *dir, int64_t step, double val_loss, int64_t val_tokens, int64_t val_docs,
                                lt_error *err) {
    char line[256];
    snprintf(line, sizeof line,
             "{\"step\":%" PRId64 ",\"val_loss\":%.9g,\"val_tokens\":%" PRId64 ",\"val_docs\":%" PRId64 "}\n",
             step, val_loss, val_tokens, val_docs);
    return append_line(dir, line, err);
}

/* The lines of DIR/metrics.jsonl: *text (malloc'd; NULL when the file is missing). */
static lt_status read_lines(const char *path, char **text, lt_error *err) {
    *text = NULL;
    if (access(path, F_OK) != 0) return LT_OK;
    size_t len;
    return lt_read_file(path, text, &len, err);
}

/* step and loss of one metrics line, *val telling a validation line (val_loss) from a
 * step's (loss); false if it is neither. */
static bool parse_line(const char *line, long long *step, double *loss, bool *val) {
    if (sscanf(line, "{\"step\":%lld,", step) != 1) return false;
    const char *l = strstr(line, "\"loss\":"), *v = strstr(line, "\"val_loss\":");
    *val = !l && v;
    if (l) return sscanf(l + 7, "%lf", loss) == 1;
    return v && sscanf(v + 11, "%lf", loss) == 1;
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
        bool val;
        lineno++;
        if (!parse_line(line, &step, &loss, &val)) {
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

/* The points of one curve of the drawing. */
typedef struct curve {
    double *x, *y;
    size_t n, cap;
} curve;

static bool curve_add(curve *c, double x, double y) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        double *nx = realloc(c->x, cap * sizeof *nx);
        if (nx) c->x = nx;
        double *ny = nx ? realloc(c->y, cap * sizeof *ny) : NULL;
        if (ny) c->y = ny;
        if (!nx || !ny) return false;
        c->cap = cap;
    }
    c->x[c->n] = x, c->y[c->n] = y, c->n++;
    return true;
}

lt_status lt_metrics_svg(const char *dir, lt_error *err) {
    char *path = path_in(dir, "metrics.jsonl"), *svg_path = path_in(dir, "loss.svg"), *text = NULL;
    if (!path || !svg_path) {
        free(path), free(svg_path);
        return lt_fail(err, LT_ERR_NOMEM, dir, "out of memory");
    }
    lt_status st = read_lines(path, &text, err);
    curve c[2] = {{0}}; /* [0] training, [1] validation */
    for (char *line = text; st == LT_OK && line && *line;) {
        char *nl = strchr(line, '\n');
        long long step;
        double loss;
        bool val;
        if (parse_line(line, &step, &loss, &val) && isfinite(loss) && !curve_add(&c[val], (double)step, loss))
            st = lt_fail(err, LT_ERR_NOMEM, path, "out of memory");
        line = nl ? nl + 1 : line + strlen(line);
    }
    /* the plot: 640 x 360, margins for the axis labels; both curves on the same axes */
    const double W = 640, H = 360, ml = 60, mr = 20, mt = 20, mb = 40;
    double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    bool any = false;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < c[k].n; i++, any = true) {
            if (!any || c[k].x[i] < x0) x0 = c[k].x[i];
            if (!any || c[k].x[i] > x1) x1 = c[k].x[i];
            if (!any || c[k].y[i] < y0) y0 = c[k].y[i];
            if (!any || c[k].y[i] > y1) y1 = c[k].y[i];
        }
    if (x1 <= x0) x1 = x0 + 1;
    if (y1 <= y0) y1 = y0 + 1;
    size_t size = 4096 + (c[0].n + c[1].n) * 32;
    char *svg = st == LT_OK ? malloc(size) : NULL;
    if (st == LT_OK && !svg) st = lt_fail(err, LT_ERR_NOMEM, svg_path, "out of memory");
    if (st == LT_OK) {
        size_t u = (size_t)snprintf(
            svg, size,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%.0f\" y=\"14\">loss (mean next-token cross-entropy) per step, %zu steps</text>\n"
            "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n"
            "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n"
            "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.4g</text>\n"
            "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.4g</text>\n"
            "<text x=\"%.0f\" y=\"%.0f\">step %.0f</text>\n"
            "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">step %.0f</text>\n",
            W, H, ml, c[0].n, ml, H - mb, W - mr, H - mb, ml, mt, ml, H - mb, ml - 4, mt + 4, y1, ml - 4, H - mb, y0, ml,
            H - mb + 16, x0, W - mr, H - mb + 16, x1);
        static const char *const color[2] = {"#1f77b4", "#ff7f0e"};
        static const char *const name[2] = {"training", "validation (held-out documents)"};
        for (int k = 0; k < 2 && u < size; k++) {
            if (c[k].n == 0) continue;
            /* the legend: a line and the curve's name at the top right, one row per curve */
            double ly = mt + 8 + 16 * k;
            u += (size_t)snprintf(svg + u, size - u,
                                  "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
                                  "stroke-width=\"2\"/>\n<text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                                  W - mr - 230, ly, W - mr - 210, ly, color[k], W - mr - 205, ly + 4, name[k]);
            if (u < size)
                u += (size_t)snprintf(svg + u, size - u,
                                      "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" class=\"%s\" "
                                      "points=\"",
                                      color[k], k ? "validation" : "training");
            for (size_t i = 0; i < c[k].n && u < size; i++)
                u += (size_t)snprintf(svg + u, size - u, "%s%.1f,%.1f", i ? " " : "",
                                      ml + (c[k].x[i] - x0) / (x1 - x0) * (W - ml - mr),
                                      H - mb - (c[k].y[i] - y0) / (y1 - y0) * (H - mt - mb));
            if (u < size) u += (size_t)snprintf(svg + u, size - u, "\"/>\n");
        }
        if (u < size) u += (size_t)snprintf(svg + u, size - u, "</svg>\n");
        if (u >= size) st = lt_fail(err, LT_ERR_INTERNAL, svg_path, "the drawing outgrew its buffer");
        else st = lt_write_file_atomic(svg_path, svg, u, err);
    }
    for (int k = 0; k < 2; k++) free(c[k].x), free(c[k].y);
    free(svg), free(text), free(path), free(svg_path);
    return st;
}
