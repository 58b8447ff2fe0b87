/*
 * plans/store/ops_text.c — the ops encoding of stages.ops (docs/plans-schema.md, "The ops
 * encoding"): the encoder `planner build` writes each stage's op list with, and the strict
 * parser that reads it back.
 *
 * Ops are not rows: each stage's op list is one JSON array in its stages row; one row per op
 * cost 69 s and 4.8 GB per 10,000 128K-context ChunkFlow steps (22 s and 4.2 GB now).
 *
 * Times: an op's times are integer nanoseconds (llround(seconds x 1e9)), read back as
 * ns / 1e9 (the plan_ops view shows ns / 1e6 ms), while the tables hold milliseconds as
 * REAL = seconds x 1e3. Both round trips are monotone, so every ordering within one
 * encoding survives them (finish >= start, a stage's ops in time order); the one comparison
 * across the two, an op's finish <= its pipeline's time, is kept by the encoder
 * (op_time_ns): an op time t <= the pipeline's time T is stored as at most the largest ns
 * that reads back (in seconds and in the view's ms) <= what T reads back as. An op time
 * moves by less than 1 ns.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "plans/store/internal.h" /* store_format_stage_ops, store_parse_stage_ops, store_step_fail */

/* ------------------------------------------------------------------ writing
 *
 * A stage's op list is one JSON array in stages.ops, an element per op in list order (seq =
 * the element's index), no blanks:
 *   [kind, unit, recompute_layers, start_ns, finish_ns, mem_bytes]
 *       an op over the stage's whole layer block (stages.layer_begin, layer_end), part 'all':
 *       every op of every strategy but HelixPipe;
 *   [kind, unit, recompute_layers, start_ns, finish_ns, mem_bytes, layer_begin, layer_end, part]
 *       any other op.
 * kind 0 F, 1 FK, 2 B; part 0 all, 1 pre, 2 attn, 3 post; start_ns and finish_ns integer
 * nanoseconds from the step's start (op_time_ns); mem_bytes an integer when it is one
 * (below 2^53), else the shortest %.15g, %.16g or %.17g that reads back exactly. Measured on
 * 128K-context ChunkFlow steps (docs/plans-schema.md): a time in integer nanoseconds takes
 * 10.2 characters on average, in %.17g seconds 17.0; the list averages 42 bytes an op, where
 * %.17g seconds would make it 56. */

/* The longest element: 9 numbers (at most 20 characters each, 24 for mem_bytes), 8 commas,
 * the brackets and the comma before the next element. */
#define MAX_OP_TEXT 224

static const char digit_pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                  "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                  "8081828384858687888990919293949596979899";

static char *put_u64(char *w, uint64_t v) {
    char buf[20];
    char *b = buf + sizeof buf;
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100) * 2;
        v /= 100;
        *--b = digit_pairs[d + 1];
        *--b = digit_pairs[d];
    }
    if (v >= 10) {
        unsigned d = (unsigned)v * 2;
        *--b = digit_pairs[d + 1];
        *--b = digit_pairs[d];
    } else {
        *--b = (char)('0' + v);
    }
    size_t n = (size_t)(buf + sizeof buf - b);
    memcpy(w, b, n);
    return w + n;
}

static char *put_i64(char *w, int64_t v) {
    if (v >= 0) return put_u64(w, (uint64_t)v);
    *w++ = '-';
    return put_u64(w, (uint64_t)0 - (uint64_t)v);
}

/* A finite byte count, exactly. */
static char *put_bytes(char *w, double v) {
    if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(int64_t)v) return put_i64(w, (int64_t)v);
    char buf[32];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    size_t n = strlen(buf);
    memcpy(w, buf, n);
    return w + n;
}

/* The stored nanoseconds of op time t (seconds, finite, |t| < MAX_OP_TIME_S) of a pipeline
 * whose predicted time is pipe_s: the nearest, except that when t <= pipe_s the result
 * reads back (ns_to_s, and ns / 1e6 ms in plan_ops) no later than pipe_s does
 * (pipelines.predicted_ms = pipe_s x 1e3, read back / 1e3), so that the validator's
 * "finish <= the pipeline's time" survives the two roundings. Monotone in t. */
static int64_t op_time_ns(double t, double pipe_s) {
    int64_t ns = llround(t * 1e9);
    if (t <= pipe_s) {
        const double pipe_ms = pipe_s * 1e3, pipe_back = pipe_ms / 1e3;
        while (ns > 0 && (ns_to_s(ns) > pipe_back || (double)ns / 1e6 > pipe_ms)) ns--;
    }
    return ns;
}

/* Format stage g's op list (predictions po[0..n)) into st->json; returns its length. */
size_t store_format_stage_ops(lt_store *st, const lt_schedule *sc, int g, const lt_plan_op *po, double pipe_s) {
    const lt_stage_ops *so = &sc->stage[g];
    uint32_t lb, le;
    lt_schedule_stage_layers(sc->layers, sc->stages, g, &lb, &le);
    size_t need = 2 + so->n * MAX_OP_TEXT + 1;
    if (need > st->json_cap) {
        st->json_cap = need > 2 * st->json_cap ? need : 2 * st->json_cap;
        st->json = lt_realloc_check(st->json, st->json_cap);
    }
    char *w = st->json;
    *w++ = '[';
    for (size_t i = 0; i < so->n; i++) {
        const lt_op *op = &so->ops[i];
        if (i) *w++ = ',';
        *w++ = '[';
        *w++ = (char)('0' + op->kind);
        *w++ = ',';
        w = put_u64(w, op->unit);
        *w++ = ',';
        w = put_u64(w, op->recompute_layers);
        *w++ = ',';
        w = put_i64(w, op_time_ns(po[i].start_s, pipe_s));
        *w++ = ',';
        w = put_i64(w, op_time_ns(po[i].finish_s, pipe_s));
        *w++ = ',';
        w = put_bytes(w, po[i].mem_bytes);
        if (op->part != LT_PART_ALL || op->layer_begin != lb || op->layer_end != le) {
            *w++ = ',';
            w = put_u64(w, op->layer_begin);
            *w++ = ',';
            w = put_u64(w, op->layer_end);
            *w++ = ',';
            *w++ = (char)('0' + op->part);
        }
        *w++ = ']';
    }
    *w++ = ']';
    return (size_t)(w - st->json);
}

/* ------------------------------------------------------------------ parsing */

static lt_status ops_fail(lt_error *err, const ops_where *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static lt_status ops_fail(lt_error *err, const ops_where *at, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    lt_status s = store_step_fail(err, at->path, at->step, "table stages: dp_rank %" PRId64 " stage %d: ops: %s",
                                  at->dp_rank, at->stage, what);
    lt_error_hint(err, "the file was modified or damaged after 'planner build' wrote it; rebuild it "
                       "(docs/plans-schema.md, \"The ops encoding\")");
    return s;
}

/* A cursor over the ops text. The parser is strict: JSON (RFC 8259) arrays and numbers
 * only, in the shape of the encoding; blanks between tokens are allowed (a hand-edited or
 * pretty-printed list stays readable), anything else is an error naming the byte. */
typedef struct jcur {
    const char *s;
    size_t i, n;
} jcur;

static inline void j_blanks(jcur *c) {
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\n' || c->s[c->i] == '\t' || c->s[c->i] == '\r'))
        c->i++;
}

/* The next character after blanks, consumed when it is ch. */
static inline bool j_take(jcur *c, char ch) {
    j_blanks(c);
    if (c->i < c->n && c->s[c->i] == ch) {
        c->i++;
        return true;
    }
    return false;
}

static inline bool j_digit(const jcur *c, size_t i) { return i < c->n && c->s[i] >= '0' && c->s[i] <= '9'; }

/* The JSON number at the cursor: its extent [*b, c->i), whether it has a fraction or an
 * exponent, and its integer value when it has neither and fits 18 digits. false when no
 * JSON number starts here. */
static bool j_number(jcur *c, size_t *b, bool *integral, int64_t *iv, bool *fits) {
    j_blanks(c);
    size_t i = c->i;
    *b = i;
    bool neg = i < c->n && c->s[i] == '-';
    if (neg) i++;
    if (!j_digit(c, i)) return false;
    uint64_t v = 0;
    int digits = 0;
    if (c->s[i] == '0') {
        i++;
        digits = 1;
    } else {
        while (j_digit(c, i)) {
            if (digits < 18) v = 10 * v + (uint64_t)(c->s[i] - '0');
            digits++;
            i++;
        }
    }
    *integral = true;
    if (i < c->n && c->s[i] == '.') {
        *integral = false;
        if (!j_digit(c, ++i)) return false;
        while (j_digit(c, i)) i++;
    }
    if (i < c->n && (c->s[i] == 'e' || c->s[i] == 'E')) {
        *integral = false;
        i++;
        if (i < c->n && (c->s[i] == '+' || c->s[i] == '-')) i++;
        if (!j_digit(c, i)) return false;
        while (j_digit(c, i)) i++;
    }
    c->i = i;
    *fits = *integral && digits <= 18;
    *iv = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

/* Value k of an op: the names for messages. */
static const char *const op_field[9] = {"kind",    "unit",      "recompute_layers", "start",
                                        "finish",  "mem_bytes", "layer_begin",      "layer_end",
                                        "part"};

/* Parse the op list of one stage (text[0..len), n_ops elements, the stage's layer block
 * [lb, le)) onto stage at->stage of sc and its predictions onto pb. */
lt_status store_parse_stage_ops(const ops_where *at, const char *text, size_t len, int64_t n_ops, uint32_t lb,
                                uint32_t le, lt_schedule *sc, pred_buf *pb, lt_error *err) {
    jcur c = {text ? text : "", 0, text ? len : 0};
    size_t n = 0;
#define MALFORMED(expect) \
    return ops_fail(err, at, "malformed at byte %zu (op %zu): expected %s", c.i, n, expect)
    if (!j_take(&c, '[')) MALFORMED("'[' (a JSON array of ops)");
    if (!j_take(&c, ']')) {
        do {
            if (!j_take(&c, '['))
                MALFORMED("'[' (an op: [kind, unit, recompute_layers, start, finish, mem_bytes, ...])");
            int64_t v[9];
            double mem = 0;
            int k = 0;
            for (;; k++) {
                if (k > 0 && !j_take(&c, ',')) {
                    if (j_take(&c, ']')) break;
                    MALFORMED("',' or ']'");
                }
                if (k == 9)
                    return ops_fail(err, at, "op %zu has more than 9 values (6, or 9 for an op with its own layers)",
                                    n);
                size_t b;
                bool integral, fits;
                if (!j_number(&c, &b, &integral, &v[k], &fits)) MALFORMED("a number");
                if (k == 5) { /* mem_bytes: any finite number */
                    if (fits && v[k] > -9007199254740992 && v[k] < 9007199254740992) {
                        mem = (double)v[k];
                    } else {
                        char num[64];
                        if (c.i - b >= sizeof num)
                            return ops_fail(err, at, "op %zu: mem_bytes has %zu characters (at most 63)", n, c.i - b);
                        memcpy(num, c.s + b, c.i - b);
                        num[c.i - b] = '\0';
                        mem = strtod(num, NULL);
                        if (!isfinite(mem)) return ops_fail(err, at, "op %zu: mem_bytes %s is out of range", n, num);
                    }
                } else if (!fits) {
                    return ops_fail(err, at, "op %zu: %s '%.*s' is not an integer of at most 18 digits", n,
                                    op_field[k], (int)(c.i - b), c.s + b);
                }
            }
            if (k != 6 && k != 9)
                return ops_fail(err, at, "op %zu has %d values (6, or 9 for an op with its own layers)", n, k);
            if (v[0] < 0 || v[0] > LT_OP_B)
                return ops_fail(err, at, "op %zu: kind %" PRId64 " (0 F, 1 FK or 2 B)", n, v[0]);
            const bool bwd = sc->asym && v[0] == LT_OP_B; /* runs a unit of the backward partition */
            const size_t n_units = bwd ? sc->n_bunits : sc->n_units;
            if (v[1] < 0 || (uint64_t)v[1] >= n_units)
                return ops_fail(err, at, "op %zu runs %sunit %" PRId64 ", the pipeline has %zu %sunits in units_slices",
                                n, bwd ? "backward " : "", v[1], n_units, bwd ? "backward " : "");
            if (v[2] < 0 || v[2] > UINT16_MAX)
                return ops_fail(err, at, "op %zu: recompute_layers %" PRId64 " out of range", n, v[2]);
            lt_op op = {.kind = (uint8_t)v[0],
                        .part = LT_PART_ALL,
                        .recompute_layers = (uint16_t)v[2],
                        .unit = (uint32_t)v[1],
                        .layer_begin = lb,
                        .layer_end = le};
            if (k == 9) {
                if (v[6] < 0 || v[6] > UINT32_MAX || v[7] < 0 || v[7] > UINT32_MAX)
                    return ops_fail(err, at, "op %zu: layers [%" PRId64 ", %" PRId64 ") out of range", n, v[6], v[7]);
                if (v[8] < 0 || v[8] > LT_PART_POST)
                    return ops_fail(err, at, "op %zu: part %" PRId64 " (0 all, 1 pre, 2 attn or 3 post)", n, v[8]);
                op.layer_begin = (uint32_t)v[6];
                op.layer_end = (uint32_t)v[7];
                op.part = (uint8_t)v[8];
            }
            lt_schedule_add_op(sc, at->stage, op);
            if (pb->n == pb->cap) {
                pb->cap = pb->cap ? 2 * pb->cap : 256;
                pb->v = lt_realloc_check(pb->v, pb->cap * sizeof *pb->v);
            }
            pb->v[pb->n++] = (lt_plan_op){ns_to_s(v[3]), ns_to_s(v[4]), mem};
            n++;
        } while (j_take(&c, ','));
        if (!j_take(&c, ']')) MALFORMED("',' or ']'");
    }
    j_blanks(&c);
    if (c.i != c.n) MALFORMED("the end of the text after the array");
#undef MALFORMED
    if ((int64_t)n != n_ops) return ops_fail(err, at, "n_ops says %" PRId64 ", the array holds %zu ops", n_ops, n);
    return LT_OK;
}
