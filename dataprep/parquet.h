/*
 * dataprep/parquet.h — the values of one string column of a Parquet file, row by row.
 *
 * The format: parquet-format (https://github.com/apache/parquet-format), README.md (file
 * layout), src/main/thrift/parquet.thrift (the metadata), Encodings.md (PLAIN, the
 * RLE/bit-packed hybrid, dictionary encoding). A file is
 *     "PAR1" <column chunks of row group 0> ... <row group N-1> <FileMetaData> <u32 len> "PAR1"
 * with the FileMetaData (Thrift compact protocol, dataprep/parquet_thrift.h) at the end,
 * so the file is read by offset, never as a stream: through a byte-range accessor over a
 * file (pread) or a memory buffer, the same code for both.
 *
 * What is read: one top-level column of physical type BYTE_ARRAY (a string, or plain
 * binary), REQUIRED or OPTIONAL (a null is a value with is_null set), from every row group
 * of a range; data pages v1 and v2 and the dictionary page; encodings PLAIN and
 * PLAIN_DICTIONARY / RLE_DICTIONARY (definition levels and dictionary indices in the
 * RLE/bit-packed hybrid); codecs UNCOMPRESSED, SNAPPY, GZIP, ZSTD. Nested or repeated
 * columns, other encodings (DELTA_*) and codecs (LZ4, BROTLI, LZO), encrypted files and
 * column chunks in other files are refused with a message saying so.
 *
 * Memory: the footer while it is opened, then per row group what its column chunk needs
 * — the dictionary page, the current data page and their decompressed forms; never the
 * whole file. Every length read from the file is checked against the file size (and the
 * page sizes against what the codec really produces) before anything is sized by it.
 *
 * Errors: a damaged file (bad magic, a footer length that does not fit, bad Thrift, a page
 * that does not decompress, a dictionary index out of range, counts that disagree, ...) is
 * LT_ERR_INPUT with WHERE = "PATH: footer" or "PATH: row group G, page at offset N";
 * a column that is missing, nested or not a string is LT_ERR_INPUT naming the columns the
 * file has; an unreadable file is LT_ERR_IO.
 *
 * Thread-safety: one lt_pq_reader belongs to one thread.
 */
#ifndef LT_DATAPREP_PARQUET_H
#define LT_DATAPREP_PARQUET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h" /* lt_status, lt_error */

typedef struct lt_pq_reader lt_pq_reader;

/* Open the file `path` (mem == NULL) or the buffer mem[0..mem_len) named `path` in
 * messages (the buffer must outlive the reader). column == NULL reads the footer only
 * (row group counts); otherwise the column to read and the row groups
 * [rg_begin, rg_end) (rg_end 0: to the last; rg_begin == the count: none). */
lt_status lt_pq_open(lt_pq_reader **out, const char *path, const void *mem, size_t mem_len, const char *column,
                     uint32_t rg_begin, uint32_t rg_end, lt_error *err);

uint32_t lt_pq_row_groups(const lt_pq_reader *r); /* in the file */
uint64_t lt_pq_rows(const lt_pq_reader *r);       /* in the file (FileMetaData.num_rows) */

typedef struct lt_pq_value {
    const uint8_t *bytes; /* valid until the next lt_pq_next / lt_pq_close */
    size_t len;
    bool is_null;
    uint64_t row; /* 0-based row in the file */
    uint32_t row_group;
    uint64_t page_offset; /* file offset of the page header it came from */
} lt_pq_value;

/* The next row's value of the column: LT_OK with *eof false and *v filled, or *eof true
 * after the last row of the range; after an error the reader is at its end. */
lt_status lt_pq_next(lt_pq_reader *r, lt_pq_value *v, bool *eof, lt_error *err);

void lt_pq_close(lt_pq_reader *r); /* NULL-safe */

#endif /* LT_DATAPREP_PARQUET_H */
