#!/bin/sh
# autogen.sh — generate ./configure from configure.ac and Makefile.am (needs autoconf,
# automake, pkg-config; scripts/setup-deps.sh installs them).
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf --install --force --warnings=all "$@"
