"""Shared fixtures for the Python tests (they run against the installed `deepinfer` package,
or against a development build when PYTHONPATH points at <build>/python)."""

import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo_dir() -> pathlib.Path:
    return REPO


@pytest.fixture(scope="session")
def fixture_checkpoint(tmp_path_factory):
    """fixture_checkpoint("tests/data/model/v4_tiny_a/hf_fp32") -> the folder to load for a committed fixture
    folder: itself when it holds weights, else the weights its derive.json describes (a recipe over another
    committed checkpoint) materialized once per session into a temporary folder of the same name."""
    sys.path.insert(0, str(REPO / "tests" / "reference"))
    from derive_checkpoint import materialized_checkpoint

    made = {}

    def get(rel: str) -> pathlib.Path:
        if rel not in made:
            out = tmp_path_factory.mktemp("derived") / pathlib.PurePath(rel).name
            made[rel] = materialized_checkpoint(REPO / rel, out)
        return made[rel]

    return get


@pytest.fixture(scope="session")
def v4_tokenizer_path() -> pathlib.Path:
    # The package's copy, shared/tokenizers/deepseek_v4/tokenizer.json minified (the same JSON without whitespace).
    return REPO / "python" / "deepinfer" / "data" / "deepseek_v4" / "tokenizer.json"


def run_cli(*args, input=None, check=False, env=None):
    """Runs the `deepinfer` command line as a user would (through the console-script module)."""
    cmd = [sys.executable, "-m", "deepinfer.cli", *map(str, args)]
    return subprocess.run(cmd, input=input, capture_output=True, check=check, env=env,
                          text=isinstance(input, str) or input is None)


@pytest.fixture
def cli():
    return run_cli
