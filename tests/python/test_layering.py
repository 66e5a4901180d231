"""tools/check_layering.py, which the build runs: the real tree passes, and a forbidden include
(a module reaching up the graph, a front end reaching past the public API) fails naming the file,
the line and the rule; a known exception that no longer occurs must be removed."""

from conftest import REPO
from repo_scripts import load_script, write_file

layering = load_script("tools/check_layering.py")


def test_the_tree_passes():
    assert layering.check(REPO) == []


def test_forbidden_includes_fail(tmp_path):
    write_file(tmp_path, "src/io/reader.cc", '#include "io/reader.h"\n#include "model/model.h"\n')
    write_file(tmp_path, "src/kv/pool.cc", '#include "base/status.h"\n#include "io/model_config.h"\n')
    write_file(tmp_path, "tools/cli/x.cc", '#include "deepinfer/engine.h"\n\n#include "sched/scheduler.h"\n')
    write_file(tmp_path, "include/deepinfer/api.h", '#include "runtime/engine_core.h"\n')
    errors = layering.check(tmp_path)
    assert len(errors) == 3, errors
    assert any(e.startswith("src/io/reader.cc:2: module 'io' may not include \"model/model.h\"")
               for e in errors), errors
    assert any(e.startswith("tools/cli/x.cc:3: a front end may not include") for e in errors)
    assert any(e.startswith("include/deepinfer/api.h:1: the public API") for e in errors)


def test_the_public_api_and_front_ends_have_no_exceptions():
    assert layering.KNOWN == {}


def test_known_exceptions_pass_and_stale_ones_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(layering, "KNOWN", {"tools/cli/a.cc": {"tokenizer/tokenizer.h"},
                                            "tools/cli/b.cc": {"tokenizer/tokenizer.h"}})
    write_file(tmp_path, "src/base/status.h", "\n")
    write_file(tmp_path, "tools/cli/a.cc", '#include "tokenizer/tokenizer.h"\n')
    write_file(tmp_path, "tools/cli/b.cc", '#include "deepinfer/tokenizer.h"\n')
    errors = layering.check(tmp_path)
    assert errors == ["tools/cli/b.cc: no longer includes \"tokenizer/tokenizer.h\": remove it "
                      "from KNOWN in tools/check_layering.py"], errors
