#!/usr/bin/env bash
# tests/tap-cmocka.sh — run a cmocka test program with TAP output (the automake
# LOG_COMPILER of the unit tests) and mend what cmocka 1.1.5 (Debian 12) gets wrong:
# it prints a skipped test as "not ok N # SKIP name", which TAP harnesses count as a
# failure. Such a line becomes "ok N - name # SKIP REASON", where REASON is the text of
# the test's last "# skip: REASON" line (tests print one before calling skip()).
# The test's exit status is kept. The program runs under `timeout`
# ($LONGTAIL_TEST_TIMEOUT seconds, default 1200): a hang becomes a failure, not a stalled run.
set -o pipefail
limit=${LONGTAIL_TEST_TIMEOUT:-1200}
CMOCKA_MESSAGE_OUTPUT=TAP timeout -k 30 "$limit" "$@" | awk '
  /^# skip: / { reason = substr($0, 9); print; fflush(); next }
  /^not ok [0-9]+ # SKIP/ {
    n = $3; name = $0; sub(/^not ok [0-9]+ # SKIP */, "", name)
    printf "ok %s - %s # SKIP %s\n", n, name, (reason != "" ? reason : "skipped by the test")
    reason = ""; fflush(); next
  }
  { print; fflush() }'
rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "Bail out! $* ran past ${limit} s (LONGTAIL_TEST_TIMEOUT) and was killed"
fi
exit "$rc"
