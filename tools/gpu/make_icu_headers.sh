#!/usr/bin/env bash
# ICU headers for a GPU machine whose image has libicuuc but no headers (the tokenizer, and so
# the model since V4.1's Engram token map, needs them). Run here, carry the result:
#
#   tools/gpu/make_icu_headers.sh [MAJOR]      # MAJOR: the machine's libicuuc.so.MAJOR (default 74)
#
# Copies this machine's ICU headers (Debian libicu-dev) into .deps/icu/include (ignored by git) and
# sets their symbol-version suffix to _MAJOR, so calls bind to the machine's versioned entry points
# (ICU renames every C function to name_MAJOR). Only the stable C API is used, which both versions
# have. tools/gpu/run_model_cuda.sh links .deps/icu/lib/libicuuc.so to the machine's library.
set -euo pipefail
cd "$(dirname "$0")/../.."
MAJOR="${1:-74}"
[ -f /usr/include/unicode/uvernum.h ] || { echo "no ICU headers here: apt-get install libicu-dev" >&2; exit 1; }
rm -rf .deps/icu && mkdir -p .deps/icu/include
cp -r /usr/include/unicode .deps/icu/include/
sed -i -E "s/^#define U_ICU_VERSION_SUFFIX _[0-9]+/#define U_ICU_VERSION_SUFFIX _${MAJOR}/" \
  .deps/icu/include/unicode/uvernum.h
grep -q "U_ICU_VERSION_SUFFIX _${MAJOR}" .deps/icu/include/unicode/uvernum.h
echo ".deps/icu: headers with suffix _${MAJOR} ($(du -sh .deps/icu | cut -f1)); carry .deps/icu"
