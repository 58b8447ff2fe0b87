/*
 * kernels/arena.h — a device-memory arena: host bookkeeping over one block of address
 * space (the CUDA backend gives it one lt_cuda_malloc'd block per rank, sized from the
 * plan's predicted peak, issue 20 "Memory"), so that a step's tensors never call
 * cudaMalloc/cudaFree and the peak the planner predicted can be compared with the peak
 * the step really reached.
 *
 * Plain C: the arena never dereferences the base address (it may be a device pointer, or
 * any number in tests). Policy:
 *   - every block starts at a multiple of LT_ARENA_ALIGN bytes from an aligned base and
 *     its size is rounded up to a multiple of it (256: cudaMalloc's own alignment, enough
 *     for every vector load and for cuBLASLt's pointer requirements);
 *   - allocation is best fit: the smallest free hole that holds the request, the lowest
 *     address among equals (deterministic: the same sequence of calls gives the same
 *     addresses), the block taken from the hole's start;
 *   - a freed block merges with a free neighbour on either side, so the free list never
 *     holds two adjacent holes;
 *   - used() counts the rounded sizes of the live blocks; peak() is used()'s maximum since
 *     creation or the last lt_arena_reset_peak.
 * Costs: alloc and free are linear in the number of blocks (live + holes); a step holds
 * hundreds to a few thousand tensors, against milliseconds of kernels.
 *
 * Errors are values: an allocation that does not fit returns LT_ERR_NOMEM naming what was
 * asked for, the free bytes and the largest hole (fragmentation shows as free >= request
 * with a smaller largest hole); freeing a pointer the arena did not hand out (or twice)
 * is LT_ERR_INTERNAL. Nothing prints or exits. Not thread-safe (one host thread per rank).
 */
#ifndef LT_KERNELS_ARENA_H
#define LT_KERNELS_ARENA_H

#include <stddef.h>

#include "lib/error.h" /* lt_status, lt_error */

#ifdef __cplusplus
extern "C" {
#endif

#define LT_ARENA_ALIGN ((size_t)256)

typedef struct lt_arena lt_arena;

/* An arena over [base, base + size). A base that is not aligned is moved up to the next
 * multiple of LT_ARENA_ALIGN (and the size shrunk by as much), the size rounded down to a
 * multiple of it. LT_ERR_INPUT when nothing usable remains, LT_ERR_NOMEM for the host
 * bookkeeping. *out is new; lt_arena_destroy it. */
lt_status lt_arena_create(lt_arena **out, void *base, size_t size, lt_error *err);
/* Frees the bookkeeping only (the memory belongs to whoever gave the base). NULL-safe. */
void lt_arena_destroy(lt_arena *a);

/* A block of at least `bytes` bytes (0 is taken as 1: every block has its own address),
 * aligned to LT_ARENA_ALIGN. `what` (may be NULL) names the tensor in the error message. */
lt_status lt_arena_alloc(lt_arena *a, size_t bytes, const char *what, void **p, lt_error *err);
/* Give back a block from lt_arena_alloc (NULL is a no-op). */
lt_status lt_arena_free(lt_arena *a, void *p, lt_error *err);
/* Free every block at once (the end of a step); the peak is kept. */
void lt_arena_reset(lt_arena *a);
/* Start a new peak measurement from the current use. */
void lt_arena_reset_peak(lt_arena *a);

size_t lt_arena_size(const lt_arena *a);     /* usable bytes (after alignment) */
size_t lt_arena_used(const lt_arena *a);     /* bytes in live blocks (rounded sizes) */
size_t lt_arena_peak(const lt_arena *a);     /* the most used() has been */
size_t lt_arena_largest_free(const lt_arena *a); /* the largest hole */
size_t lt_arena_live(const lt_arena *a);     /* live blocks */
size_t lt_arena_holes(const lt_arena *a);    /* free holes (0 when full, 1 when empty) */
void *lt_arena_base(const lt_arena *a);      /* the aligned base */

#ifdef __cplusplus
}
#endif

#endif /* LT_KERNELS_ARENA_H */
