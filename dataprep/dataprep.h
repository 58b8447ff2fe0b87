/*
 * dataprep/dataprep.h — the interface of the dataprep stage (read corpora, tokenize, write token shards).
 *
 * The corpus readers, the tokenizer and the shard writer join this library with the
 * tokenizer and dataprep issues; for now it holds the program's command table.
 */
#ifndef LT_DATAPREP_H
#define LT_DATAPREP_H

#include "lib/cli.h" /* lt_cli_program */

/* The `dataprep` program: its commands (lib/cli.h runs them). */
extern const lt_cli_program dataprep_program;

#endif
