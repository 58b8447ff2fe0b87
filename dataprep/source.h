/*
 * dataprep/source.h — a corpus file as a stream of decompressed bytes.
 *
 * lt_src_open() looks at the first bytes of a file (magic numbers, never the name) and
 * picks the codec: gzip (1f 8b; multi-member streams are read to the end, as zcat does),
 * zstd (28 b5 2f fd; several frames, skippable frames ignored), bzip2 ("BZh"; multistream
 * files such as Wikipedia's -multistream dumps are read to the end, as bzcat does), or
 * none (plain bytes). Memory is bounded: a fixed input buffer and the codec's state.
 *
 * Damage (truncated stream, corrupt data, trailing garbage that is not a new member) is
 * reported by lt_src_read() as LT_ERR_INPUT with WHERE = "PATH: compressed offset N"
 * (the offset in the file where decoding failed); every byte decoded before the damage
 * has already been returned. After an error the stream stays at end-of-file.
 * An unreadable file is LT_ERR_IO naming the path and the system's reason.
 *
 * Thread-safety: one lt_src belongs to one thread.
 */
#ifndef LT_DATAPREP_SOURCE_H
#define LT_DATAPREP_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/error.h" /* lt_status, lt_error */

typedef enum lt_codec { LT_CODEC_NONE, LT_CODEC_GZIP, LT_CODEC_ZSTD, LT_CODEC_BZIP2 } lt_codec;

typedef struct lt_src lt_src;

/* Open `path` ("-" is not accepted: corpus inputs are files). */
lt_status lt_src_open(lt_src **out, const char *path, lt_error *err);

/* Open over a memory buffer (tests, fuzzers); `name` is used in messages. The buffer
 * must outlive the stream. */
lt_status lt_src_open_mem(lt_src **out, const void *data, size_t len, const char *name, lt_error *err);

/* Copy up to `cap` of the next decompressed bytes into buf without consuming them (for
 * format detection); *got < cap only when the stream ends sooner. cap <= 64 KiB. */
lt_status lt_src_peek(lt_src *s, void *buf, size_t cap, size_t *got, lt_error *err);

/* Read up to `cap` decompressed bytes into buf; *got = 0 only at end of stream. */
lt_status lt_src_read(lt_src *s, void *buf, size_t cap, size_t *got, lt_error *err);

lt_codec lt_src_codec(const lt_src *s);
const char *lt_codec_name(lt_codec c);     /* "none", "gzip", "zstd", "bzip2" */
uint64_t lt_src_raw_offset(const lt_src *s); /* bytes of the file consumed so far */
uint64_t lt_src_raw_size(const lt_src *s);   /* file size (for progress), 0 if unknown */
uint64_t lt_src_offset(const lt_src *s);     /* decompressed bytes returned so far */
const char *lt_src_name(const lt_src *s);

void lt_src_close(lt_src *s); /* NULL-safe */

#endif /* LT_DATAPREP_SOURCE_H */
