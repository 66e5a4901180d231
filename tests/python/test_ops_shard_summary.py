"""tools/gpu/ops_shard_summary.py: the ops stage's one line when every op case ran in a process
of its own. A passed case, a skipped one (CPU backends only), a case with a failed check, one cut
off by its timeout (no last line, exit 124) and one that never reported must each be counted as
what they are, and the bad ones named."""

import subprocess
import sys

from conftest import REPO


def summary_of(folder):
    out = subprocess.run([sys.executable, str(REPO / "tools/gpu/ops_shard_summary.py"),
                          str(folder)], check=True, capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def write_case(folder, name, text, code):
    (folder / f"{name}.log").write_text(text)
    with open(folder / "exit.txt", "a") as f:
        f.write(f"{name} {code}\n")


def test_every_kind_of_case_is_counted(tmp_path):
    names = ["good", "cpu_only", "broken", "slow", "lost"]
    (tmp_path / "cases.txt").write_text("\n".join(names) + "\n")
    write_case(tmp_path, "good", "[ RUN  ] good\n[  OK  ] good (12 checks)\n"
               "1 cases, 12 checks, 0 failed checks, 0 failed cases, 0 skipped\n", 0)
    write_case(tmp_path, "cpu_only", "[ SKIP ] cpu_only: for cpu backends only\n"
               "0 cases, 0 checks, 0 failed checks, 0 failed cases, 1 skipped\n", 0)
    write_case(tmp_path, "broken", "[ RUN  ] broken\n  FAIL x: y\n[ FAIL ] broken (5 checks)\n"
               "1 cases, 5 checks, 1 failed checks, 1 failed cases, 0 skipped\n", 1)
    write_case(tmp_path, "slow", "[ RUN  ] slow\n", 124)
    line = summary_of(tmp_path)  # "lost" has neither a log nor an exit status
    assert line.startswith("1 cases passed, 3 failed or unfinished, 1 skipped; 17 checks, 1 failed"), line
    assert "broken (exit 1)" in line and "slow (timed out)" in line, line
    assert "lost (no summary, exit None)" in line, line


def test_all_passing(tmp_path):
    (tmp_path / "cases.txt").write_text("a\nb\n")
    for name in ("a", "b"):
        write_case(tmp_path, name, f"[  OK  ] {name} (3 checks)\n"
                   "1 cases, 3 checks, 0 failed checks, 0 failed cases, 0 skipped\n", 0)
    assert summary_of(tmp_path) == "2 cases passed, 0 failed or unfinished, 0 skipped; 6 checks, 0 failed"
