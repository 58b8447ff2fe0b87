/*
 * plans/cost/hardware.c — hardware profiles (plans/cost/hardware.h): a strict line parser for the
 * profile files, their writer (trainer calibrate's measured profiles), the lookup of a
 * profile by name, and the efficiency curves.
 *
 * The parser is our own rather than inih's (lib/config.c): the profile files are flat
 * key = value lists with units in the key names, and lib/config is bound to the config
 * schema. Every error names FILE:LINE, as the config loader's do.
 */
#include "plans/cost/hardware.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/files.h"   /* lt_read_file, lt_path_base */
#include "lib/strlist.h" /* lt_strlist */
#include "lib/strutil.h" /* lt_trim, lt_parse_*, lt_edit_distance, lt_is_close_match */

#ifndef LT_PKGDATADIR
#define LT_PKGDATADIR "/usr/local/share/longtail"
#endif

/* ------------------------------------------------------------------ efficiency curves */

double lt_hardware_efficiency(const lt_efficiency_curve *c, double tokens) {
    if (c->n <= 0) return 1.0;
    if (!(tokens > c->tokens[0])) return c->fraction[0]; /* also NaN and tokens <= 0 */
    if (tokens >= c->tokens[c->n - 1]) return c->fraction[c->n - 1];
    int i = 1;
    while (c->tokens[i] < tokens) i++; /* tokens[i-1] < tokens <= tokens[i] */
    double x0 = log2(c->tokens[i - 1]), x1 = log2(c->tokens[i]);
    double w = (log2(tokens) - x0) / (x1 - x0);
    return c->fraction[i - 1] + w * (c->fraction[i] - c->fraction[i - 1]);
}

lt_status lt_efficiency_parse(lt_efficiency_curve *c, const char *text, lt_error *err) {
    memset(c, 0, sizeof *c);
    char *copy = lt_strdup_check(text);
    lt_status st = LT_OK;
    int n = 0;
    /* strtok_r would merge empty items ("1:0.5,,2:0.6"); walk the commas by hand */
    char *item = copy;
    for (;;) {
        char *comma = strchr(item, ',');
        if (comma) *comma = '\0';
        char *p = lt_trim(item);
        if (*p == '\0') {
            st = lt_fail(err, LT_ERR_CONFIG, NULL, "empty point %d (points are TOKENS:FRACTION, separated by commas)",
                         n + 1);
            break;
        }
        if (n == LT_EFFICIENCY_MAX_POINTS) {
            st = lt_fail(err, LT_ERR_CONFIG, NULL, "more than %d points", LT_EFFICIENCY_MAX_POINTS);
            break;
        }
        char *colon = strchr(p, ':');
        if (!colon) {
            st = lt_fail(err, LT_ERR_CONFIG, NULL, "point %d '%.40s' is not TOKENS:FRACTION", n + 1, p);
            break;
        }
        *colon = '\0';
        char *tok_text = lt_trim(p), *frac_text = lt_trim(colon + 1);
        uint64_t tokens;
        double frac;
        if (lt_parse_size(tok_text, &tokens) != LT_OK || tokens == 0) {
            st = lt_fail(err, LT_ERR_CONFIG, NULL,
                         "point %d: bad token count '%.40s' (a positive integer, K/M suffixes allowed)", n + 1,
                         tok_text);
            break;
        }
        if (lt_parse_double(frac_text, &frac) != LT_OK || !(frac > 0.0 && frac <= 1.0)) {
            st = lt_fail(err, LT_ERR_CONFIG, NULL, "point %d: bad fraction '%.40s' (a number in (0, 1])", n + 1,
                         frac_text);
            break;
        }
        if (n > 0 && (double)tokens <= c->tokens[n - 1]) {
            st = lt_fail(err, LT_ERR_CONFIG, NULL, "point %d: tokens %" PRIu64 " not above the previous point's %.0f",
                         n + 1, tokens, c->tokens[n - 1]);
            break;
        }
        c->tokens[n] = (double)tokens;
        c->fraction[n] = frac;
        n++;
        if (!comma) break;
        item = comma + 1;
    }
    free(copy);
    if (st != LT_OK) {
        memset(c, 0, sizeof *c);
        return st;
    }
    c->n = n;
    return LT_OK;
}

/* ------------------------------------------------------------------ the optional keys' defaults */

/* A GPU mixed-precision backend (Megatron-LM's distributed optimizer: bf16 weights, fp32
 * gradients, fp32 master weights + AdamW m and v; fp32 loss softmax; a CUDA context), unless
 * act_bytes >= 4: an fp32 backend (the CPU trainer) trains its fp32 weights directly, so the
 * optimizer holds m and v only (docs/cost-model.md, "Memory"). */
void lt_hardware_fill_defaults(lt_hardware *hw) {
    if (!(hw->act_bytes > 0)) hw->act_bytes = 2.0; /* bf16, every GPU profile */
    bool fp32 = hw->act_bytes >= 4.0;
    if (!(hw->weight_bytes > 0)) hw->weight_bytes = fp32 ? 4.0 : 2.0;
    if (!(hw->grad_bytes > 0)) hw->grad_bytes = 4.0;
    if (!(hw->optim_bytes > 0)) hw->optim_bytes = fp32 ? 8.0 : 12.0;
    if (!hw->has_logit_bytes) {
        hw->logit_bytes = 4.0;
        hw->has_logit_bytes = true;
    }
    if (!hw->has_reserved_bytes) {
        hw->reserved_bytes = 2.0 * 1073741824.0;
        hw->has_reserved_bytes = true;
    }
    /* the FLOP ratios of the backward (SlimPack 2.2.2): its time at the forward's rate */
    if (!(hw->bwd_gemm_factor > 0)) hw->bwd_gemm_factor = 2.0;
    if (!(hw->bwd_attention_factor > 0)) hw->bwd_attention_factor = 2.5;
}

/* ------------------------------------------------------------------ the profile keys */

typedef enum key_kind {
    K_TEXT,    /* a string field */
    K_POSITIVE,/* a number > 0, times `scale` */
    K_NONNEG,  /* a number >= 0, times `scale` */
    K_UNIT,    /* a number in [0, 1] */
    K_COUNT,   /* an integer >= 1 */
    K_CURVE,   /* an efficiency curve */
} key_kind;

typedef struct key_def {
    const char *name;
    key_kind kind;
    bool required;
    double scale; /* file unit -> SI */
    size_t offset;
    size_t size;  /* K_TEXT: the field's capacity */
    size_t given; /* offset of the bool set when the key is given, NO_FLAG for none */
} key_def;

#define NO_FLAG SIZE_MAX

#define FIELD(f) offsetof(lt_hardware, f)
static const key_def keys[] = {
    {"name", K_TEXT, false, 0, FIELD(name), LT_HARDWARE_NAME_MAX, NO_FLAG},
    {"description", K_TEXT, false, 0, FIELD(description), LT_HARDWARE_TEXT_MAX, NO_FLAG},
    {"peak_bf16_tflops", K_POSITIVE, true, 1e12, FIELD(peak_flops), 0, NO_FLAG},
    {"hbm_gib", K_POSITIVE, true, 1073741824.0, FIELD(hbm_bytes), 0, NO_FLAG},
    {"hbm_gbps", K_POSITIVE, true, 1e9, FIELD(hbm_bytes_per_s), 0, NO_FLAG},
    {"gpus_per_node", K_COUNT, true, 0, FIELD(gpus_per_node), 0, NO_FLAG},
    {"p2p_intra_gbps", K_POSITIVE, true, 1e9, FIELD(p2p_intra_bytes_per_s), 0, NO_FLAG},
    {"p2p_intra_latency_us", K_NONNEG, true, 1e-6, FIELD(p2p_intra_latency_s), 0, NO_FLAG},
    {"p2p_inter_gbps", K_POSITIVE, true, 1e9, FIELD(p2p_inter_bytes_per_s), 0, NO_FLAG},
    {"p2p_inter_latency_us", K_NONNEG, true, 1e-6, FIELD(p2p_inter_latency_s), 0, NO_FLAG},
    {"gemm_efficiency", K_CURVE, true, 0, FIELD(gemm), 0, NO_FLAG},
    {"attention_efficiency", K_CURVE, true, 0, FIELD(attention), 0, NO_FLAG},
    /* optional: the CPU fp32 trainer's profiles (trainer calibrate) set 4 */
    {"act_bytes", K_POSITIVE, false, 1, FIELD(act_bytes), 0, NO_FLAG},
    /* optional: the backend's memory terms (defaults: lt_hardware_fill_defaults) */
    {"weight_bytes", K_POSITIVE, false, 1, FIELD(weight_bytes), 0, NO_FLAG},
    {"grad_bytes", K_POSITIVE, false, 1, FIELD(grad_bytes), 0, NO_FLAG},
    {"optim_bytes", K_POSITIVE, false, 1, FIELD(optim_bytes), 0, NO_FLAG},
    {"logit_bytes", K_NONNEG, false, 1, FIELD(logit_bytes), 0, FIELD(has_logit_bytes)},
    {"reserved_gib", K_NONNEG, false, 1073741824.0, FIELD(reserved_bytes), 0, FIELD(has_reserved_bytes)},
    /* optional: the time terms (defaults: the FLOP ratios; the head on the GEMM curve) */
    {"bwd_gemm_factor", K_POSITIVE, false, 1, FIELD(bwd_gemm_factor), 0, NO_FLAG},
    {"bwd_attention_factor", K_POSITIVE, false, 1, FIELD(bwd_attention_factor), 0, NO_FLAG},
    {"head_efficiency", K_CURVE, false, 0, FIELD(head), 0, NO_FLAG},
    /* optional: devices of a node slowing each other (default 0: none) */
    {"compute_contention", K_UNIT, false, 1, FIELD(compute_contention), 0, NO_FLAG},
};
#undef FIELD
#define N_KEYS (sizeof keys / sizeof keys[0])

/* "did you mean 'x'?" for the closest key, else the list of keys. */
static void unknown_key_hint(lt_error *err, const char *key) {
    size_t best = SIZE_MAX, best_i = 0;
    for (size_t i = 0; i < N_KEYS; i++) {
        size_t d = lt_edit_distance(key, keys[i].name);
        if (d < best) best = d, best_i = i;
    }
    if (best != SIZE_MAX && lt_is_close_match(key, keys[best_i].name, best)) {
        lt_error_hint(err, "did you mean '%s'?", keys[best_i].name);
        return;
    }
    char list[512] = "";
    for (size_t i = 0; i < N_KEYS; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%s", i ? " " : "", keys[i].name);
    }
    lt_error_hint(err, "keys: %s", list);
}

/* Cut a trailing " ; comment" / " # comment" (a ';' or '#' after a blank) off `line`. */
static void cut_comment(char *line) {
    for (char *p = line; *p; p++) {
        if ((*p == ';' || *p == '#') && (p == line || lt_is_blank_char(p[-1]))) {
            *p = '\0';
            return;
        }
    }
}

static lt_status set_value(lt_hardware *hw, const key_def *k, const char *value, const char *where, lt_error *err) {
    char *field = (char *)hw + k->offset;
    double v;
    int64_t count;
    lt_status st;
    switch (k->kind) {
    case K_TEXT:
        if (strlen(value) >= k->size)
            return lt_fail(err, LT_ERR_CONFIG, where, "%s is longer than %zu bytes", k->name, k->size - 1);
        memcpy(field, value, strlen(value) + 1);
        return LT_OK;
    case K_POSITIVE:
    case K_NONNEG:
    case K_UNIT:
        if (lt_parse_double(value, &v) != LT_OK) {
            lt_fail(err, LT_ERR_CONFIG, where, "bad number '%.60s' for %s", value, k->name);
            lt_error_hint(err, "a decimal number such as 989 or 4.8e3, in the unit the key's name says");
            return LT_ERR_CONFIG;
        }
        if (k->kind == K_POSITIVE ? !(v > 0) : k->kind == K_UNIT ? !(v >= 0 && v <= 1) : !(v >= 0))
            return lt_fail(err, LT_ERR_CONFIG, where, "%s = %.60s: must be %s", k->name, value,
                           k->kind == K_POSITIVE ? "positive" : k->kind == K_UNIT ? "from 0 to 1" : "at least 0");
        *(double *)(void *)field = v * k->scale;
        if (k->given != NO_FLAG) *(bool *)(void *)((char *)hw + k->given) = true;
        return LT_OK;
    case K_COUNT:
        if (lt_parse_int64(value, &count) != LT_OK)
            return lt_fail(err, LT_ERR_CONFIG, where, "bad integer '%.60s' for %s", value, k->name);
        if (count < 1 || count > 1 << 20)
            return lt_fail(err, LT_ERR_CONFIG, where, "%s = %.60s: must be between 1 and %d", k->name, value,
                           1 << 20);
        *(int *)(void *)field = (int)count;
        return LT_OK;
    case K_CURVE:
    {
        lt_error why;
        lt_error_clear(&why);
        st = lt_efficiency_parse((lt_efficiency_curve *)(void *)field, value, &why);
        if (st != LT_OK) {
            lt_fail(err, st, where, "bad %s: %.400s", k->name, why.what);
            lt_error_hint(err, "write TOKENS:FRACTION points, tokens increasing, e.g. 512:0.4, 4096:0.7");
        }
        return st;
    }
    }
    return lt_fail(err, LT_ERR_INTERNAL, where, "unknown key kind");
}

lt_status lt_hardware_parse(lt_hardware *hw, const char *text, const char *where, const char *default_name,
                            lt_error *err) {
    memset(hw, 0, sizeof *hw);
    if (!where) where = "<string>";
    long seen_line[N_KEYS] = {0};
    char *copy = lt_strdup_check(text);
    lt_status st = LT_OK;
    long lineno = 0;
    char *line = copy;
    if ((unsigned char)line[0] == 0xEF && (unsigned char)line[1] == 0xBB && (unsigned char)line[2] == 0xBF)
        line += 3; /* one UTF-8 byte-order mark */
    while (line && st == LT_OK) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        lineno++;
        char at[LT_ERROR_WHERE_MAX];
        snprintf(at, sizeof at, "%.480s:%ld", where, lineno);
        cut_comment(line);
        char *p = lt_trim(line);
        line = next;
        if (*p == '\0') continue;
        if (*p == '[') {
            st = lt_fail(err, LT_ERR_CONFIG, at, "sections are not used in hardware profiles: '%.60s'", p);
            lt_error_hint(err, "write key = value lines only");
            break;
        }
        char *eq = strchr(p, '=');
        if (!eq) {
            st = lt_fail(err, LT_ERR_CONFIG, at, "syntax error: '%.60s' is not a 'key = value' line", p);
            lt_error_hint(err, "a line is key = value or a comment starting with ; or #");
            break;
        }
        *eq = '\0';
        char *key = lt_trim(p), *value = lt_trim(eq + 1);
        size_t k = 0;
        while (k < N_KEYS && strcmp(keys[k].name, key) != 0) k++;
        if (k == N_KEYS) {
            st = lt_fail(err, LT_ERR_CONFIG, at, "unknown key '%.60s'", key);
            unknown_key_hint(err, key);
            break;
        }
        if (seen_line[k]) {
            st = lt_fail(err, LT_ERR_CONFIG, at, "duplicate key '%s', first given at line %ld", key, seen_line[k]);
            break;
        }
        seen_line[k] = lineno;
        if (*value == '\0') {
            st = lt_fail(err, LT_ERR_CONFIG, at, "no value for %s", key);
            break;
        }
        st = set_value(hw, &keys[k], value, at, err);
    }
    free(copy);
    for (size_t k = 0; st == LT_OK && k < N_KEYS; k++) {
        if (keys[k].required && !seen_line[k]) {
            st = lt_fail(err, LT_ERR_CONFIG, where, "missing key '%s'", keys[k].name);
            lt_error_hint(err, "every profile sets all of the keys listed in docs/cost-model.md");
        }
    }
    if (st == LT_OK) lt_hardware_fill_defaults(hw);
    if (st == LT_OK && hw->name[0] == '\0') {
        const char *dn = default_name ? default_name : "";
        if (strlen(dn) >= sizeof hw->name) st = lt_fail(err, LT_ERR_CONFIG, where, "profile name too long");
        else memcpy(hw->name, dn, strlen(dn) + 1);
    }
    if (st != LT_OK) {
        memset(hw, 0, sizeof *hw);
        return st;
    }
    return LT_OK;
}

/* ------------------------------------------------------------------ writer */

/* "key = VALUE" (`digits` significant digits, %g) with the note after it, then the end of
 * the line. */
static void write_number(FILE *f, const char *key, int digits, double value, const char *note) {
    fprintf(f, "%s = %.*g", key, digits, value);
    if (note) fprintf(f, " ; %s", note);
    fputc('\n', f);
}

/* The note on its own line, then "key = TOKENS:FRACTION, ..." and the end of the line. */
static void write_curve(FILE *f, const char *key, const lt_efficiency_curve *c, const char *note) {
    if (note) fprintf(f, "; %s\n", note);
    fprintf(f, "%s = ", key);
    for (int i = 0; i < c->n; i++) fprintf(f, "%s%.0f:%.6g", i ? ", " : "", c->tokens[i], c->fraction[i]);
    fputc('\n', f);
}

/* Each line of text as a whole-line comment. */
static void write_comment_lines(FILE *f, const char *text) {
    while (*text) {
        size_t len = strcspn(text, "\n");
        if (len) fprintf(f, "; %.*s\n", (int)len, text);
        else fputs(";\n", f);
        text += len;
        if (*text == '\n') text++;
    }
}

lt_status lt_hardware_write(const lt_hardware *hw, const lt_hardware_notes *notes, FILE *f, lt_error *err) {
    static const lt_hardware_notes none = {0};
    const lt_hardware_notes *n = notes ? notes : &none;
    const struct {
        const char *key;
        const lt_efficiency_curve *c;
        int min;
    } curves[] = {{"gemm_efficiency", &hw->gemm, 1}, {"attention_efficiency", &hw->attention, 1},
                  {"head_efficiency", &hw->head, 0}};
    for (size_t i = 0; i < sizeof curves / sizeof curves[0]; i++)
        if (curves[i].c->n < curves[i].min || curves[i].c->n > LT_EFFICIENCY_MAX_POINTS)
            return lt_fail(err, LT_ERR_CONFIG, hw->name, "%s has %d points (a profile's curve has %d to %d)",
                           curves[i].key, curves[i].c->n, curves[i].min ? 1 : 0, LT_EFFICIENCY_MAX_POINTS);
    if (hw->gpus_per_node < 1)
        return lt_fail(err, LT_ERR_CONFIG, hw->name, "gpus_per_node = %d: must be at least 1", hw->gpus_per_node);

    if (n->header) {
        write_comment_lines(f, n->header);
        fputc('\n', f);
    }
    if (hw->name[0]) fprintf(f, "name = %s\n", hw->name);
    if (hw->description[0]) fprintf(f, "description = %s\n", hw->description);
    fputc('\n', f);
    /* the file's units: the inverse of the keys' scales above */
    write_number(f, "peak_bf16_tflops", 6, hw->peak_flops / 1e12, n->peak_bf16_tflops);
    write_number(f, "hbm_gib", 4, hw->hbm_bytes / 1073741824.0, n->hbm_gib);
    write_number(f, "hbm_gbps", 4, hw->hbm_bytes_per_s / 1e9, n->hbm_gbps);
    fprintf(f, "gpus_per_node = %d", hw->gpus_per_node);
    if (n->gpus_per_node) fprintf(f, " ; %s", n->gpus_per_node);
    fputc('\n', f);
    write_number(f, "p2p_intra_gbps", 4, hw->p2p_intra_bytes_per_s / 1e9, n->p2p_intra_gbps);
    write_number(f, "p2p_intra_latency_us", 4, hw->p2p_intra_latency_s * 1e6, n->p2p_intra_latency_us);
    write_number(f, "p2p_inter_gbps", 4, hw->p2p_inter_bytes_per_s / 1e9, n->p2p_inter_gbps);
    write_number(f, "p2p_inter_latency_us", 4, hw->p2p_inter_latency_s * 1e6, n->p2p_inter_latency_us);
    /* the optional keys that hw sets (lt_hardware_fill_defaults: what "set" means) */
    if (hw->act_bytes > 0) write_number(f, "act_bytes", 4, hw->act_bytes, n->act_bytes);
    if (hw->weight_bytes > 0) write_number(f, "weight_bytes", 4, hw->weight_bytes, n->weight_bytes);
    if (hw->grad_bytes > 0) write_number(f, "grad_bytes", 4, hw->grad_bytes, n->grad_bytes);
    if (hw->optim_bytes > 0) write_number(f, "optim_bytes", 4, hw->optim_bytes, n->optim_bytes);
    if (hw->has_logit_bytes) write_number(f, "logit_bytes", 4, hw->logit_bytes, n->logit_bytes);
    if (hw->has_reserved_bytes)
        write_number(f, "reserved_gib", 3, hw->reserved_bytes / 1073741824.0, n->reserved_gib);
    if (hw->bwd_gemm_factor > 0) write_number(f, "bwd_gemm_factor", 4, hw->bwd_gemm_factor, n->bwd_gemm_factor);
    if (hw->bwd_attention_factor > 0)
        write_number(f, "bwd_attention_factor", 4, hw->bwd_attention_factor, n->bwd_attention_factor);
    if (hw->compute_contention > 0)
        write_number(f, "compute_contention", 4, hw->compute_contention, n->compute_contention);
    fputc('\n', f);
    write_curve(f, "gemm_efficiency", &hw->gemm, n->gemm_efficiency);
    write_curve(f, "attention_efficiency", &hw->attention, n->attention_efficiency);
    if (hw->head.n > 0) write_curve(f, "head_efficiency", &hw->head, n->head_efficiency);
    return LT_OK;
}

/* ------------------------------------------------------------------ lookup */

static bool is_regular_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The lookup directories, in order; unused slots are NULL. */
static void search_dirs(const char *dir, const char *dirs[3]) {
    const char *env = getenv("LONGTAIL_HARDWARE_DIR");
    dirs[0] = dir && *dir ? dir : NULL;
    dirs[1] = env && *env ? env : NULL;
    dirs[2] = LT_PKGDATADIR "/etc/hardware";
}

const char *lt_hardware_list(const char *dir, char *buf, size_t n) {
    const char *dirs[3];
    search_dirs(dir, dirs);
    lt_strlist names = LT_STRLIST_INIT;
    for (int d = 0; d < 3; d++) {
        if (!dirs[d]) continue;
        DIR *dp = opendir(dirs[d]);
        if (!dp) continue;
        struct dirent *e;
        while ((e = readdir(dp)) != NULL) {
            size_t l = strlen(e->d_name);
            if (l > 4 && ends_with(e->d_name, ".ini") && e->d_name[0] != '.') {
                char name[256];
                snprintf(name, sizeof name, "%.*s", (int)(l - 4), e->d_name);
                lt_strlist_push(&names, name);
            }
        }
        closedir(dp);
    }
    lt_strlist_sort_unique(&names);
    if (n) buf[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < names.count && n; i++) {
        int w = snprintf(buf + used, n - used, "%s%s", i ? ", " : "", names.items[i]);
        if (w < 0 || (size_t)w >= n - used) break;
        used += (size_t)w;
    }
    lt_strlist_free(&names);
    return buf;
}

static lt_status load_path(lt_hardware *hw, const char *path, lt_error *err) {
    char *text = NULL;
    size_t len = 0;
    memset(hw, 0, sizeof *hw);
    lt_status st = lt_read_file(path, &text, &len, err);
    if (st != LT_OK) {
        lt_error_prefix(err, "hardware profile: ");
        lt_error_hint(err, "give a profile name (see etc/hardware/) or the path of a profile .ini file");
        return st;
    }
    if (strlen(text) != len) {
        free(text);
        return lt_fail(err, LT_ERR_CONFIG, path, "hardware profile contains a NUL byte");
    }
    /* the default name: the file name without its .ini */
    char stem[LT_HARDWARE_NAME_MAX];
    const char *base = lt_path_base(path);
    size_t bl = strlen(base);
    if (ends_with(base, ".ini")) bl -= 4;
    snprintf(stem, sizeof stem, "%.*s", (int)(bl < sizeof stem ? bl : sizeof stem - 1), base);
    st = lt_hardware_parse(hw, text, path, stem, err);
    free(text);
    if (st != LT_OK) return st;
    if (strlen(path) >= sizeof hw->path) {
        memset(hw, 0, sizeof *hw);
        return lt_fail(err, LT_ERR_USAGE, NULL, "hardware profile path longer than %d bytes", LT_HARDWARE_PATH_MAX - 1);
    }
    memcpy(hw->path, path, strlen(path) + 1);
    return LT_OK;
}

lt_status lt_hardware_load(lt_hardware *hw, const char *name_or_path, const char *dir, lt_error *err) {
    memset(hw, 0, sizeof *hw);
    if (!name_or_path || !*name_or_path)
        return lt_fail(err, LT_ERR_CONFIG, "plan.hardware", "no hardware profile given");
    if (strchr(name_or_path, '/') || ends_with(name_or_path, ".ini")) return load_path(hw, name_or_path, err);
    const char *dirs[3];
    search_dirs(dir, dirs);
    char searched[1024] = "";
    size_t used = 0;
    for (int d = 0; d < 3; d++) {
        if (!dirs[d]) continue;
        size_t n = strlen(dirs[d]) + strlen(name_or_path) + 6;
        char *path = lt_malloc_check(n);
        snprintf(path, n, "%s/%s.ini", dirs[d], name_or_path);
        if (is_regular_file(path)) {
            lt_status st = load_path(hw, path, err);
            free(path);
            return st;
        }
        free(path);
        int w = snprintf(searched + used, sizeof searched - used, "%s%s", used ? ", " : "", dirs[d]);
        if (w > 0 && (size_t)w < sizeof searched - used) used += (size_t)w;
    }
    char found[512];
    lt_hardware_list(dir, found, sizeof found);
    lt_fail(err, LT_ERR_CONFIG, NULL, "unknown hardware profile '%.100s': no %.100s.ini in %s", name_or_path,
            name_or_path, searched);
    if (found[0])
        lt_error_hint(err, "profiles found: %s; or pass a path to an .ini file (--hardware-dir DIR or "
                           "LONGTAIL_HARDWARE_DIR add a directory)", found);
    else
        lt_error_hint(err, "no profiles found: pass --hardware-dir DIR or set LONGTAIL_HARDWARE_DIR to a directory "
                           "of NAME.ini profiles (the source tree's etc/hardware)");
    return LT_ERR_CONFIG;
}
