/*
 * dataprep/dataprep.h — the interface of the dataprep stage (read corpora, tokenize, write token shards).
 *
 * The tokenizer has its own header (dataprep/tokenizer.h); the corpus readers and the
 * shard writer join this library with the dataprep issue.
 */
#ifndef LT_DATAPREP_H
#define LT_DATAPREP_H

#include "lib/cli.h" /* lt_cli_program */

/* The `dataprep` program: its commands (lib/cli.h runs them). */
extern const lt_cli_program dataprep_program;

/* Commands (each in its own file). */
int encode_command(lt_cli_ctx *ctx); /* dataprep/encode.c */

#endif
