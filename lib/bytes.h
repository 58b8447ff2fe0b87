/*
 * lib/bytes.h — little-endian encoding of the project's binary formats, whatever the host's
 * byte order: the token shards and their index (dataprep/shard.c), the checkpoints
 * (train/io/ckpt.c, train/io/ckpt_dist.c) and safetensors files (train/io/safetensors.c).
 *
 * lt_put_leN writes the N-bit value v as N/8 bytes at p, lowest byte first; lt_get_leN reads
 * them back. Floats travel as their IEEE bits. p need not be aligned. Header only (static
 * inline): the compilers turn each into one load or store on a little-endian host.
 */
#ifndef LT_BYTES_H
#define LT_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void lt_put_le16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void lt_put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void lt_put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t lt_get_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t lt_get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t lt_get_le64(const uint8_t *p) {
    return (uint64_t)lt_get_le32(p) | (uint64_t)lt_get_le32(p + 4) << 32;
}

/* A double as the 8 bytes of its IEEE bits, and back. */
static inline void lt_put_le_f64(uint8_t *p, double d) {
    uint64_t v;
    memcpy(&v, &d, 8);
    lt_put_le64(p, v);
}
static inline double lt_get_le_f64(const uint8_t *p) {
    uint64_t v = lt_get_le64(p);
    double d;
    memcpy(&d, &v, 8);
    return d;
}

/* Floats x[0..n) as 4n bytes at out, and 4n bytes at in back into x[0..n). */
static inline void lt_put_le_floats(uint8_t *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        lt_put_le32(out + 4 * i, u);
    }
}
static inline void lt_get_le_floats(float *x, const uint8_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = lt_get_le32(in + 4 * i);
        memcpy(&x[i], &u, 4);
    }
}

#endif /* LT_BYTES_H */
