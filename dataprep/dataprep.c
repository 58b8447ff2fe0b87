/*
 * dataprep/dataprep.c — the dataprep program's command table.
 */
#include "dataprep/dataprep.h"

const lt_cli_program dataprep_program = {
    "dataprep",
    "Offline data preparation: read corpus files (Common Crawl WET, JSONL, Wikipedia XML),\n"
    "tokenize them, and write zstd token shards with an index and a length profile.",
    NULL, 0,
};
