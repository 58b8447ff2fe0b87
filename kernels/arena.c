/*
 * kernels/arena.c — kernels/arena.h: the arena as one list of blocks in address order,
 * live and free, that tiles [0, size) exactly. Best fit scans the free ones; freeing
 * finds the block by its offset and merges it with free neighbours, which keeps the
 * invariant that no two free blocks are adjacent (so the largest hole is a real hole).
 */
#include "kernels/arena.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct block {
    size_t off, len; /* [off, off + len) from the aligned base */
    bool used;
    struct block *prev, *next;
} block;

struct lt_arena {
    uintptr_t base;
    size_t size, used, peak, live, holes;
    block *head; /* the block at offset 0 */
};

lt_status lt_arena_create(lt_arena **out, void *base, size_t size, lt_error *err) {
    *out = NULL;
    uintptr_t b = (uintptr_t)base, aligned = (b + (LT_ARENA_ALIGN - 1)) & ~(uintptr_t)(LT_ARENA_ALIGN - 1);
    size_t shift = (size_t)(aligned - b);
    if (aligned < b || size < shift || (size - shift) / LT_ARENA_ALIGN == 0)
        return lt_fail(err, LT_ERR_INPUT, NULL,
                       "a device arena of %zu bytes at %p holds no %zu-byte aligned block", size, base,
                       LT_ARENA_ALIGN);
    lt_arena *a = calloc(1, sizeof *a);
    block *h = calloc(1, sizeof *h);
    if (!a || !h) {
        free(a), free(h);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the arena's bookkeeping");
    }
    a->base = aligned;
    a->size = (size - shift) / LT_ARENA_ALIGN * LT_ARENA_ALIGN;
    h->len = a->size;
    a->head = h;
    a->holes = 1;
    *out = a;
    return LT_OK;
}

static void free_blocks(block *b) {
    while (b) {
        block *n = b->next;
        free(b);
        b = n;
    }
}

void lt_arena_destroy(lt_arena *a) {
    if (!a) return;
    free_blocks(a->head);
    free(a);
}

lt_status lt_arena_alloc(lt_arena *a, size_t bytes, const char *what, void **p, lt_error *err) {
    *p = NULL;
    if (bytes == 0) bytes = 1;
    size_t need = bytes > SIZE_MAX - (LT_ARENA_ALIGN - 1) ? 0 : (bytes + LT_ARENA_ALIGN - 1) / LT_ARENA_ALIGN * LT_ARENA_ALIGN;
    block *best = NULL;
    size_t largest = 0, free_bytes = a->size - a->used;
    for (block *b = a->head; b; b = b->next) {
        if (b->used) continue;
        if (b->len > largest) largest = b->len;
        /* the first of the smallest fitting holes: address order breaks ties */
        if (need && b->len >= need && (!best || b->len < best->len)) best = b;
    }
    if (!best) {
        lt_fail(err, LT_ERR_NOMEM, NULL,
                "the device arena cannot hold %zu bytes for %s: %zu of its %zu bytes are free, the largest hole is "
                "%zu bytes (%zu blocks live, peak %zu bytes)",
                bytes, what && *what ? what : "a tensor", free_bytes, a->size, largest, a->live, a->peak);
        lt_error_hint(err, free_bytes >= need && need
                               ? "the free memory is fragmented: free blocks in the reverse order of allocation, or "
                                 "size the arena above the plan's peak"
                               : "the step needs more memory than the arena holds: lower plan.mem so the planner "
                                 "splits units smaller, or give the arena more of the GPU");
        return LT_ERR_NOMEM;
    }
    if (best->len > need) { /* split: the block takes the hole's start, the rest stays a hole */
        block *rest = calloc(1, sizeof *rest);
        if (!rest) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the arena's bookkeeping");
        rest->off = best->off + need;
        rest->len = best->len - need;
        rest->prev = best;
        rest->next = best->next;
        if (best->next) best->next->prev = rest;
        best->next = rest;
        best->len = need;
    } else {
        a->holes--;
    }
    best->used = true;
    a->used += need;
    a->live++;
    if (a->used > a->peak) a->peak = a->used;
    *p = (void *)(a->base + best->off);
    return LT_OK;
}

/* Merge b's successor into b (both free). */
static void absorb_next(lt_arena *a, block *b) {
    block *n = b->next;
    b->len += n->len;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    free(n);
    a->holes--;
}

lt_status lt_arena_free(lt_arena *a, void *p, lt_error *err) {
    if (!p) return LT_OK;
    uintptr_t q = (uintptr_t)p;
    block *b = NULL;
    if (q >= a->base && q - a->base < a->size)
        for (b = a->head; b && b->off != q - a->base; b = b->next)
            ;
    if (!b || !b->used)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "freeing %p, which the device arena [%p, +%zu) %s", p,
                       (void *)a->base, a->size,
                       !b ? "did not hand out" : "has already freed");
    b->used = false;
    a->used -= b->len;
    a->live--;
    a->holes++;
    if (b->next && !b->next->used) absorb_next(a, b);
    if (b->prev && !b->prev->used) absorb_next(a, b->prev);
    return LT_OK;
}

void lt_arena_reset(lt_arena *a) {
    free_blocks(a->head->next);
    a->head->next = NULL;
    a->head->off = 0;
    a->head->len = a->size;
    a->head->used = false;
    a->used = a->live = 0;
    a->holes = 1;
}

void lt_arena_reset_peak(lt_arena *a) { a->peak = a->used; }

size_t lt_arena_size(const lt_arena *a) { return a->size; }
size_t lt_arena_used(const lt_arena *a) { return a->used; }
size_t lt_arena_peak(const lt_arena *a) { return a->peak; }
size_t lt_arena_live(const lt_arena *a) { return a->live; }
size_t lt_arena_holes(const lt_arena *a) { return a->holes; }
void *lt_arena_base(const lt_arena *a) { return (void *)a->base; }

size_t lt_arena_largest_free(const lt_arena *a) {
    size_t largest = 0;
    for (const block *b = a->head; b; b = b->next)
        if (!b->used && b->len > largest) largest = b->len;
    return largest;
}
