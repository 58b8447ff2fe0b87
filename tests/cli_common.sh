# tests/cli_common.sh — the command-line contract every longtail program keeps
# (CONTRACTS.md): --help/--version answer on stdout with status 0; usage and config
# errors print "PROGRAM: error: WHAT (WHERE)" (+ "hint:") on stderr with status 2; the
# built-in `config` command prints an effective config that loads back unchanged.
# Sourced by tests/<stage>/cli.sh with PROG (program name) and BIN (path), which may add
# its own checks with `check` and then calls `finish` (the TAP plan comes last). Emits TAP.

: "${top_srcdir:?}" "${top_builddir:?}" "${PROG:?}" "${BIN:?}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lt-cli-$PROG.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0
# check NAME EXPECTED-STATUS STDOUT-PATTERN STDERR-PATTERN -- ARGS...
check() {
  local name=$1 want=$2 outpat=$3 errpat=$4; shift 5
  n=$((n + 1))
  "$BIN" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  local why=""
  [ "$got" = "$want" ] || why="exit status $got, expected $want"
  if [ -z "$why" ] && [ -n "$outpat" ] && ! grep -qE -- "$outpat" "$tmp/out"; then why="stdout lacks /$outpat/"; fi
  if [ -z "$why" ] && [ -n "$errpat" ] && ! grep -qE -- "$errpat" "$tmp/err"; then why="stderr lacks /$errpat/"; fi
  if [ -z "$why" ]; then
    echo "ok $n - $PROG: $name"
  else
    echo "not ok $n - $PROG: $name: $why"
    sed 's/^/# stdout: /' "$tmp/out" | head -20
    sed 's/^/# stderr: /' "$tmp/err" | head -20
    fails=$((fails + 1))
  fi
}

check "--help lists commands" 0 "^Usage: $PROG \[OPTIONS\] COMMAND" "" -- --help
check "--version" 0 "^$PROG \(longtail\) [0-9]+\.[0-9]+" "" -- --version
check "no command is a usage error" 2 "" "^$PROG: error: no command given$" --
check "unknown command, with hint" 2 "" "^hint: did you mean 'config'\?" -- confgi
check "unknown option" 2 "" "^$PROG: error: unknown option '--bogus'$" -- --bogus config
check "unknown config key names it and suggests" 2 "" "hint: did you mean 'context_len'\?" \
  -- config --set plan.contxt_len=4K
check "example config is valid" 0 "^\[plan\]" "" -- config --config "$top_srcdir/etc/longtail.ini"

# The dump loads back and dumps the same values (origins aside).
n=$((n + 1))
if "$BIN" config --config "$top_srcdir/etc/longtail.ini" --set plan.steps=3 >"$tmp/a.ini" 2>"$tmp/err" &&
   "$BIN" config --config "$tmp/a.ini" >"$tmp/b.ini" 2>>"$tmp/err" &&
   diff <(sed 's/ *;.*$//' "$tmp/a.ini") <(sed 's/ *;.*$//' "$tmp/b.ini") >"$tmp/diff"; then
  echo "ok $n - $PROG: config dump loads back unchanged"
else
  echo "not ok $n - $PROG: config dump loads back unchanged"
  sed 's/^/# /' "$tmp/err" "$tmp/diff" 2>/dev/null | head -20
fi

# A bad value names the file and line.
printf '[plan]\nmem = eighty\n' >"$tmp/bad.ini"
check "bad value names file:line" 2 "" "bad.ini:2" -- config --config "$tmp/bad.ini"

finish() {
  echo "1..$n"
  exit 0
}
