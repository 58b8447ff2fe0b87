#!/usr/bin/env bash
# scripts/setup-deps.sh — install everything longtail needs on Debian 12. Idempotent:
# packages already present are not reinstalled, and nothing is fetched when all are.
#
#   Debian packages: the build tools, every library configure looks for, Open MPI +
#                    PMIx, the Slurm daemons and tools for the private test cluster.
#   PyPI packages:   the outside references the tests compare against, installed in a
#                    virtual environment ($LONGTAIL_VENV, default
#                    ~/.local/share/longtail/venv) that configure picks up as $PYTHON.
#
# Options: --no-python (skip the venv), --no-apt (skip Debian packages).
set -euo pipefail

APT_PACKAGES=(
  # build
  build-essential autoconf automake libtool pkg-config git ca-certificates
  # libraries found by configure
  libzstd-dev libsqlite3-dev coinor-libcbc-dev libinih-dev zlib1g-dev libbz2-dev
  libexpat1-dev libpcre2-dev libcmocka-dev libxxhash-dev libsnappy-dev
  # CBLAS GEMMs of the trainer's CPU kernels
  libopenblas-dev
  # MPI (CPU ranks) and the process-management interface srun uses
  openmpi-bin libopenmpi-dev libpmix-dev
  # Slurm (private single-node cluster for tests/demos; munge is a package dependency,
  # the private cluster itself runs with auth/none)
  slurm-wlm slurmctld slurmd slurm-client
  # tools used by tests and users
  sqlite3 zstd bzip2 gzip python3 python3-venv iproute2 procps valgrind
  # libFuzzer + sanitizer runtimes + symbolizer for the fuzz targets (scripts/fuzz.sh)
  clang-14 libclang-rt-14-dev llvm-14
  # a decimal-comma locale, so tests can check that output never depends on the locale
  locales
)
# PyPI requirements of the reference tests. tiktoken is pinned: its Unicode tables (16.0
# in 0.14) are what dataprep/unicode_tables.c follows; unicodedata2 regenerates them.
# torch (autodiff reference of the trainer's gradients) and transformers + safetensors
# (the Hugging Face checkpoint interop) are pinned so CI installs them once and keeps them.
PIP_PACKAGES=(numpy tiktoken==0.14.0 unicodedata2==16.0.0 torch==2.15.0 transformers==5.24.0
  safetensors==0.8.0 tokenizers==0.23.3 pyarrow==26.0.1)

do_apt=1
do_python=1
for arg in "$@"; do
  case "$arg" in
    --no-apt) do_apt=0 ;;
    --no-python) do_python=0 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "setup-deps.sh: error: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

say() { printf 'setup-deps: %s\n' "$*" >&2; }
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi

if [ "$do_apt" = 1 ]; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
      missing+=("$p")
    fi
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${#missing[@]} Debian packages: ${missing[*]}"
    if [ "$(id -u)" != 0 ] && [ -z "$SUDO" ]; then
      say "error: not root and no sudo; install as root: apt-get install ${missing[*]}"; exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # daemons must not start from package scripts (containers without systemd)
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    say "all ${#APT_PACKAGES[@]} Debian packages present"
  fi
fi

if [ "$do_apt" = 1 ] && ! locale -a 2>/dev/null | grep -qi '^de_DE\.utf-\?8$'; then
  say "generating the de_DE.UTF-8 locale (tests check locale-independent number output)"
  $SUDO localedef -i de_DE -f UTF-8 de_DE.UTF-8 || say "warning: could not generate de_DE.UTF-8"
fi

if [ "$do_python" = 1 ]; then
  venv=${LONGTAIL_VENV:-$HOME/.local/share/longtail/venv}
  if [ ! -x "$venv/bin/python3" ]; then
    say "creating Python virtual environment $venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
  fi
  need=()
  for p in "${PIP_PACKAGES[@]}"; do
    # installed, and at the pinned version if one is given
    "$venv/bin/python3" - "$p" <<'PY' 2>/dev/null || need+=("$p")
import sys, importlib.metadata as md
name, _, want = sys.argv[1].partition("==")
have = md.version(name)
sys.exit(0 if not want or have == want else 1)
PY
  done
  if [ "${#need[@]}" -gt 0 ]; then
    say "installing PyPI packages into $venv: ${need[*]}"
    "$venv/bin/python3" -m pip install -q --disable-pip-version-check "${need[@]}"
  else
    say "all PyPI packages present in $venv"
  fi
fi
say "done"
