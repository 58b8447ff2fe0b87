/*
 * dataprep/profile.c — length buckets, shares and statistics of a corpus, and their table,
 * JSON and SVG renderings (dataprep/profile.h).
 */
#include "dataprep/profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ buckets */

static const char *const bucket_labels[LT_PROFILE_N_BUCKETS] = {
    "<1K", "1K-2K", "2K-4K", "4K-8K", "8K-16K", "16K-32K", "32K-64K", "64K-128K", "128K-256K", ">=256K",
};

/* Bucket 0 ends below 2^10; bucket i (1..8) is [2^(9+i), 2^(10+i)); the last starts at 2^18. */
#define FIRST_BOUND_LOG2 10

size_t lt_profile_bucket_of(uint64_t length) {
    if (length < ((uint64_t)1 << FIRST_BOUND_LOG2)) return 0;
    size_t floor_log2 = (size_t)(63 - __builtin_clzll(length)); /* length >= 1024: >= 10 */
    size_t i = floor_log2 - (FIRST_BOUND_LOG2 - 1);
    return i < LT_PROFILE_N_BUCKETS ? i : LT_PROFILE_N_BUCKETS - 1;
}

uint64_t lt_profile_bucket_min(size_t i) { return i == 0 ? 0 : (uint64_t)1 << (FIRST_BOUND_LOG2 - 1 + i); }

uint64_t lt_profile_bucket_max(size_t i) {
    return i + 1 == LT_PROFILE_N_BUCKETS ? UINT64_MAX : ((uint64_t)1 << (FIRST_BOUND_LOG2 + i)) - 1;
}

const char *lt_profile_bucket_label(size_t i) { return i < LT_PROFILE_N_BUCKETS ? bucket_labels[i] : "?"; }

/* ================================================================ compute */

/* Neumaier's compensated sum: FLOPs of millions of documents spanning 10 orders of
 * magnitude, added without losing the small ones. */
typedef struct {
    double sum, comp;
} comp_sum;

static void comp_add(comp_sum *k, double x) {
    double t = k->sum + x;
    if (fabs(k->sum) >= fabs(x))
        k->comp += (k->sum - t) + x;
    else
        k->comp += (x - t) + k->sum;
    k->sum = t;
}

static double comp_value(const comp_sum *k) { return k->sum + k->comp; }

static uint64_t xorshift64(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/*
 * Quickselect with a random pivot and a three-way partition (long runs of equal lengths
 * are common): returns the k-th smallest of a[lo..hi), where a[lo..hi) holds exactly the
 * ranks lo..hi-1 of the whole array. Afterwards a[k+1..hi) >= a[k], so the next larger
 * rank can be selected in [k+1, hi).
 */
static uint64_t select_rank(uint64_t *a, size_t lo, size_t hi, size_t k, uint64_t *rng) {
    for (;;) {
        if (hi - lo <= 1) return a[k];
        uint64_t pivot = a[lo + (size_t)(xorshift64(rng) % (hi - lo))];
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            uint64_t v = a[i];
            if (v < pivot) {
                a[i++] = a[lt];
                a[lt++] = v;
            } else if (v > pivot) {
                a[i] = a[--gt];
                a[gt] = v;
            } else {
                i++;
            }
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return pivot;
    }
}

/* 0-based index of the nearest-rank p-th percentile of n >= 1 values: ceil(p n / 100) - 1,
 * computed without overflowing p * n. */
static size_t nearest_rank(size_t n, unsigned p) {
    size_t q = n / 100, r = n % 100;
    return q * p + (r * p + 99) / 100 - 1;
}

static lt_status compute_stats(const uint64_t *lengths, size_t n, lt_profile *out, lt_error *err) {
    uint64_t *a = malloc(n * sizeof *a);
    if (a == NULL)
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory copying %zu document lengths for the percentiles", n);
    memcpy(a, lengths, n * sizeof *a);

    /* the ranks wanted, ascending (equal for small n): lower middle, upper middle, p90,
     * p99; each is selected in the part above the previous one */
    const size_t want[4] = {(n - 1) / 2, n / 2, nearest_rank(n, 90), nearest_rank(n, 99)};
    uint64_t got[4];
    uint64_t rng = 0x9E3779B97F4A7C15u;
    size_t lo = 0;
    for (size_t i = 0; i < 4; i++) {
        LT_CHECK(i == 0 || want[i] >= want[i - 1]);
        if (i > 0 && want[i] == want[i - 1])
            got[i] = got[i - 1];
        else
            got[i] = select_rank(a, lo, n, want[i], &rng);
        lo = want[i] + 1;
    }
    free(a);
    out->median = ((double)got[0] + (double)got[1]) / 2.0;
    out->p90 = got[2];
    out->p99 = got[3];
    return LT_OK;
}

lt_status lt_profile_compute(const uint64_t *lengths, size_t n, const lt_model_shape *m, lt_profile *out,
                             lt_error *err) {
    if (out == NULL || m == NULL || (lengths == NULL && n > 0))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "lt_profile_compute: NULL argument");
    memset(out, 0, sizeof *out);
    lt_status st = lt_model_validate(m, err);
    if (st != LT_OK) return st;

    snprintf(out->model, sizeof out->model, "%s", m->name != NULL && m->name[0] != '\0' ? m->name : "custom");
    out->shape = *m;
    for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++) {
        out->buckets[b].label = bucket_labels[b];
        out->buckets[b].min_tokens = lt_profile_bucket_min(b);
        out->buckets[b].max_tokens = lt_profile_bucket_max(b);
    }

    comp_sum flops[LT_PROFILE_N_BUCKETS];
    memset(flops, 0, sizeof flops);
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t len = lengths[i];
        lt_profile_bucket *bk = &out->buckets[lt_profile_bucket_of(len)];
        if (out->tokens > UINT64_MAX - len)
            return lt_fail(err, LT_ERR_INPUT, NULL,
                           "total token count overflows 64 bits at document %zu (length %llu)", i,
                           (unsigned long long)len);
        out->tokens += len;
        bk->documents++;
        bk->tokens += len;
        comp_add(&flops[bk - out->buckets], lt_model_forward_flops(m, (double)len));
        if (len > max) max = len;
    }
    out->documents = n;
    out->max = max;

    double total_flops = 0;
    for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++) {
        out->buckets[b].flops = comp_value(&flops[b]);
        total_flops += out->buckets[b].flops;
    }
    out->flops = total_flops;
    for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++) {
        lt_profile_bucket *bk = &out->buckets[b];
        bk->pct_documents = n > 0 ? 100.0 * (double)bk->documents / (double)n : 0.0;
        bk->pct_tokens = out->tokens > 0 ? 100.0 * (double)bk->tokens / (double)out->tokens : 0.0;
        bk->pct_flops = total_flops > 0 ? 100.0 * bk->flops / total_flops : 0.0;
    }
    if (n == 0) return LT_OK;
    out->mean = (double)out->tokens / (double)n;
    return compute_stats(lengths, n, out, err);
}

/* ================================================================ number text */

/* v with thousands separators: 1234567 -> "1,234,567". buf: at least 27 bytes. */
static const char *fmt_grouped(char *buf, size_t size, uint64_t v) {
    char digits[24];
    int nd = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
    size_t o = 0;
    for (int i = 0; i < nd && o + 1 < size; i++) {
        if (i > 0 && (nd - i) % 3 == 0 && o + 2 < size) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

/* Fixed-point text with '.' whatever the locale (SVG attributes): |v| < 9e12 / 10^decimals. */
static const char *fmt_fixed(char *buf, size_t size, double v, int decimals) {
    long long scale = 1;
    for (int i = 0; i < decimals; i++) scale *= 10;
    long long q = llround(fabs(v) * (double)scale);
    const char *sign = v < 0 && q != 0 ? "-" : "";
    if (decimals == 0)
        snprintf(buf, size, "%s%lld", sign, q);
    else
        snprintf(buf, size, "%s%lld.%0*lld", sign, q / scale, decimals, q % scale);
    return buf;
}

/* ================================================================ table */

void lt_profile_print_table(const lt_profile *p, FILE *out) {
    char d[32], t[32];
    if (p->documents == 0) {
        fprintf(out, "length profile (model %s): no documents\n", p->model);
        return;
    }
    fprintf(out, "length profile (model %s): %s documents, %s tokens, %.3e forward FLOPs\n", p->model,
            fmt_grouped(d, sizeof d, p->documents), fmt_grouped(t, sizeof t, p->tokens), p->flops);
    fprintf(out, "%-10s %15s %8s %19s %8s %11s %8s\n", "bucket", "documents", "%docs", "tokens", "%tokens",
            "fwd FLOPs", "%FLOPs");
    for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++) {
        const lt_profile_bucket *bk = &p->buckets[b];
        fprintf(out, "%-10s %15s %7.2f%% %19s %7.2f%% %11.3e %7.2f%%\n", bk->label,
                fmt_grouped(d, sizeof d, bk->documents), bk->pct_documents, fmt_grouped(t, sizeof t, bk->tokens),
                bk->pct_tokens, bk->flops, bk->pct_flops);
    }
    fprintf(out, "%-10s %15s %7.2f%% %19s %7.2f%% %11.3e %7.2f%%\n", "total", fmt_grouped(d, sizeof d, p->documents),
            100.0, fmt_grouped(t, sizeof t, p->tokens), 100.0, p->flops, 100.0);
    fprintf(out, "length (tokens): mean %.1f, median %.1f, p90 %llu, p99 %llu, max %llu\n", p->mean, p->median,
            (unsigned long long)p->p90, (unsigned long long)p->p99, (unsigned long long)p->max);
}

/* ================================================================ JSON */

void lt_profile_json(const lt_profile *p, lt_json *j) { lt_profile_json_sources(p, NULL, NULL, 0, j); }

void lt_profile_json_sources(const lt_profile *p, const lt_profile *src, const char *const *names, size_t n_src,
                             lt_json *j) {
    lt_json_object_begin(j);
    lt_json_key(j, "model");
    lt_json_string(j, p->model);
    lt_json_key(j, "documents");
    lt_json_uint(j, p->documents);
    lt_json_key(j, "tokens");
    lt_json_uint(j, p->tokens);
    lt_json_key(j, "flops");
    lt_json_double(j, p->flops);
    lt_json_key(j, "buckets");
    lt_json_array_begin(j);
    for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++) {
        const lt_profile_bucket *bk = &p->buckets[b];
        lt_json_object_begin(j);
        lt_json_key(j, "label");
        lt_json_string(j, bk->label);
        lt_json_key(j, "min_tokens");
        lt_json_uint(j, bk->min_tokens);
        lt_json_key(j, "max_tokens");
        if (bk->max_tokens == UINT64_MAX)
            lt_json_null(j);
        else
            lt_json_uint(j, bk->max_tokens);
        lt_json_key(j, "documents");
        lt_json_uint(j, bk->documents);
        lt_json_key(j, "tokens");
        lt_json_uint(j, bk->tokens);
        lt_json_key(j, "flops");
        lt_json_double(j, bk->flops);
        lt_json_key(j, "pct_documents");
        lt_json_double(j, bk->pct_documents);
        lt_json_key(j, "pct_tokens");
        lt_json_double(j, bk->pct_tokens);
        lt_json_key(j, "pct_flops");
        lt_json_double(j, bk->pct_flops);
        lt_json_object_end(j);
    }
    lt_json_array_end(j);
    lt_json_key(j, "stats");
    lt_json_object_begin(j);
    if (p->documents == 0) {
        static const char *const stat_names[] = {"mean", "median", "p90", "p99", "max"};
        for (size_t i = 0; i < sizeof stat_names / sizeof stat_names[0]; i++) {
            lt_json_key(j, stat_names[i]);
            lt_json_null(j);
        }
    } else {
        lt_json_key(j, "mean");
        lt_json_double(j, p->mean);
        lt_json_key(j, "median");
        lt_json_double(j, p->median);
        lt_json_key(j, "p90");
        lt_json_uint(j, p->p90);
        lt_json_key(j, "p99");
        lt_json_uint(j, p->p99);
        lt_json_key(j, "max");
        lt_json_uint(j, p->max);
    }
    lt_json_object_end(j);
    if (n_src > 0) {
        lt_json_key(j, "sources");
        lt_json_array_begin(j);
        for (size_t i = 0; i < n_src; i++) {
            lt_json_object_begin(j);
            lt_json_key(j, "name");
            lt_json_string(j, names[i]);
            lt_json_key(j, "profile");
            lt_profile_json(&src[i], j);
            lt_json_object_end(j);
        }
        lt_json_array_end(j);
    }
    lt_json_object_end(j);
}

void lt_profile_print_sources(const lt_profile *all, const lt_profile *src, const char *const *names, size_t n_src,
                              FILE *out) {
    char d[32], t[32];
    fprintf(out, "by source:\n%-16s %15s %8s %19s %8s %11s %8s %10s %10s\n", "source", "documents", "%docs", "tokens",
            "%tokens", "fwd FLOPs", "%FLOPs", "mean", "p99");
    for (size_t i = 0; i < n_src; i++) {
        const lt_profile *p = &src[i];
        fprintf(out, "%-16.16s %15s %7.2f%% %19s %7.2f%% %11.3e %7.2f%% %10.1f %10llu\n",
                names[i][0] ? names[i] : "(data.input)", fmt_grouped(d, sizeof d, p->documents),
                all->documents ? 100.0 * (double)p->documents / (double)all->documents : 0,
                fmt_grouped(t, sizeof t, p->tokens), all->tokens ? 100.0 * (double)p->tokens / (double)all->tokens : 0,
                p->flops, all->flops > 0 ? 100.0 * p->flops / all->flops : 0, p->mean, (unsigned long long)p->p99);
    }
}

/* ================================================================ SVG */

/* Write s as XML character data / attribute text: & < > " ' escaped; ill-formed UTF-8 and
 * code points XML 1.0 forbids (controls other than TAB LF CR, U+FFFE, U+FFFF) as U+FFFD. */
static void xml_text(FILE *out, const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        int32_t cp;
        size_t k = lt_utf8_next(s, n, &cp);
        if (cp == LT_UTF8_INVALID || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0xFFFE ||
            cp == 0xFFFF)
            fputs("\xef\xbf\xbd", out);
        else if (cp == '&')
            fputs("&amp;", out);
        else if (cp == '<')
            fputs("&lt;", out);
        else if (cp == '>')
            fputs("&gt;", out);
        else if (cp == '"')
            fputs("&quot;", out);
        else if (cp == '\'')
            fputs("&apos;", out);
        else
            fwrite(s, 1, k, out);
        s += k;
        n -= k;
    }
}

/* Layout (pixels). The plot area spans [PLOT_X0, PLOT_X1] x [PLOT_YT, PLOT_YB]. */
#define SVG_W 900
#define SVG_H 520
#define SRC_ROW_H 36 /* the by-source panel: pixels per source */
#define PLOT_X0 90.0
#define PLOT_X1 880.0
#define PLOT_YT 90.0
#define PLOT_YB 430.0
#define LOG_MIN (-2.0) /* 0.01% */
#define LOG_MAX 2.0    /* 100% */
#define STUB_PX 2.0    /* a non-zero share below 0.01% */

static double y_of_pct(double pct) {
    double l = log10(pct);
    if (l > LOG_MAX) l = LOG_MAX;
    return PLOT_YB - (l - LOG_MIN) / (LOG_MAX - LOG_MIN) * (PLOT_YB - PLOT_YT);
}

static const struct {
    const char *metric, *legend, *noun, *color;
} svg_series[3] = {
    {"documents", "% of documents", "documents", "#4c78a8"},
    {"tokens", "% of tokens", "tokens", "#f58518"},
    {"flops", "% of forward FLOPs", "forward FLOPs", "#54a24b"},
};

static void svg_bar(FILE *out, const lt_profile_bucket *bk, size_t b, size_t s, double pct, const char *count) {
    double group_w = (PLOT_X1 - PLOT_X0) / LT_PROFILE_N_BUCKETS;
    double bar_w = group_w * 0.25, pad = (group_w - 3 * bar_w) / 2;
    double x = PLOT_X0 + (double)b * group_w + pad + (double)s * bar_w;
    double y = pct >= 0.01 ? y_of_pct(pct) : PLOT_YB - STUB_PX;
    char xs[48], ys[48], ws[48], hs[48], ps[48], pt[48];
    fprintf(out, "<rect class=\"bar\" data-metric=\"%s\" data-bucket=\"", svg_series[s].metric);
    xml_text(out, bk->label);
    fprintf(out, "\" data-pct=\"%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"%s\"><title>",
            fmt_fixed(ps, sizeof ps, pct, 6), fmt_fixed(xs, sizeof xs, x, 2), fmt_fixed(ys, sizeof ys, y, 2),
            fmt_fixed(ws, sizeof ws, bar_w - 1, 2), fmt_fixed(hs, sizeof hs, PLOT_YB - y, 2), svg_series[s].color);
    xml_text(out, bk->label);
    fprintf(out, ": %s%% of %s (%s)</title></rect>\n", fmt_fixed(pt, sizeof pt, pct, pct < 0.1 ? 4 : 2),
            svg_series[s].noun, count);
}

lt_status lt_profile_svg(const lt_profile *p, const char *title, FILE *out, lt_error *err) {
    return lt_profile_svg_sources(p, NULL, NULL, 0, title, out, err);
}

/* The "by source" panel below the chart: a row per source, three horizontal bars (% of the
 * documents, tokens and forward FLOPs of the whole corpus) on a linear 0..100 % axis. */
static void svg_sources(FILE *out, const lt_profile *all, const lt_profile *src, const char *const *names, size_t n,
                        double y0) {
    char a[48], b2[48], c[48], hb[48];
    fprintf(out, "<text x=\"%d\" y=\"%s\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">"
                 "by source: share of the corpus (%%)</text>\n",
            SVG_W / 2, fmt_fixed(a, sizeof a, y0, 1));
    const double x0 = 170.0, x1 = PLOT_X1, row = SRC_ROW_H;
    for (int k = 0; k <= 4; k++) { /* gridlines at 0, 25, ..., 100 % */
        double x = x0 + (x1 - x0) * k / 4.0;
        fprintf(out, "<line x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\" stroke=\"#dddddd\"/>",
                fmt_fixed(a, sizeof a, x, 1), fmt_fixed(b2, sizeof b2, x, 1), fmt_fixed(c, 24, y0 + 12, 1),
                fmt_fixed(c + 24, sizeof c - 24, y0 + 16 + row * (double)n, 1));
        fprintf(out, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\">%d%%</text>\n", fmt_fixed(a, sizeof a, x, 1),
                fmt_fixed(b2, sizeof b2, y0 + 30 + row * (double)n, 1), 25 * k);
    }
    for (size_t i = 0; i < n; i++) {
        double y = y0 + 16 + row * (double)i;
        fprintf(out, "<text x=\"%s\" y=\"%s\" text-anchor=\"end\" dominant-baseline=\"middle\">",
                fmt_fixed(a, sizeof a, x0 - 8, 1), fmt_fixed(b2, sizeof b2, y + row / 2, 1));
        xml_text(out, names[i][0] ? names[i] : "(data.input)");
        fputs("</text>\n", out);
        double share[3] = {all->documents ? 100.0 * (double)src[i].documents / (double)all->documents : 0,
                           all->tokens ? 100.0 * (double)src[i].tokens / (double)all->tokens : 0,
                           all->flops > 0 ? 100.0 * src[i].flops / all->flops : 0};
        for (size_t s = 0; s < 3; s++) {
            double w = (x1 - x0) * share[s] / 100.0;
            fprintf(out, "<rect class=\"srcbar\" data-source=\"");
            xml_text(out, names[i]);
            fprintf(out, "\" data-share=\"%s\" data-of=\"%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" "
                         "fill=\"%s\"><title>",
                    fmt_fixed(a, sizeof a, share[s], 4), svg_series[s].metric, fmt_fixed(b2, sizeof b2, x0, 1),
                    fmt_fixed(c, 24, y + 2 + (row - 4) / 3.0 * (double)s, 2),
                    fmt_fixed(c + 24, sizeof c - 24, w < 0.5 && share[s] > 0 ? 0.5 : w, 2),
                    fmt_fixed(hb, sizeof hb, (row - 4) / 3.0 - 1, 2), svg_series[s].color);
            xml_text(out, names[i]);
            fprintf(out, ": %s%% of the %s</title></rect>\n", fmt_fixed(a, sizeof a, share[s], 2), svg_series[s].noun);
        }
    }
}

lt_status lt_profile_svg_sources(const lt_profile *p, const lt_profile *src, const char *const *names, size_t n_src,
                                 const char *title, FILE *out, lt_error *err) {
    if (p == NULL || out == NULL || (n_src > 0 && (src == NULL || names == NULL)))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "lt_profile_svg: NULL argument");
    char a[48], b2[48];
    const int H = SVG_H + (n_src > 0 ? 60 + SRC_ROW_H * (int)n_src : 0);
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                 "font-family=\"sans-serif\" font-size=\"12\">\n",
            SVG_W, H, SVG_W, H);
    fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", SVG_W, H);

    /* title and totals */
    fprintf(out, "<text x=\"%d\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">", SVG_W / 2);
    xml_text(out, title != NULL ? title : "Document length profile");
    fputs("</text>\n", out);
    fprintf(out, "<text x=\"%d\" y=\"46\" text-anchor=\"middle\">model ", SVG_W / 2);
    xml_text(out, p->model);
    if (p->documents == 0)
        fputs(": no documents", out);
    else
        fprintf(out, ": %s documents, %s tokens, %.3e forward FLOPs", fmt_grouped(a, sizeof a, p->documents),
                fmt_grouped(b2, sizeof b2, p->tokens), p->flops);
    fputs("</text>\n", out);

    /* legend */
    for (size_t s = 0; s < 3; s++) {
        double lx = PLOT_X0 + 150.0 + 190.0 * (double)s;
        fprintf(out, "<rect class=\"legend\" x=\"%s\" y=\"60\" width=\"12\" height=\"12\" fill=\"%s\"/>",
                fmt_fixed(a, sizeof a, lx, 1), svg_series[s].color);
        fprintf(out, "<text x=\"%s\" y=\"70\">%s</text>\n", fmt_fixed(a, sizeof a, lx + 18, 1), svg_series[s].legend);
    }

    /* y gridlines: minor at 2..9 x 10^k, major with labels at the decades */
    for (int dec = (int)LOG_MIN; dec < (int)LOG_MAX; dec++)
        for (int m = 2; m <= 9; m++) {
            double y = y_of_pct((double)m * pow(10.0, dec));
            fprintf(out, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%s\" y2=\"%s\" stroke=\"#eeeeee\"/>\n", PLOT_X0, PLOT_X1,
                    fmt_fixed(a, sizeof a, y, 2), fmt_fixed(b2, sizeof b2, y, 2));
        }
    static const char *const decade_labels[] = {"0.01%", "0.1%", "1%", "10%", "100%"};
    for (int dec = (int)LOG_MIN; dec <= (int)LOG_MAX; dec++) {
        double y = y_of_pct(pow(10.0, dec));
        fmt_fixed(a, sizeof a, y, 2);
        fprintf(out, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%s\" y2=\"%s\" stroke=\"#bbbbbb\"/>\n", PLOT_X0, PLOT_X1, a, a);
        fprintf(out, "<text x=\"%.0f\" y=\"%s\" text-anchor=\"end\" dominant-baseline=\"middle\">%s</text>\n",
                PLOT_X0 - 6, a, decade_labels[dec - (int)LOG_MIN]);
    }

    /* axes */
    fprintf(out, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", PLOT_X0, PLOT_X1,
            PLOT_YB, PLOT_YB);
    fprintf(out, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", PLOT_X0, PLOT_X0,
            PLOT_YT, PLOT_YB);
    fprintf(out,
            "<text x=\"22\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 22 %.0f)\">"
            "share of total (%%, log scale)</text>\n",
            (PLOT_YT + PLOT_YB) / 2, (PLOT_YT + PLOT_YB) / 2);
    fprintf(out,
            "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">document length (tokens, 1K = 1024)</text>\n",
            (PLOT_X0 + PLOT_X1) / 2, PLOT_YB + 48);

    /* x labels and bars */
    double group_w = (PLOT_X1 - PLOT_X0) / LT_PROFILE_N_BUCKETS;
    for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++) {
        const lt_profile_bucket *bk = &p->buckets[b];
        fprintf(out, "<text x=\"%s\" y=\"%.0f\" text-anchor=\"middle\">",
                fmt_fixed(a, sizeof a, PLOT_X0 + ((double)b + 0.5) * group_w, 2), PLOT_YB + 20);
        xml_text(out, bk->label);
        fputs("</text>\n", out);
        double pct[3] = {bk->pct_documents, bk->pct_tokens, bk->pct_flops};
        char count[3][40];
        fmt_grouped(count[0], sizeof count[0], bk->documents);
        fmt_grouped(count[1], sizeof count[1], bk->tokens);
        snprintf(count[2], sizeof count[2], "%.3e", bk->flops);
        for (size_t s = 0; s < 3; s++)
            if (pct[s] > 0) svg_bar(out, bk, b, s, pct[s], count[s]);
    }
    if (p->documents == 0)
        fprintf(out, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"16\">no documents</text>\n",
                (PLOT_X0 + PLOT_X1) / 2, (PLOT_YT + PLOT_YB) / 2);
    if (n_src > 0) svg_sources(out, p, src, names, n_src, SVG_H + 10);
    fputs("</svg>\n", out);
    if (fflush(out) != 0 || ferror(out)) return lt_fail(err, LT_ERR_IO, NULL, "writing the SVG failed");
    return LT_OK;
}
