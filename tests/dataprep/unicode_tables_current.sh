#!/usr/bin/env bash
# tests/dataprep/unicode_tables_current.sh — dataprep/unicode_tables.c is what
# scripts/gen-unicode-tables.py generates (from PyPI unicodedata2==16.0.0). TAP.
: "${top_srcdir:?}"
echo "1..1"
out=$("${PYTHON:-python3}" "$top_srcdir/scripts/gen-unicode-tables.py" --check 2>&1)
rc=$?
case $rc in
  0) echo "ok 1 - dataprep/unicode_tables.c is current" ;;
  2) echo "ok 1 - # SKIP cannot regenerate: $(echo "$out" | head -n 1)" ;;
  *) echo "not ok 1 - dataprep/unicode_tables.c differs from scripts/gen-unicode-tables.py's output"
     echo "$out" | head -n 10 | sed 's/^/# /' ;;
esac
