"""Helpers for the tests of the repository's own scripts (tools/check_*.py, tests/reference):
import one as a module, and plant files in a temporary tree for a checker to read. A module of
its own, not conftest: `pytest tests/python tests/e2e` imports one `conftest` module name for
both folders, so names only tests/python's conftest defines are not importable from it."""

import importlib.util
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]


def load_script(rel: str):
    """The repository's Python file at `rel`, imported as a module."""
    spec = importlib.util.spec_from_file_location(pathlib.PurePath(rel).stem, REPO / rel)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_file(root: pathlib.Path, rel: str, text: str) -> None:
    """Writes `text` to root/rel, making its folders."""
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
