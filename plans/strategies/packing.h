/*
 * plans/strategies/packing.h — sample packing and slicing shared by the strategies (plans/strategies/plan.h):
 *
 *   best-fit decreasing   whole samples into bins of a token capacity (Krell et al. 2021,
 *                         "Efficient Sequence Packing without Cross-contamination"; the
 *                         Megatron baseline's "Best-Fit Packing" of SlimPack 6.1 [19])
 *   equal-FLOPs cuts      a run of concatenated samples cut into k pieces of equal forward
 *                         FLOPs, later tokens of a sample costing more under causal
 *                         attention (Seq1F1B's split; SlimPack 2.2.1)
 *
 * Both are deterministic: no randomness, ties broken by sample index.
 *
 * Ownership: an lt_packing owns its arrays; zero-initialise it (or lt_packing_init), pack any
 * number of times (the arrays are reused), then lt_packing_free.
 * Thread-safety: plain data; one writer at a time.
 */
#ifndef LT_PACKING_H
#define LT_PACKING_H

#include <stddef.h>
#include <stdint.h>

/* Bins of whole samples. Bin b holds members[bin_start[b] .. bin_start[b + 1]), sample
 * indices in increasing order, bin_tokens[b] tokens in all. */
typedef struct lt_packing {
    size_t n_bins;
    size_t *bin_start;   /* [n_bins + 1] */
    uint32_t *members;   /* [n] sample indices, bin by bin */
    int64_t *bin_tokens; /* [n_bins] */
    /* scratch and capacities (private to packing.c) */
    size_t cap_items;
    void *items;
    size_t *bin_of;
} lt_packing;

void lt_packing_init(lt_packing *p);
void lt_packing_free(lt_packing *p); /* NULL-safe; leaves it as lt_packing_init does */

/*
 * Best-fit decreasing of samples 0..n-1 with lengths[0..n) (each 1..capacity: a programming
 * error otherwise, LT_CHECK) into bins of `capacity` tokens: the samples taken by length,
 * longest first (ties: lower index first), each into the fullest bin it still fits (ties:
 * the bin made first), else into a new bin. Bins are numbered in creation order; inside a
 * bin the samples are listed in increasing index. Time O(n log n + n x bins).
 */
void lt_pack_best_fit_decreasing(lt_packing *p, const int64_t *lengths, size_t n, int64_t capacity);

/*
 * Cut a run of documents doc_len[0..n_docs) (each > 0), laid end to end, into k pieces of
 * equal cost: cuts[0] = 0 < cuts[1] < ... < cuts[k] = total tokens, piece j the tokens
 * [cuts[j], cuts[j + 1]) of the run. The cost of tokens [a, b) of one document is
 *     lin (b - a) + quad (b^2 - a^2)
 * (one layer's forward FLOPs: lin = the GEMM FLOPs of a token, quad = the causal attention
 * coefficient, cost.h; documents do not attend to each other). Each cut is the integer
 * position whose cumulative cost is nearest to j / k of the total (found in closed form
 * inside its document), so every piece's cost is within one token's cost of total / k; cuts
 * are then pushed apart where needed to keep every piece non-empty. Requires 1 <= k <= total
 * tokens, lin >= 0, quad >= 0, lin + quad > 0 (LT_CHECK). Time O(n_docs + k).
 */
void lt_split_equal_cost(const int64_t *doc_len, size_t n_docs, double lin, double quad, int k, int64_t *cuts);

#endif /* LT_PACKING_H */
