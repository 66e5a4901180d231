"""The server soak (tests/soak/server_soak.py), short: two rounds of the same 150 seeded-random
requests (chat and completions, streaming and not, structured outputs, invalid requests, n > 1,
clients leaving mid-stream, mid-answer or mid-body) on a server whose small KV pool preempts,
with prefix caching off so that the KV bytes in use must come back to exactly 0. Every request
not abandoned gets a complete answer or an OpenAI-shaped error, the server ends idle, and its
memory after round 2 is within tolerance of round 1's. The long runs: docs/soak.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "soak"))
from server_soak import soak  # noqa: E402


@pytest.mark.soak
def test_server_soak_short():
    summary = soak(requests=150, rounds=2, concurrency=48, seed=5, prefix_caching=False,
                   timeout=300)
    assert len(summary["rounds"]) == 2
