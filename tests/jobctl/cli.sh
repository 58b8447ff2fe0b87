#!/usr/bin/env bash
# tests/jobctl/cli.sh — the `jobctl` program keeps the command-line contract (tests/cli_common.sh).
PROG=jobctl
BIN=${top_builddir:?}/jobctl/jobctl
. "${top_srcdir:?}/tests/cli_common.sh"
finish
