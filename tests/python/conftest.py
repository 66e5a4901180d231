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
def v4_tokenizer_path() -> pathlib.Path:
    # The package's copy, byte-identical to shared/tokenizers/deepseek_v4/tokenizer.json.
    return REPO / "python" / "deepinfer" / "data" / "deepseek_v4" / "tokenizer.json"


def run_cli(*args, input=None, check=False, env=None):
    """Runs the `deepinfer` command line as a user would (through the console-script module)."""
    cmd = [sys.executable, "-m", "deepinfer.cli", *map(str, args)]
    return subprocess.run(cmd, input=input, capture_output=True, check=check, env=env,
                          text=isinstance(input, str) or input is None)


@pytest.fixture
def cli():
    return run_cli
