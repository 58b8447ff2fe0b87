#!/usr/bin/env bash
# tests/plans/cli.sh — the `planner` program keeps the command-line contract (tests/cli_common.sh).
PROG=planner
BIN=${top_builddir:?}/plans/planner
. "${top_srcdir:?}/tests/cli_common.sh"
finish
