/*
 * tests/dataprep/test_profile.c — dataprep/profile: bucket boundaries where the header
 * puts them, shares that sum to 100, FLOPs shares that grow with length faster than token
 * shares (the quadratic attention term), statistics against a sorted reference, the empty
 * corpus, and the three renderings: the table, the JSON (parsed back with lt_json_parse,
 * every documented key checked) and the SVG (parsed with expat, its bars counted).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <expat.h>

#include "dataprep/profile.h"
#include "lib/json.h"
#include "lib/model.h"

/* xorshift64* for test data */
static uint64_t trng_state = 0x2545F4914F6CDD1Du;
static uint64_t trng(void) {
    trng_state ^= trng_state >> 12;
    trng_state ^= trng_state << 25;
    trng_state ^= trng_state >> 27;
    return trng_state * 0x2545F4914F6CDD1DULL;
}

/* A long-tailed corpus: log2(length) uniform in [4, 19) (16 .. ~512K tokens), so every
 * bucket is populated and short documents dominate the count. */
static uint64_t *long_tail(size_t n) {
    uint64_t *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++) {
        double u = (double)(trng() >> 11) / 9007199254740992.0;
        v[i] = (uint64_t)exp2(4.0 + 15.0 * u);
    }
    return v;
}

static const lt_model_shape *model(const char *name) {
    const lt_model_shape *m = lt_model_preset(name);
    assert_non_null(m);
    return m;
}

/* ================================================================ buckets */

static void test_bucket_boundaries_are_as_documented(void **state) {
    (void)state;
    struct {
        uint64_t len;
        size_t bucket;
    } cases[] = {
        {0, 0},      {1, 0},      {1023, 0},   {1024, 1},     {2047, 1},      {2048, 2},
        {4095, 2},   {4096, 3},   {65535, 6},  {65536, 7},    {131071, 7},    {131072, 8},
        {262143, 8}, {262144, 9}, {262145, 9}, {1u << 30, 9}, {UINT64_MAX, 9},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (lt_profile_bucket_of(cases[i].len) != cases[i].bucket) {
            print_error("length %llu: bucket %zu, want %zu\n", (unsigned long long)cases[i].len,
                        lt_profile_bucket_of(cases[i].len), cases[i].bucket);
            fail();
        }
    }

    /* the computed profile puts them there too, and each bucket's [min, max] is tight */
    uint64_t lens[] = {1023, 1024, 2047, 262143, 262144};
    lt_profile p;
    lt_error err;
    assert_int_equal(lt_profile_compute(lens, 5, model("tiny"), &p, &err), LT_OK);
    assert_int_equal(p.buckets[0].documents, 1);
    assert_int_equal(p.buckets[1].documents, 2);
    assert_int_equal(p.buckets[8].documents, 1);
    assert_int_equal(p.buckets[9].documents, 1);
    assert_int_equal(p.buckets[1].tokens, 1024 + 2047);
    static const char *const labels[] = {"<1K",     "1K-2K",    "2K-4K",     "4K-8K",  "8K-16K",
                                         "16K-32K", "32K-64K", "64K-128K", "128K-256K", ">=256K"};
    for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++) {
        const lt_profile_bucket *bk = &p.buckets[b];
        assert_string_equal(bk->label, labels[b]);
        assert_int_equal(lt_profile_bucket_of(bk->min_tokens), b);
        assert_int_equal(lt_profile_bucket_of(bk->max_tokens), b);
        if (b > 0) assert_true(bk->min_tokens == p.buckets[b - 1].max_tokens + 1);
    }
    assert_true(p.buckets[0].min_tokens == 0);
    assert_true(p.buckets[1].min_tokens == 1024);
    assert_true(p.buckets[8].max_tokens == 262143);
    assert_true(p.buckets[9].min_tokens == 262144);
    assert_true(p.buckets[9].max_tokens == UINT64_MAX);
}

/* ================================================================ shares */

static void test_percentages_sum_to_100(void **state) {
    (void)state;
    const char *names[] = {"tiny", "llama-7b", "llama-150b", "gpt-1.3b"};
    size_t n = 20000;
    uint64_t *v = long_tail(n);
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        lt_profile p;
        lt_error err;
        assert_int_equal(lt_profile_compute(v, n, model(names[k]), &p, &err), LT_OK);
        assert_string_equal(p.model, names[k]);
        double sd = 0, st = 0, sf = 0, flops = 0;
        uint64_t docs = 0, toks = 0;
        for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++) {
            sd += p.buckets[b].pct_documents;
            st += p.buckets[b].pct_tokens;
            sf += p.buckets[b].pct_flops;
            docs += p.buckets[b].documents;
            toks += p.buckets[b].tokens;
            flops += p.buckets[b].flops;
            assert_true(p.buckets[b].documents > 0); /* the corpus fills every bucket */
        }
        assert_true(fabs(sd - 100) < 1e-9);
        assert_true(fabs(st - 100) < 1e-9);
        assert_true(fabs(sf - 100) < 1e-9);
        assert_int_equal(docs, n);
        assert_true(toks == p.tokens);
        assert_true(fabs(flops - p.flops) <= 1e-12 * p.flops);
        /* FLOPs against an independent per-document sum */
        double ref = 0;
        for (size_t i = 0; i < n; i++) ref += lt_model_forward_flops(model(names[k]), (double)v[i]);
        assert_true(fabs(ref - p.flops) <= 1e-9 * ref);
    }
    free(v);
}

/* FLOPs per token grow with length (a + c*L per document), so across non-empty buckets
 * pct_flops / pct_tokens strictly increases, and the longest bucket's share of FLOPs
 * exceeds its share of tokens, which exceeds its share of documents (SlimPack Fig. 1). */
static void test_flops_shares_shift_toward_long_buckets(void **state) {
    (void)state;
    size_t n = 20000;
    uint64_t *v = long_tail(n);
    lt_profile p;
    lt_error err;
    assert_int_equal(lt_profile_compute(v, n, model("llama-7b"), &p, &err), LT_OK);
    double prev = 0;
    for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++) {
        const lt_profile_bucket *bk = &p.buckets[b];
        if (bk->tokens == 0) continue;
        double ratio = bk->pct_flops / bk->pct_tokens;
        assert_true(ratio > prev);
        prev = ratio;
    }
    const lt_profile_bucket *last = &p.buckets[LT_PROFILE_N_BUCKETS - 1];
    assert_true(last->pct_flops > last->pct_tokens);
    assert_true(last->pct_tokens > last->pct_documents);
    const lt_profile_bucket *first = &p.buckets[0];
    assert_true(first->pct_flops < first->pct_tokens);
    assert_true(first->pct_tokens < first->pct_documents);

    /* a smaller model puts a larger share of its FLOPs in the long buckets (attention
     * dominates earlier: SlimPack 6.2) */
    lt_profile big;
    assert_int_equal(lt_profile_compute(v, n, model("llama-150b"), &big, &err), LT_OK);
    assert_true(p.buckets[9].pct_flops > big.buckets[9].pct_flops);
    free(v);
}

/* ================================================================ statistics */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* nearest rank by the definition: smallest value with at least p% of values <= it */
static uint64_t ref_percentile(const uint64_t *sorted, size_t n, double p) {
    for (size_t i = 0; i < n; i++)
        if ((double)(i + 1) >= p / 100.0 * (double)n - 1e-9) return sorted[i];
    return sorted[n - 1];
}

static void check_stats(const uint64_t *v, size_t n) {
    uint64_t *s = malloc(n * sizeof *s);
    assert_non_null(s);
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_u64);
    lt_profile p;
    lt_error err;
    assert_int_equal(lt_profile_compute(v, n, model("tiny"), &p, &err), LT_OK);
    double median = n % 2 ? (double)s[n / 2] : ((double)s[n / 2 - 1] + (double)s[n / 2]) / 2;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)v[i];
    if (p.median != median || p.p90 != ref_percentile(s, n, 90) || p.p99 != ref_percentile(s, n, 99) ||
        p.max != s[n - 1] || fabs(p.mean - sum / (double)n) > 1e-9 * p.mean) {
        print_error("n=%zu: median %g (want %g), p90 %llu (want %llu), p99 %llu (want %llu), max %llu\n", n,
                    p.median, median, (unsigned long long)p.p90, (unsigned long long)ref_percentile(s, n, 90),
                    (unsigned long long)p.p99, (unsigned long long)ref_percentile(s, n, 99),
                    (unsigned long long)p.max);
        fail();
    }
    free(s);
}

static void test_statistics_match_a_sorted_reference(void **state) {
    (void)state;
    uint64_t one[] = {7};
    check_stats(one, 1);
    uint64_t two[] = {9, 4};
    check_stats(two, 2);
    uint64_t hundred[100];
    for (size_t i = 0; i < 100; i++) hundred[i] = 100 - i; /* p90 = 90, p99 = 99 */
    check_stats(hundred, 100);
    lt_profile p;
    lt_error err;
    assert_int_equal(lt_profile_compute(hundred, 100, model("tiny"), &p, &err), LT_OK);
    assert_true(p.p90 == 90 && p.p99 == 99 && p.max == 100 && p.median == 50.5 && p.mean == 50.5);
    for (size_t n = 1; n <= 300; n += 7) {
        uint64_t *v = long_tail(n);
        check_stats(v, n);
        free(v);
    }
    /* many duplicates (three-way partition) */
    size_t n = 5001;
    uint64_t *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++) v[i] = trng() % 4 * 1000;
    check_stats(v, n);
    for (size_t i = 0; i < n; i++) v[i] = 2048;
    check_stats(v, n);
    free(v);
    v = long_tail(100001);
    check_stats(v, 100001);
    free(v);
}

static void test_errors(void **state) {
    (void)state;
    lt_profile p;
    lt_error err;
    lt_model_shape bad = *model("tiny");
    bad.heads = 3;
    uint64_t v[] = {10, 20};
    assert_int_equal(lt_profile_compute(v, 2, &bad, &p, &err), LT_ERR_CONFIG);
    uint64_t huge[] = {UINT64_MAX - 5, 10};
    assert_int_equal(lt_profile_compute(huge, 2, model("tiny"), &p, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "overflows"));
    assert_int_equal(lt_profile_compute(NULL, 2, model("tiny"), &p, &err), LT_ERR_INTERNAL);
    /* a custom, unnamed shape is reported as "custom" */
    lt_model_shape custom = *model("tiny");
    custom.name = NULL;
    assert_int_equal(lt_profile_compute(v, 2, &custom, &p, &err), LT_OK);
    assert_string_equal(p.model, "custom");
}

/* ================================================================ renderings */

static char *table_text(const lt_profile *p) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    lt_profile_print_table(p, f);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void test_table_names_model_counts_and_aligns(void **state) {
    (void)state;
    uint64_t *v = long_tail(1234);
    lt_profile p;
    lt_error err;
    assert_int_equal(lt_profile_compute(v, 1234, model("qwen2.5-7b"), &p, &err), LT_OK);
    char *t = table_text(&p);
    assert_non_null(strstr(t, "model qwen2.5-7b"));
    assert_non_null(strstr(t, "1,234 documents"));
    assert_non_null(strstr(t, "128K-256K"));
    assert_non_null(strstr(t, ">=256K"));
    assert_non_null(strstr(t, "median"));
    /* the header, the 10 bucket rows and the total row have the same width */
    char *line = strchr(t, '\n') + 1;
    size_t width = (size_t)(strchr(line, '\n') - line);
    for (int r = 0; r < 1 + LT_PROFILE_N_BUCKETS + 1; r++) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        assert_int_equal((size_t)(nl - line), width);
        line = nl + 1;
    }
    assert_non_null(strstr(t, "\ntotal "));
    free(t);
    free(v);
}

/* Parse the JSON of p back and check every documented key. */
static void check_json(const lt_profile *p) {
    lt_json j;
    lt_json_init(&j);
    lt_profile_json(p, &j);
    assert_true(lt_json_complete(&j));
    lt_jv *doc = NULL;
    lt_error err;
    assert_int_equal(lt_json_parse(j.buf, j.len, &doc, &err), LT_OK);
    assert_int_equal(doc->type, LT_JV_OBJECT);
    const lt_jv *v = lt_jv_get(doc, "model");
    assert_true(v != NULL && v->type == LT_JV_STRING);
    assert_string_equal(v->text, p->model);
    int64_t x;
    assert_true(lt_jv_int64(lt_jv_get(doc, "documents"), &x) && (uint64_t)x == p->documents);
    assert_true(lt_jv_int64(lt_jv_get(doc, "tokens"), &x) && (uint64_t)x == p->tokens);
    v = lt_jv_get(doc, "flops");
    assert_true(v != NULL && v->type == LT_JV_NUMBER && strtod(v->text, NULL) == p->flops);

    const lt_jv *buckets = lt_jv_get(doc, "buckets");
    assert_true(buckets != NULL && buckets->type == LT_JV_ARRAY);
    assert_int_equal(buckets->n, LT_PROFILE_N_BUCKETS);
    static const char *const keys[] = {"label",     "min_tokens",    "max_tokens", "documents", "tokens",
                                       "flops",     "pct_documents", "pct_tokens", "pct_flops"};
    for (size_t b = 0; b < buckets->n; b++) {
        const lt_jv *o = &buckets->items[b];
        const lt_profile_bucket *bk = &p->buckets[b];
        assert_int_equal(o->type, LT_JV_OBJECT);
        assert_int_equal(o->n, sizeof keys / sizeof keys[0]);
        for (size_t k = 0; k < o->n; k++) assert_string_equal(o->keys[k], keys[k]);
        assert_string_equal(lt_jv_get(o, "label")->text, bk->label);
        assert_true(lt_jv_int64(lt_jv_get(o, "min_tokens"), &x) && (uint64_t)x == bk->min_tokens);
        if (b + 1 == LT_PROFILE_N_BUCKETS)
            assert_int_equal(lt_jv_get(o, "max_tokens")->type, LT_JV_NULL);
        else
            assert_true(lt_jv_int64(lt_jv_get(o, "max_tokens"), &x) && (uint64_t)x == bk->max_tokens);
        assert_true(lt_jv_int64(lt_jv_get(o, "documents"), &x) && (uint64_t)x == bk->documents);
        assert_true(lt_jv_int64(lt_jv_get(o, "tokens"), &x) && (uint64_t)x == bk->tokens);
        assert_true(strtod(lt_jv_get(o, "flops")->text, NULL) == bk->flops);
        assert_true(strtod(lt_jv_get(o, "pct_documents")->text, NULL) == bk->pct_documents);
        assert_true(strtod(lt_jv_get(o, "pct_tokens")->text, NULL) == bk->pct_tokens);
        assert_true(strtod(lt_jv_get(o, "pct_flops")->text, NULL) == bk->pct_flops);
    }
    const lt_jv *stats = lt_jv_get(doc, "stats");
    assert_true(stats != NULL && stats->type == LT_JV_OBJECT);
    static const char *const skeys[] = {"mean", "median", "p90", "p99", "max"};
    assert_int_equal(stats->n, 5);
    for (size_t k = 0; k < 5; k++) {
        assert_string_equal(stats->keys[k], skeys[k]);
        assert_int_equal(stats->items[k].type, p->documents == 0 ? LT_JV_NULL : LT_JV_NUMBER);
    }
    if (p->documents > 0) {
        assert_true(strtod(lt_jv_get(stats, "median")->text, NULL) == p->median);
        assert_true(lt_jv_int64(lt_jv_get(stats, "max"), &x) && (uint64_t)x == p->max);
        assert_true(lt_jv_int64(lt_jv_get(stats, "p99"), &x) && (uint64_t)x == p->p99);
    }
    lt_jv_free(doc);
    lt_json_free(&j);
}

static void test_json_parses_with_documented_keys(void **state) {
    (void)state;
    uint64_t *v = long_tail(5000);
    lt_profile p;
    lt_error err;
    assert_int_equal(lt_profile_compute(v, 5000, model("llama-13b"), &p, &err), LT_OK);
    check_json(&p);
    free(v);
}

/* ---- SVG through expat */

typedef struct {
    int depth, max_depth;
    int root_is_svg;
    size_t bars;
    size_t bars_by_metric[3];
    size_t bars_in_bucket[LT_PROFILE_N_BUCKETS];
    const lt_profile *p;
    int bad_bar;
    size_t text_len;
    char text[32768]; /* all character data, concatenated */
} svg_scan;

static void XMLCALL svg_start(void *ud, const XML_Char *name, const XML_Char **atts) {
    svg_scan *s = ud;
    if (s->depth == 0) s->root_is_svg = strcmp(name, "svg") == 0;
    s->depth++;
    if (s->depth > s->max_depth) s->max_depth = s->depth;
    const char *metric = NULL, *bucket = NULL, *pct = NULL, *height = NULL, *cls = NULL;
    for (size_t i = 0; atts[i] != NULL; i += 2) {
        if (strcmp(atts[i], "data-metric") == 0) metric = atts[i + 1];
        if (strcmp(atts[i], "data-bucket") == 0) bucket = atts[i + 1];
        if (strcmp(atts[i], "data-pct") == 0) pct = atts[i + 1];
        if (strcmp(atts[i], "height") == 0) height = atts[i + 1];
        if (strcmp(atts[i], "class") == 0) cls = atts[i + 1];
    }
    if (metric == NULL) return;
    if (strcmp(name, "rect") != 0 || cls == NULL || strcmp(cls, "bar") != 0 || bucket == NULL || pct == NULL ||
        height == NULL || strtod(height, NULL) <= 0) {
        s->bad_bar = 1;
        return;
    }
    s->bars++;
    static const char *const metrics[] = {"documents", "tokens", "flops"};
    int found = 0;
    for (size_t m = 0; m < 3; m++)
        if (strcmp(metric, metrics[m]) == 0) {
            s->bars_by_metric[m]++;
            found = 1;
        }
    if (!found) s->bad_bar = 1;
    found = 0;
    for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++)
        if (strcmp(bucket, s->p->buckets[b].label) == 0) {
            s->bars_in_bucket[b]++;
            found = 1;
        }
    if (!found || !(strtod(pct, NULL) > 0)) s->bad_bar = 1;
}

static void XMLCALL svg_end(void *ud, const XML_Char *name) {
    (void)name;
    ((svg_scan *)ud)->depth--;
}

static void XMLCALL svg_chars(void *ud, const XML_Char *text, int len) {
    svg_scan *s = ud;
    size_t room = sizeof s->text - 1 - s->text_len;
    size_t k = (size_t)len < room ? (size_t)len : room;
    memcpy(s->text + s->text_len, text, k);
    s->text_len += k;
    s->text[s->text_len] = '\0';
}

/* Render p as SVG, parse it with expat (must succeed), and return what it saw. */
static void scan_svg(const lt_profile *p, const char *title, svg_scan *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    lt_error err;
    assert_int_equal(lt_profile_svg(p, title, f, &err), LT_OK);
    assert_int_equal(fclose(f), 0);
    memset(s, 0, sizeof *s);
    s->p = p;
    XML_Parser parser = XML_ParserCreate("UTF-8");
    assert_non_null(parser);
    XML_SetUserData(parser, s);
    XML_SetElementHandler(parser, svg_start, svg_end);
    XML_SetCharacterDataHandler(parser, svg_chars);
    if (XML_Parse(parser, buf, (int)len, 1) != XML_STATUS_OK) {
        print_error("SVG is not well-formed XML: %s at line %lu\n", XML_ErrorString(XML_GetErrorCode(parser)),
                    (unsigned long)XML_GetCurrentLineNumber(parser));
        fail();
    }
    XML_ParserFree(parser);
    free(buf);
    assert_true(s->root_is_svg);
    assert_int_equal(s->depth, 0);
    assert_false(s->bad_bar);
}

static void test_svg_is_well_formed_with_three_bars_per_bucket(void **state) {
    (void)state;
    /* buckets 0, 1, 3, 8, 9 populated; the rest empty */
    uint64_t v[] = {10, 500, 1000, 1500, 5000, 6000, 200000, 300000};
    lt_profile p;
    lt_error err;
    assert_int_equal(lt_profile_compute(v, sizeof v / sizeof v[0], model("llama-7b"), &p, &err), LT_OK);
    size_t nonempty = 0;
    for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++) nonempty += p.buckets[b].documents > 0;
    assert_int_equal(nonempty, 5);
    svg_scan s;
    scan_svg(&p, "GitHub <sample> & \"friends\"", &s);
    assert_int_equal(s.bars, 3 * nonempty);
    for (size_t m = 0; m < 3; m++) assert_int_equal(s.bars_by_metric[m], nonempty);
    for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++)
        assert_int_equal(s.bars_in_bucket[b], p.buckets[b].documents > 0 ? 3 : 0);
    assert_non_null(strstr(s.text, "GitHub <sample> & \"friends\"")); /* escaped, read back */
    assert_non_null(strstr(s.text, "llama-7b"));
    assert_non_null(strstr(s.text, "8 documents"));
    assert_non_null(strstr(s.text, "100%"));
    assert_non_null(strstr(s.text, "0.01%"));
    assert_non_null(strstr(s.text, "% of forward FLOPs"));
    assert_non_null(strstr(s.text, ">=256K"));

    /* a big corpus: all buckets, tiny shares drawn as stubs; hostile title text */
    uint64_t *w = long_tail(50000);
    assert_int_equal(lt_profile_compute(w, 50000, model("tiny"), &p, &err), LT_OK);
    scan_svg(&p, "bad \xff utf-8, control \x01, ]]> and '", &s);
    assert_int_equal(s.bars, 3 * LT_PROFILE_N_BUCKETS);
    assert_non_null(strstr(s.text, "bad \xef\xbf\xbd utf-8, control \xef\xbf\xbd, ]]> and '"));
    scan_svg(&p, NULL, &s);
    assert_non_null(strstr(s.text, "Document length profile"));
    free(w);

    /* zero-length documents: a document bar but no token or FLOPs bars */
    uint64_t zeros[] = {0, 0, 4096};
    assert_int_equal(lt_profile_compute(zeros, 3, model("tiny"), &p, &err), LT_OK);
    scan_svg(&p, "zeros", &s);
    assert_int_equal(s.bars, 1 + 3);
    assert_int_equal(s.bars_in_bucket[0], 1);
}

static void test_empty_input_gives_valid_outputs(void **state) {
    (void)state;
    lt_profile p;
    lt_error err;
    assert_int_equal(lt_profile_compute(NULL, 0, model("llama-70b"), &p, &err), LT_OK);
    assert_true(p.documents == 0 && p.tokens == 0 && p.flops == 0);
    for (size_t b = 0; b < LT_PROFILE_N_BUCKETS; b++) {
        assert_true(p.buckets[b].pct_documents == 0 && p.buckets[b].pct_tokens == 0 &&
                    p.buckets[b].pct_flops == 0);
        assert_non_null(p.buckets[b].label);
    }
    assert_true(p.mean == 0 && p.median == 0 && p.p90 == 0 && p.max == 0);

    char *t = table_text(&p);
    assert_non_null(strstr(t, "no documents"));
    assert_non_null(strstr(t, "llama-70b"));
    assert_null(strstr(t, "nan"));
    free(t);

    check_json(&p);
    lt_json j;
    lt_json_init(&j);
    lt_profile_json(&p, &j);
    assert_non_null(strstr(j.buf, "\"documents\":0"));
    assert_null(strstr(j.buf, "nan"));
    lt_json_free(&j);

    svg_scan s;
    scan_svg(&p, "empty", &s);
    assert_int_equal(s.bars, 0);
    assert_non_null(strstr(s.text, "no documents"));
    assert_null(strstr(s.text, "nan"));

    /* documents of length 0 only: tokens and FLOPs shares stay 0, not NaN */
    uint64_t zeros[] = {0, 0};
    assert_int_equal(lt_profile_compute(zeros, 2, model("tiny"), &p, &err), LT_OK);
    assert_true(p.buckets[0].pct_documents == 100 && p.buckets[0].pct_tokens == 0 && p.buckets[0].pct_flops == 0);
    check_json(&p);
}

static void test_svg_write_error_is_reported(void **state) {
    (void)state;
    FILE *f = fopen("/dev/full", "w");
    if (f == NULL) skip();
    uint64_t v[] = {1, 2, 3};
    lt_profile p;
    lt_error err;
    assert_int_equal(lt_profile_compute(v, 3, model("tiny"), &p, &err), LT_OK);
    assert_int_equal(lt_profile_svg(&p, "x", f, &err), LT_ERR_IO);
    fclose(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_boundaries_are_as_documented),
        cmocka_unit_test(test_percentages_sum_to_100),
        cmocka_unit_test(test_flops_shares_shift_toward_long_buckets),
        cmocka_unit_test(test_statistics_match_a_sorted_reference),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_table_names_model_counts_and_aligns),
        cmocka_unit_test(test_json_parses_with_documented_keys),
        cmocka_unit_test(test_svg_is_well_formed_with_three_bars_per_bucket),
        cmocka_unit_test(test_empty_input_gives_valid_outputs),
        cmocka_unit_test(test_svg_write_error_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
