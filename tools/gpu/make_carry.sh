#!/usr/bin/env bash
# What a GPU machine needs besides the tracked tree, packed small enough to travel with it (the
# device tool sends at most 64 MiB, and the tree is ~57 MiB): one compressed archive,
# .deps/carry.tar.xz (ignored by git), which tools/gpu/run_model_cuda.sh unpacks into .deps/.
#
#   tools/gpu/make_carry.sh [BUILD_DIR]   # BUILD_DIR: a built tree here (default build/test)
#   # then: device run with carry [".deps/carry.tar.xz"]
#
# It holds
#   .deps/cmake   the headers of CLI11, nlohmann_json and Boost that our sources include (taken
#                 from BUILD_DIR's dependency records, so only what is used: ~9 MB of Boost's
#                 ~150), with the Debian packages' CMake package files beside them, laid out as
#                 under /usr so their relative paths hold (CMAKE_PREFIX_PATH=.deps/cmake)
#   .deps/icu     ICU headers renamed to the machine's libicuuc (tools/gpu/make_icu_headers.sh)
#   .deps/replay_prompt.txt  the first 30,000 characters of the held-out text of the default
#                 model (data/default_model/text/val.txt, made by tools/train/prepare_data.py
#                 text), the long prompt of the bounded-replay benchmark (stage replay)
# Needs the Debian packages scripts/setup.sh installs (libcli11-dev, nlohmann-json3-dev,
# libboost-dev, libicu-dev) and a configured and built BUILD_DIR (Ninja).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build/test}"
[ -f "$BUILD/build.ninja" ] || { echo "no Ninja build in $BUILD: run scripts/test.sh first" >&2; exit 1; }
rm -rf .deps/cmake && mkdir -p .deps/cmake
ninja -C "$BUILD" -t deps | grep -o '/usr/include/\(boost\|CLI\|nlohmann\)/[^ ]*' | sort -u |
  while read -r h; do mkdir -p ".deps/cmake/$(dirname "${h#/usr/}")" && cp "$h" ".deps/cmake/${h#/usr/}"; done
cp /usr/include/boost/version.hpp .deps/cmake/include/boost/  # read by Boost's package version check
mkdir -p .deps/cmake/share/cmake .deps/cmake/lib/x86_64-linux-gnu/cmake
cp -r /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json .deps/cmake/share/cmake/
cp -r /usr/lib/x86_64-linux-gnu/cmake/Boost-* /usr/lib/x86_64-linux-gnu/cmake/boost_headers-* \
  /usr/lib/x86_64-linux-gnu/cmake/BoostDetectToolset-* .deps/cmake/lib/x86_64-linux-gnu/cmake/
tools/gpu/make_icu_headers.sh >/dev/null
parts=(cmake icu)
if [ -f data/default_model/text/val.txt ]; then
  head -c 30000 data/default_model/text/val.txt > .deps/replay_prompt.txt
  parts+=(replay_prompt.txt)
else
  echo "no data/default_model/text/val.txt (python3 tools/train/prepare_data.py text): no replay prompt" >&2
fi
tar -C .deps -cJf .deps/carry.tar.xz "${parts[@]}"
echo ".deps/carry.tar.xz: $(du -h .deps/carry.tar.xz | cut -f1) (${parts[*]}); carry [\".deps/carry.tar.xz\"]"
