"""tools/gpu/run_groups.sh: several run_model_cuda.sh runs in one device call. Checked with a
stage name run_model_cuda.sh does not know (it then only writes its summary): each group gets its
own results folder and its settings (a quoted value with a space stays one value: else `env` runs
its second half as a command and the group exits 127), and a group with less than 40 s of the
deadline left is skipped, not started."""

import os
import subprocess

from conftest import REPO


def run_groups(tmp_path, deadline, *groups):
    env = dict(os.environ, OUT=str(tmp_path / "out"), BUILD_DIR=str(tmp_path / "build"),
               FLASHMLA_BG="0", DEADLINE=str(deadline))
    subprocess.run(["bash", str(REPO / "tools/gpu/run_groups.sh"), *groups], env=env, check=True,
                   timeout=120)
    return (tmp_path / "out" / "times.txt").read_text()


def test_each_group_runs_in_its_folder(tmp_path):
    times = run_groups(tmp_path, 300, "first|STAGES='no such' PERF_FILTER=x", "second|STAGES=none")
    assert "first exit 0" in times and "second exit 0" in times, times
    for name in ("first", "second"):
        summary = (tmp_path / "out" / name / "summary.txt").read_text()
        assert "done" in summary, summary


def test_a_group_past_the_deadline_is_skipped(tmp_path):
    times = run_groups(tmp_path, 30, "late|STAGES=none")
    assert "late skipped:" in times, times
    assert not (tmp_path / "out" / "late").exists()


def test_results_are_packed_beside_the_summaries(tmp_path):
    import tarfile
    run_groups(tmp_path, 300, "one|STAGES=none")
    out = tmp_path / "out"
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert left == ["one/summary.txt", "results.tgz", "times.txt"], left
    with tarfile.open(out / "results.tgz") as t:
        names = t.getnames()
    assert "./one/run.log" in names and "./one/summary.txt" in names, names
