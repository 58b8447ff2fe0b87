/*
 * lib/rng.h — seeded, splittable random numbers: same seed -> same stream on every machine.
 *
 * The generator is Philox4x64-10, the counter-based generator of Salmon, Moraes, Dror and
 * Shaw, "Parallel random numbers: as easy as 1, 2, 3" (SC 2011), exactly as in the
 * Random123 distribution (and numpy.random.Philox): a 128-bit key, a 256-bit counter,
 * and each counter value encrypted under the key gives one block of four 64-bit words.
 *
 * Stream layout (a contract: checkpoints and reference tests depend on it)
 *   - lt_rng_seed(r, seed): key = the first two outputs of splitmix64 started at `seed`;
 *     counter = 0; nothing buffered.
 *   - the n-th block of a stream (n = 0, 1, 2, ...) is philox(key, counter = n), the
 *     counter read as a 256-bit little-endian integer (ctr[0] least significant); the
 *     stream yields its words in order ctr word 0, 1, 2, 3. (numpy.random.Philox increments
 *     its counter BEFORE producing a block, so numpy with key=K and counter=2^256-1 yields
 *     the same u64 stream as an lt_rng with key K and counter 0.)
 *   - lt_rng_split(child, parent, id): child key = words 0 and 1 of
 *     philox(parent key, counter = {id, 0, 0, LT_RNG_SPLIT_DOMAIN}), child counter 0. The child
 *     depends only on the parent's KEY and `id`, never on how much the parent has drawn, so
 *     rank r of any run gets the same stream from lt_rng_split(&rank_rng, &root, r). Streams
 *     of a parent never reach counter word 3 == LT_RNG_SPLIT_DOMAIN (2^192 blocks away).
 *     Splits nest: split a child to get per-rank, per-worker streams.
 *   - every derived output consumes whole u64 words of the stream: lt_rng_u32 one word (its
 *     top 32 bits), lt_rng_double one word, lt_rng_below one or more (rejection),
 *     lt_rng_normal two per call (no cached spare).
 *
 * Exactness: all integer and uniform outputs (u64, u32, below, double, shuffle) are bit-exact
 * on every platform and compiler. lt_rng_normal uses libm log/sqrt/cos, which are not
 * correctly rounded everywhere, so its results may differ in the last bits across libms.
 *
 * Ownership and errors: lt_rng is a plain value (copying it forks the stream); nothing is
 * allocated and nothing fails. lt_rng_below(r, 0) is a programming error (LT_CHECK: reports
 * file:line and exits).
 *
 * Thread-safety: functions touch only the lt_rng passed in; use one lt_rng per thread
 * (lt_rng_split gives each its own stream).
 */
#ifndef LT_RNG_H
#define LT_RNG_H

#include <stddef.h>
#include <stdint.h>

/* Counter word 3 of the blocks that derive child keys ("split" in ASCII, padded). */
#define LT_RNG_SPLIT_DOMAIN UINT64_C(0x73706c6974000000)

typedef struct lt_rng {
    uint64_t key[2]; /* Philox key */
    uint64_t ctr[4]; /* counter of the NEXT block to generate (256-bit, ctr[0] lowest) */
    uint64_t buf[4]; /* the current block */
    int pos;         /* next word of buf to hand out; 4 = buffer empty */
} lt_rng;

/* Seed a stream: key from splitmix64(seed), counter 0. */
void lt_rng_seed(lt_rng *r, uint64_t seed);

/* Start a stream from an explicit key and counter (tests, resuming from a saved counter). */
void lt_rng_init_key(lt_rng *r, const uint64_t key[2], const uint64_t ctr[4]);

/* Derive an independent child stream from the parent's key and `stream_id` (see above).
 * `child` may not alias `parent`. The parent is not modified. */
void lt_rng_split(lt_rng *child, const lt_rng *parent, uint64_t stream_id);

/* Next 64 raw bits. */
uint64_t lt_rng_u64(lt_rng *r);

/* Next 32 bits: the top half of the next u64 word. */
uint32_t lt_rng_u32(lt_rng *r);

/* Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject). n must be > 0. */
uint64_t lt_rng_below(lt_rng *r, uint64_t n);

/* Uniform double in [0, 1): the top 53 bits of the next u64 times 2^-53. Bit-exact. */
double lt_rng_double(lt_rng *r);

/* Fisher-Yates shuffle of `n` elements of `size` bytes at `base`: for i = n-1 down to 1,
 * swap element i with element lt_rng_below(r, i + 1). Deterministic for a given stream. */
void lt_rng_shuffle(lt_rng *r, void *base, size_t n, size_t size);

/* Standard normal deviate (Box-Muller, two u64 words per call). NOT bit-exact across libms. */
double lt_rng_normal(lt_rng *r);

/* Raw Philox4x64-10: out = philox(key, ctr). For tests and reference checks. */
void lt_rng_philox_block(const uint64_t key[2], const uint64_t ctr[4], uint64_t out[4]);

/* splitmix64 step (Steele, Lea, Flood 2014): advances *state, returns the next output. */
uint64_t lt_splitmix64(uint64_t *state);

#endif /* LT_RNG_H */
