"""Fixtures of the end-to-end tests: `deepinfer serve` started on loopback (an ephemeral port)
with the embedded default model, talked to with the official `openai` and `anthropic` clients,
and stopped with SIGTERM (which must drain and exit 0).

The server is the installed console script (`deepinfer` next to the running Python, as
`pip install .` puts it), else DEEPINFER_SERVE_BIN (e.g. build/dev/tools/cli/deepinfer).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = REPO / "models" / "default"


def _binary() -> list[str]:
    env = os.environ.get("DEEPINFER_SERVE_BIN")
    if env:
        return [env]
    here = Path(sys.executable).parent / "deepinfer"
    if here.exists():
        return [str(here)]
    found = shutil.which("deepinfer")
    if found:
        return [found]
    pytest.skip("no deepinfer executable (pip install . first)")


class Server:
    """A running `deepinfer serve`; .url, .port, .pid, .log(), .stop()."""

    def __init__(self, *args: str, env: dict | None = None, model: bool = True):
        cmd = [*_binary(), "serve", *(["--model", str(DEFAULT_MODEL)] if model else []),
               "--port", "0", "--served-model-name", "default", *args]
        e = dict(os.environ)
        e.setdefault("DEEPINFER_NUM_THREADS", "2")
        if env:
            e.update(env)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, env=e)
        self.lines: list[str] = []
        self.port = None
        ready = threading.Event()

        def pump():
            for line in self.proc.stderr:
                self.lines.append(line)
                m = re.search(r"on http://[\d.]+:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(120) or self.port is None:
            self.proc.kill()
            raise RuntimeError("deepinfer serve did not start:\n" + "".join(self.lines))
        self.url = f"http://127.0.0.1:{self.port}"
        self.pid = self.proc.pid

    def log(self) -> str:
        return "".join(self.lines)

    def stop(self, sig=signal.SIGTERM, timeout=60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("deepinfer serve did not exit after SIGTERM:\n" + self.log())
        time.sleep(0.05)
        return self.proc.returncode


def metrics(url: str) -> dict[str, float]:
    """GET /metrics as {name{labels}: value} (and {name: value} for unlabelled-by-us names)."""
    import httpx

    out: dict[str, float] = {}
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.rsplit(" ", 1)
        out[key] = float(value)
        out.setdefault(key.split("{", 1)[0], float(value))
    return out


@pytest.fixture(scope="session")
def server():
    # Small KV blocks so that multi-turn prompts of a few hundred tokens hit the prefix cache.
    s = Server("--kv-block-size", "32", "--max-num-seqs", "32", "--max-model-len", "2048")
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="session")
def client(server):
    from openai import OpenAI

    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def aclient(server):
    from anthropic import Anthropic

    return Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=120)
