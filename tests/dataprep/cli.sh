#!/usr/bin/env bash
# tests/dataprep/cli.sh — the `dataprep` program keeps the command-line contract (tests/cli_common.sh).
PROG=dataprep
BIN=${top_builddir:?}/dataprep/dataprep
. "${top_srcdir:?}/tests/cli_common.sh"
