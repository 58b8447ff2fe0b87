#!/usr/bin/env bash
# tests/train/cli.sh — the `trainer` program keeps the command-line contract (tests/cli_common.sh).
PROG=trainer
BIN=${top_builddir:?}/train/trainer
. "${top_srcdir:?}/tests/cli_common.sh"
finish
