/*
 * train/io/ckpt_bytes.h — little-endian encoding shared by the two checkpoint formats, the
 * single file (train/io/ckpt.c) and the parts of the distributed engine (train/io/ckpt_dist.c).
 * Internal to them.
 */
#ifndef LT_TRAIN_CKPT_BYTES_H
#define LT_TRAIN_CKPT_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put_f64(uint8_t *p, double d) {
    uint64_t v;
    memcpy(&v, &d, 8);
    put_u64(p, v);
}
static inline uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline double get_f64(const uint8_t *p) {
    uint64_t v = get_u64(p);
    double d;
    memcpy(&d, &v, 8);
    return d;
}

/* Little-endian bytes of floats x[0..n) into out (4n bytes), and back. */
static inline void floats_to_le(uint8_t *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        put_u32(out + 4 * i, u);
    }
}
static inline void floats_from_le(float *x, const uint8_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = get_u32(in + 4 * i);
        memcpy(&x[i], &u, 4);
    }
}

#endif /* LT_TRAIN_CKPT_BYTES_H */
