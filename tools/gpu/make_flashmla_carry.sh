#!/usr/bin/env bash
# FlashMLA's sources with the CUTLASS headers they build against, packed to travel to a GPU
# machine (which has no network) for the sparse-attention peer of issue 19 (run_model_cuda.sh
# stage `flashmla`): .deps/flashmla.tar.xz (ignored by git; never committed), ~1.2 MB.
#
#   tools/gpu/make_flashmla_carry.sh FLASHMLA_GIT_DIR
#   # FLASHMLA_GIT_DIR: a clone of github.com/deepseek-ai/FlashMLA (the workplace's `fetch`
#   # tool gives one, e.g. /work/.mirror/deepseek-ai+FlashMLA/repo); then device run with
#   # carry [".deps/carry.tar.xz", ".deps/flashmla.tar.xz"]
#
# FlashMLA pins CUTLASS as a git submodule; the headers here come from PyPI's nvidia-cutlass
# wheel instead (include/ and tools/util/include/, the two folders its setup.py adds),
# version CUTLASS_VERSION (default 4.2.0.0), which may differ from the pinned commit: the
# archive's FLASHMLA_CARRY.txt records both.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC="${1:?usage: $0 FLASHMLA_GIT_DIR}"
CUTLASS_VERSION="${CUTLASS_VERSION:-4.2.0.0}"
PIP="${PIP:-.venv/bin/pip}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/wheel"
git -C "$SRC" archive HEAD | tar -x -C "$work/src"
"$PIP" download -q --no-deps -d "$work/wheel" "nvidia-cutlass==$CUTLASS_VERSION"
python3 - "$work/wheel" "$work/src/csrc/cutlass" <<'PY'
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("nvidia_cutlass-*.whl"))
dest = pathlib.Path(sys.argv[2])
for prefix, sub in (("cutlass_library/source/include/", "include"),
                    ("cutlass_library/source/tools/util/include/", "tools/util/include")):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(prefix) and not name.endswith("/"):
                out = dest / sub / name[len(prefix):]
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(z.read(name))
PY
{
  echo "FlashMLA $(git -C "$SRC" rev-parse HEAD)"
  echo "CUTLASS headers: PyPI nvidia-cutlass $CUTLASS_VERSION (FlashMLA pins $(git -C "$SRC" ls-tree HEAD csrc/cutlass | awk '{print $3}'))"
} > "$work/src/FLASHMLA_CARRY.txt"
mkdir -p .deps
tar -C "$work" -cJf .deps/flashmla.tar.xz src
echo ".deps/flashmla.tar.xz: $(du -h .deps/flashmla.tar.xz | cut -f1); carry it beside .deps/carry.tar.xz"
