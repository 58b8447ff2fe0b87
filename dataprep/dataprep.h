/*
 * dataprep/dataprep.h — the interface of the dataprep stage (read corpora, tokenize, write token shards).
 *
 * The library's parts have their own headers: tokenizer.h (byte-level BPE), source.h
 * (decompressing streams), reader.h (corpus formats), wikitext.h, shard.h (token shards
 * and index), dataset.h (an output directory), profile.h (length profile).
 */
#ifndef LT_DATAPREP_H
#define LT_DATAPREP_H

#include "lib/cli.h" /* lt_cli_program */

/* The `dataprep` program: its commands (lib/cli.h runs them). */
extern const lt_cli_program dataprep_program;

/* Commands (each in its own file). */
int encode_command(lt_cli_ctx *ctx);  /* dataprep/encode.c */
int run_command(lt_cli_ctx *ctx);     /* dataprep/run.c */
int cat_command(lt_cli_ctx *ctx);     /* dataprep/tools.c */
int lengths_command(lt_cli_ctx *ctx); /* dataprep/tools.c */
int verify_command(lt_cli_ctx *ctx);  /* dataprep/tools.c */
int wikitext_command(lt_cli_ctx *ctx); /* dataprep/tools.c */
int profile_command(lt_cli_ctx *ctx); /* dataprep/profile_cmd.c */
int export_command(lt_cli_ctx *ctx);  /* dataprep/export.c */

#endif
