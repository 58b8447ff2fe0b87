#!/usr/bin/env bash
# tests/tap-cmocka.sh — run a cmocka test program with TAP output (the automake
# LOG_COMPILER of the unit tests) and mend what cmocka 1.1.5 (Debian 12) gets wrong:
# it prints a skipped test as "not ok N # SKIP name", which TAP harnesses count as a
# failure. Such a line becomes "ok N - name # SKIP REASON", where REASON is the text of
# the test's last "# skip: REASON" line (tests print one before calling skip()).
# The test's exit status is kept.
set -o pipefail
CMOCKA_MESSAGE_OUTPUT=TAP "$@" | awk '
  /^# skip: / { reason = substr($0, 9); print; fflush(); next }
  /^not ok [0-9]+ # SKIP/ {
    n = $3; name = $0; sub(/^not ok [0-9]+ # SKIP */, "", name)
    printf "ok %s - %s # SKIP %s\n", n, name, (reason != "" ? reason : "skipped by the test")
    reason = ""; fflush(); next
  }
  { print; fflush() }'
