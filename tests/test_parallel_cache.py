"""Parallel linting, the result cache and the pre-filter (issue 8)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint import cache as cache_mod
from torchlint import engine, parallel
from torchlint.cli import LintRun
from torchlint.config import Config
from torchlint.finding import Applicability, Edit, FileResult, Finding, Fix, Location
from torchlint.prefilter import could_match_triggers, naive_bracket_depth, pattern_for

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
BAD = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).view(-1)\n"


def make_run(files, tmp_path=None, jobs=1, no_cache=True, cache_dir=None, config=None, select=("TL",), ignore=()):
    args = argparse.Namespace(jobs=jobs, no_cache=no_cache, cache_dir=cache_dir)
    return LintRun(args, config or Config(root=tmp_path or Path.cwd()), list(select), list(ignore), files=list(files))


def fixture_files():
    return sorted(str(p) for p in FIXTURES.rglob("*.py"))


def keyed(results):
    return [(r.path, [(f.code, f.start, f.end, f.message, f.fix) for f in r.findings]) for r in results]


def write_bad_files(tmp_path, count):
    files = []
    for i in range(count):
        path = tmp_path / f"m{i:02d}.py"
        path.write_text(BAD if i % 2 == 0 else "x = 1\n")
        files.append(str(path))
    return files


# --- parallel ------------------------------------------------------------------------------

def test_jobs_give_the_same_results_in_input_order():
    files = fixture_files()
    assert len(files) >= parallel.MIN_PARALLEL_FILES
    one = parallel.lint_paths(make_run(files, jobs=1))
    two = parallel.lint_paths(make_run(files, jobs=2))
    assert [r.path for r in one] == files
    assert keyed(one) == keyed(two)
    assert any(r.findings for r in one)


def test_jobs_match_the_plain_runner():
    from torchlint.runner import lint_files

    files = fixture_files()
    expected = lint_files(files, Config(), ["TL"], [])
    assert keyed(parallel.lint_paths(make_run(files, jobs=2))) == keyed(expected)


def test_batches_cover_every_file_once(tmp_path):
    files = write_bad_files(tmp_path, 30)
    batches = parallel._batches(files, 2)
    indices = sorted(index for batch in batches for index, _ in batch)
    assert indices == list(range(30))


def test_a_subpackage_goes_to_the_worker_of_the_scripts_above_it(tmp_path):
    """`main.py` imports `src/model.py`: split over two workers, each would parse the model."""
    files = []
    for i, lines in enumerate([700, 650, 600, 550, 500, 450, 400, 350, 300, 280, 260, 240, 220, 200, 180]):
        other = tmp_path / f"example{i:02d}" / "main.py"
        other.parent.mkdir()
        other.write_text("x = 1\n" * lines)
        files.append(str(other))
    project = tmp_path / "translation"
    for name, lines in (("main.py", 190), ("src/model.py", 130), ("src/data.py", 120), ("src/deep/more.py", 30),
                        ("modular/modular/engine.py", 20)):  # `modular/` has no file of its own
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("y = 2\n" * lines)
        files.append(str(path))
    batches = parallel._batches(files, 2)
    holding = [batch for batch in batches if any("translation" in path for _, path in batch)]
    assert len(holding) == 1
    assert {path for _, path in holding[0] if "translation" in path} == set(files[-5:])
    assert sorted(index for batch in batches for index, _ in batch) == list(range(len(files)))


def test_few_files_stay_in_process(tmp_path, monkeypatch):
    files = write_bad_files(tmp_path, parallel.MIN_PARALLEL_FILES - 1)
    monkeypatch.setattr(parallel, "_run_pool", lambda *a: pytest.fail("pool started for few files"))
    results = parallel.lint_paths(make_run(files, jobs=4))
    assert [r.path for r in results] == files


def test_workers_never_import_torch(tmp_path):
    files = write_bad_files(tmp_path, 12)
    code = (
        "import sys, argparse\n"
        "from torchlint import parallel\n"
        "from torchlint.cli import LintRun\n"
        "from torchlint.config import Config\n"
        "import concurrent.futures.process as p\n"
        f"files = {files!r}\n"
        "def probe():\n"
        "    return sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "run = LintRun(argparse.Namespace(jobs=2, no_cache=True, cache_dir=None), Config(), ['TL'], [], files=files)\n"
        "results = parallel.lint_paths(run)\n"
        "assert sum(len(r.findings) for r in results) == 6, results\n"
        "assert not probe(), probe()\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "with ProcessPoolExecutor(1, mp_context=parallel._context(), initializer=parallel._init_worker,\n"
        "                         initargs=(parallel.Linter(Config(), ['TL'], [], None),)) as pool:\n"
        "    assert pool.submit(probe).result() == []\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


# --- cache ---------------------------------------------------------------------------------

def test_cache_directory_layout_and_hits(tmp_path, monkeypatch):
    files = write_bad_files(tmp_path, 3)
    cache_dir = tmp_path / "cache"
    first = parallel.lint_paths(make_run(files, tmp_path, no_cache=False, cache_dir=str(cache_dir)))
    assert (cache_dir / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (cache_dir / ".gitignore").read_text().splitlines()[-1] == "*"
    import torchlint.runner as runner

    monkeypatch.setattr(runner, "lint_data", lambda *a: pytest.fail("cache miss on an unchanged file"))
    second = parallel.lint_paths(make_run(files, tmp_path, no_cache=False, cache_dir=str(cache_dir)))
    assert keyed(first) == keyed(second)


def test_cache_key_covers_content_config_and_rules(tmp_path):
    cache = cache_mod.Cache(tmp_path)
    base = cache.key(b"x = 1\n", ("TL004",), "py")
    assert base == cache.key(b"x = 1\n", ("TL004",), "py")
    assert base != cache.key(b"x = 2\n", ("TL004",), "py")
    assert base != cache.key(b"x = 1\n", ("TL004", "TL005"), "py")
    assert base != cache.key(b"x = 1\n", ("TL004",), "ipynb")
    assert base != cache_mod.Cache(tmp_path, "other-rules").key(b"x = 1\n", ("TL004",), "py")


def test_ignored_rule_is_not_served_from_cache(tmp_path):
    files = write_bad_files(tmp_path, 1)
    cache_dir = str(tmp_path / "cache")
    assert parallel.lint_paths(make_run(files, tmp_path, no_cache=False, cache_dir=cache_dir))[0].findings
    again = parallel.lint_paths(make_run(files, tmp_path, no_cache=False, cache_dir=cache_dir, ignore=["TL004"]))
    assert not [f for f in again[0].findings if f.code == "TL004"]


def test_fingerprint_is_kept_while_the_sources_are_unchanged(tmp_path, monkeypatch):
    """The digest of torchlint's sources is reused from its memo while every file's mtime and
    size match, recomputed (the same digest) when they do not, and not written under -B."""
    memo = tmp_path / "fingerprint.json"
    monkeypatch.setattr(cache_mod, "_fingerprint_memo", lambda: str(memo))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    cache_mod.fingerprint.cache_clear()
    try:
        first = cache_mod.fingerprint()
        kept = json.loads(memo.read_text())
        assert kept["digest"] == first and kept["sources"]
        assert all(not entry[0].startswith(("verify/", "output/", "runtime/")) for entry in kept["sources"])
        # A memo that matches is trusted: its digest is what the next run uses.
        kept["digest"] = "0" * 32
        memo.write_text(json.dumps(kept))
        cache_mod.fingerprint.cache_clear()
        assert cache_mod.fingerprint() == "0" * 32
        # A source whose stamp changed: hashed again, to the real digest.
        kept["sources"][0][1] += 1
        memo.write_text(json.dumps(kept))
        cache_mod.fingerprint.cache_clear()
        assert cache_mod.fingerprint() == first
        memo.unlink()
        monkeypatch.setattr(sys, "dont_write_bytecode", True)
        cache_mod.fingerprint.cache_clear()
        assert cache_mod.fingerprint() == first and not memo.exists()
    finally:
        cache_mod.fingerprint.cache_clear()


def test_finding_json_round_trip_with_fix_and_cell():
    finding = Finding(
        code="TL004", message="m é", path="a.ipynb", start=Location(2, 3), end=Location(2, 9),
        rule_name="view-after-transpose", cell=3,
        fix=Fix("Insert", (Edit("x\n", Location(2, 3), Location(2, 9)), Edit("", Location(1, 1), Location(1, 1))),
                Applicability.UNSAFE),
    )
    data = json.loads(json.dumps(cache_mod.finding_to_json(finding)))
    assert cache_mod.finding_from_json(data, "a.ipynb") == finding
    diag = Finding("TL901", "cannot parse", "b.py", Location(1, 1), Location(1, 1), "syntax-error", is_diagnostic=True)
    assert cache_mod.finding_from_json(cache_mod.finding_to_json(diag), "b.py") == diag


def _logs(cache_dir):
    return sorted((Path(cache_dir) / cache_mod.FORMAT).glob("entries-*.log"))


def test_corrupt_entries_are_misses(tmp_path):
    files = write_bad_files(tmp_path, 1)
    cache_dir = tmp_path / "cache"
    expected = keyed(parallel.lint_paths(make_run(files, tmp_path, no_cache=False, cache_dir=str(cache_dir))))
    logs = _logs(cache_dir)
    assert len(logs) == 1
    good = logs[0].read_bytes()
    key = good[:64].decode()
    check = cache_mod._check(key.encode(), b'{"key":1}').decode()
    for garbage in (b"", b"{not json", b'{"key": "other", "findings": []}\n', b"\xff\xfe\n",
                    good[:-1],  # the newline missing: a line still being written
                    good[:-20] + b"\n",  # cut short
                    good.replace(b'"findings"', b'"findingz"'),  # edited: the check fails
                    f"{key} {check} {{\"key\":1}}\n".encode(),  # a good check on foreign JSON
                    f"{key} {'0' * 32} {{\"failed\":false,\"findings\":[]}}\n".encode()):
        logs[0].write_bytes(garbage)
        assert keyed(parallel.lint_paths(make_run(files, tmp_path, no_cache=False, cache_dir=str(cache_dir)))) == expected
    # the corrupt manifest too
    for manifest in (cache_dir / cache_mod.FORMAT).glob("rules-*.json"):
        manifest.write_bytes(b"[[[")
    assert keyed(parallel.lint_paths(make_run(files, tmp_path, no_cache=False, cache_dir=str(cache_dir)))) == expected


def _result(path="a.py", code="TL004"):
    return FileResult(path, [Finding(code, "m", path, Location(1, 1), Location(1, 2))])


def test_the_last_good_line_of_a_key_wins(tmp_path):
    cache = cache_mod.Cache(tmp_path / "c")
    key = "ab" * 32
    cache.put(key, _result(code="TL001"))
    cache.put(key, _result(code="TL002"))
    cache.flush()
    log = _logs(tmp_path / "c")[0]
    with open(log, "ab") as handle:  # another writer's line cut short, then garbage
        handle.write(log.read_bytes()[:90] + b"\n" + b"\x00" * 10 + b"\n")
    assert [f.code for f in cache_mod.Cache(tmp_path / "c").get(key, "b.py").findings] == ["TL002"]


def test_an_entry_appended_after_a_cut_line_is_whole(tmp_path):
    cache = cache_mod.Cache(tmp_path / "c")
    cache.put("a" * 64, _result(code="TL001"))
    cache.flush()
    log = _logs(tmp_path / "c")[0]
    log.write_bytes(log.read_bytes()[:-30])  # the writer died mid-line
    cache.put("a" + "b" * 63, _result(code="TL002"))
    cache.flush()
    fresh = cache_mod.Cache(tmp_path / "c")
    assert fresh.get("a" * 64, "x.py") is None
    assert fresh.get("a" + "b" * 63, "x.py").findings[0].code == "TL002"


def test_entries_wait_in_memory_until_a_flush(tmp_path, monkeypatch):
    cache = cache_mod.Cache(tmp_path / "c")
    cache.put("ab" * 32, _result())
    assert cache.get("ab" * 32, "a.py") is not None  # the same bytes again in this run hit
    assert not _logs(tmp_path / "c")
    cache.flush()
    assert len(_logs(tmp_path / "c")) == 1
    assert cache_mod.Cache(tmp_path / "c").get("ab" * 32, "a.py").findings[0].code == "TL004"
    monkeypatch.setattr(cache_mod, "FLUSH_EVERY", 3)
    for digit in "012":
        cache.put(digit * 64, _result())
    assert len(_logs(tmp_path / "c")) == 4  # the third put flushed: an interrupted run keeps its work


def test_a_log_past_its_limit_keeps_its_newest_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "MAX_LOG_BYTES", 4000)
    cache = cache_mod.Cache(tmp_path / "c")
    keys = [f"a{i:063x}" for i in range(60)]  # one log
    for key in keys:
        cache.put(key, _result())
        cache.flush()
    log = _logs(tmp_path / "c")[0]
    assert log.stat().st_size <= 4000
    fresh = cache_mod.Cache(tmp_path / "c")
    assert fresh.get(keys[-1], "a.py") is not None
    assert fresh.get(keys[0], "a.py") is None
    hits = [key for key in keys if fresh.get(key, "a.py") is not None]
    assert hits == keys[len(keys) - len(hits):]  # the newest, in order
    assert not list((tmp_path / "c").rglob(".tmp-*"))


def test_a_cold_run_writes_one_log_per_key_digit_at_most(tmp_path):
    files = write_bad_files(tmp_path, 40)
    cache_dir = tmp_path / "cache"
    parallel.lint_paths(make_run(files, tmp_path, no_cache=False, cache_dir=str(cache_dir)))
    written = sorted(p.name for p in cache_dir.rglob("*") if p.is_file())
    logs = [name for name in written if name.startswith("entries-")]
    assert 1 <= len(logs) <= 16
    assert set(written) - set(logs) - {"CACHEDIR.TAG", ".gitignore"} == {
        name for name in written if name.startswith("rules-")}
    # two distinct contents (BAD and "x = 1"): two entries, however many files
    assert sum(len(p.read_bytes().splitlines()) for p in _logs(cache_dir)) == 2


def test_workers_write_their_entries(tmp_path):
    files = write_bad_files(tmp_path, 2 * parallel.MIN_PARALLEL_FILES)
    for index, path in enumerate(files):  # every file different: every one an entry
        Path(path).write_text(Path(path).read_text() + f"y{index} = 0\n")
    cache_dir = tmp_path / "cache"
    first = keyed(parallel.lint_paths(make_run(files, tmp_path, jobs=2, no_cache=False, cache_dir=str(cache_dir))))
    assert sum(len(p.read_bytes().splitlines()) for p in _logs(cache_dir)) == len(files)
    assert keyed(parallel.lint_paths(make_run(files, tmp_path, jobs=2, no_cache=False, cache_dir=str(cache_dir)))) == first


def test_internal_errors_are_never_cached(tmp_path):
    cache = cache_mod.Cache(tmp_path / "c")
    result = FileResult("a.py", [Finding("TL903", "boom", "a.py", Location(1, 1), Location(1, 1), is_diagnostic=True)])
    result.internal_error = True
    cache.put("ab" * 32, result)
    cache.flush()
    assert cache.get("ab" * 32, "a.py") is None
    assert not _logs(tmp_path / "c")


def test_no_cache_writes_nothing(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", "bad.py"], cwd=tmp_path,
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 1, result.stderr
    assert not (tmp_path / ".torchlint_cache").exists()


def test_default_and_configured_cache_dir(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = lambda *a: subprocess.run([sys.executable, "-m", "torchlint", *a], cwd=tmp_path,  # noqa: E731
                                    capture_output=True, text=True, env=env, timeout=120)
    assert run("bad.py").returncode == 1
    assert (tmp_path / ".torchlint_cache" / "CACHEDIR.TAG").is_file()
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\ncache-dir = "build/tlcache"\n')
    assert run("bad.py").returncode == 1
    assert (tmp_path / "build" / "tlcache" / ".gitignore").is_file()
    assert run("--cache-dir", "elsewhere", "bad.py").returncode == 1
    assert (tmp_path / "elsewhere" / "CACHEDIR.TAG").is_file()


def test_concurrent_processes_share_one_cache(tmp_path):
    """Like pre-commit running several torchlint processes at once over one cache directory."""
    files = write_bad_files(tmp_path, 10)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "torchlint", "--output-format", "json", "--cache-dir", "shared-cache",
               "--jobs", "1", *files]
    processes = [subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
                 for _ in range(4)]
    outputs = [p.communicate(timeout=180) for p in processes]
    assert [p.returncode for p in processes] == [1] * 4, [o[1] for o in outputs]
    reports = [json.loads(out) for out, _ in outputs]
    assert all(report == reports[0] for report in reports)
    assert len(reports[0]) == 5
    leftovers = [p for p in (tmp_path / "shared-cache").rglob(".tmp-*")]
    assert not leftovers
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(again.stdout) == reports[0]


@pytest.mark.parametrize("options, config", [
    ([], None),
    (["--ignore", "TL003", "--extend-select", "TL1"], None),  # validating codes imports no rule
    (["--output-format", "json"], None),  # each finding's rule address comes from file names
    (["--output-format", "json-lines"], None),
    (["--output-format", "github"], None),
    (["--output-format", "grouped"], None),
    (["--output-format", "full"], None),
    ([], '[tool.torchlint]\nignore = ["TL005"]\nper-file-ignores = {"x.py" = ["TL1"]}\n'),
])
def test_warm_run_imports_no_parser(tmp_path, options, config):
    files = write_bad_files(tmp_path, 10)
    if config is not None:
        (tmp_path / "pyproject.toml").write_text(config)
    code = (
        "import sys\n"
        "from torchlint.cli import main\n"
        f"rc = main(['-q', '--cache-dir', {str(tmp_path / 'c')!r}, *{options!r}, *{files!r}])\n"
        "assert rc == 1, rc\n"
        "print('libcst' in sys.modules)\n"
    )
    cwd = tmp_path if config is not None else ROOT
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    first = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    second = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert first.stdout.strip().endswith("True"), first.stderr
    assert second.stdout.strip().endswith("False"), second.stderr


def test_a_miss_beside_a_manifest_imports_libcst_through_the_startup_cache(tmp_path):
    """Pre-commit's usual run: the cache holds the rule manifest, the changed file misses. LibCST
    must then be imported inside startup.compiled_dataclass_methods (the rules' import), not first
    by the engine's module, which would compile LibCST's generated methods from source again."""
    files = write_bad_files(tmp_path, 2)
    code = (
        "import sys\n"
        "from torchlint.cli import main\n"
        f"main(['-q', '--cache-dir', {str(tmp_path / 'c')!r}, sys.argv[1]])\n"
        "names = list(sys.modules)\n"
        "print(names.index('torchlint.startup') < names.index('libcst'))\n"
    )
    for path in files:  # the first run writes the manifest; the second misses beside it
        run = subprocess.run([sys.executable, "-c", code, path], cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
        assert run.stdout.strip().endswith("True"), run.stdout + run.stderr


@pytest.mark.parametrize("options", [["--output-format", "sarif"], ["--list-rules"], ["--diff"]])
def test_paths_that_need_every_rule_import_them_through_the_startup_cache(tmp_path, options):
    """SARIF's rule descriptors and the rule listings import every rule (their docs), and --diff
    the fixer: through startup.compiled_dataclass_methods, never the stock LibCST import."""
    files = write_bad_files(tmp_path, 1)
    code = (
        "import sys, io, contextlib\n"
        "from torchlint.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['--cache-dir', {str(tmp_path / 'c')!r}, '--exit-zero', *{options!r}, *{files!r}])\n"
        "names = list(sys.modules)\n"
        "print(names.index('torchlint.startup') < names.index('libcst'))\n"
    )
    for _ in range(2):  # cold, then warm (where only the descriptors need LibCST)
        run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert run.stdout.strip().endswith("True"), run.stdout + run.stderr


def test_rule_codes_from_file_names_are_the_rules_codes():
    from torchlint.rule_codes import known_rule_codes
    from torchlint.rules import all_codes

    assert known_rule_codes() == all_codes()


def test_rule_addresses_from_file_names_are_the_rules_addresses():
    from torchlint.rule_codes import rule_url
    from torchlint.rules import all_rules

    assert all(rule_url(rule.code) == rule.url() for rule in all_rules())
    assert rule_url("TL901") is None


# --- pre-filter ----------------------------------------------------------------------------

def test_prefilter_is_one_regex_over_all_triggers():
    pattern = pattern_for([("view",), (".to(", ".cuda(")])
    assert pattern.search("x.cuda()") and pattern.search("a.view(1)") and not pattern.search("x = 1")
    assert pattern_for([("view",), ()]) is None  # a rule without triggers matches everything
    assert could_match_triggers("anything", [()])
    assert not could_match_triggers("anything", [])


def test_prefilter_skips_without_parsing(tmp_path, monkeypatch):
    (tmp_path / "plain.py").write_text("def f(a):\n    return a\n")
    monkeypatch.setattr(engine, "parse", lambda *a: pytest.fail("parsed a file without any trigger"))
    results = parallel.lint_paths(make_run([str(tmp_path / "plain.py")], tmp_path, select=["TL004"]))
    assert results[0].findings == []


def test_prefilter_still_reports_undecodable_files(tmp_path):
    (tmp_path / "latin.py").write_bytes(b"# coding: ascii\nx = '\xe9'\n")
    results = parallel.lint_paths(make_run([str(tmp_path / "latin.py")], tmp_path, select=["TL004"]))
    assert [f.code for f in results[0].findings] == ["TL902"]


def test_prefilter_disabled_gives_the_same_findings_on_fixtures(monkeypatch):
    files = fixture_files()
    enabled = keyed(parallel.lint_paths(make_run(files)))
    monkeypatch.setattr(engine, "PREFILTER_ENABLED", False)
    assert keyed(parallel.lint_paths(make_run(files))) == enabled


def test_bracket_depth_guard():
    assert naive_bracket_depth("f(x)\n" * 500) == 1
    assert naive_bracket_depth("x = " + "(" * 300 + ")" * 300) == 300
