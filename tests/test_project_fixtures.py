"""Multi-file fixtures (`fixtures/project/<case>/`): the value model reads the user's own imported
modules, and a file gets the same findings however it is linted: the CLI on the case directory,
the CLI on that one file (what pre-commit passes), the flake8 plugin on that file (what editors
run) and `runner.lint_file` (what `torchlint run` lints the script with; a slow test runs
`torchlint run` end to end on a runnable tree). Findings are the `# expect:` markers in every file of the case; a case is checked
for the codes its markers name (and those a `# checks: TLnnn` comment names)."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest

from markers import compare, read_markers
from torchlint.cli import main

CASES_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "project"
CASES = sorted(p for p in CASES_DIR.iterdir() if p.is_dir())
_CHECKS = re.compile(r"#\s*checks:\s*(TL\d{3}(?:\s*,\s*TL\d{3})*)")


def _files(case: Path):
    return sorted(case.rglob("*.py"))


def _codes(case: Path) -> set:
    codes = set()
    for path in _files(case):
        text = path.read_text(encoding="utf-8")
        codes.update(m.code for m in read_markers(text))
        for match in _CHECKS.finditer(text):
            codes.update(c.strip() for c in match.group(1).split(","))
    return codes


def _run(args, output_format="json"):
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        target = Path(directory) / "out"
        main(["--exit-zero", "-j", "1", "--output-format", output_format, "-o", str(target), *args])
        text = target.read_text(encoding="utf-8") if target.exists() else ""
    return json.loads(text) if text.strip() else []


def _cli(paths, capsys=None, extra=()) -> list:
    return _run(["--no-cache", *extra, *map(str, paths)])


class _Finding:
    def __init__(self, code, row, column, message):
        self.code, self.message = code, message
        self.start = type("L", (), {"row": row, "column": column})()


def _check(path: Path, findings, codes) -> None:
    source = path.read_text(encoding="utf-8")
    mine = [f for f in findings if f.code in codes]
    missing, unexpected = compare([m for m in read_markers(source) if m.code in codes], mine)
    assert not missing and not unexpected, f"{path}: missing {missing}, unexpected {unexpected}"


def _by_file(items) -> dict:
    found = {}
    for item in items:
        found.setdefault(str(Path(item["filename"]).resolve()), []).append(
            _Finding(item["code"], item["location"]["row"], item["location"]["column"], item["message"]))
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_directory(case: Path, capsys) -> None:
    codes = _codes(case)
    found = _by_file(_cli([case], capsys))
    for path in _files(case):
        _check(path, found.get(str(path.resolve()), []), codes)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_file_alone(case: Path, capsys) -> None:
    codes = _codes(case)
    for path in _files(case):
        found = _by_file(_cli([path], capsys))
        _check(path, found.get(str(path.resolve()), []), codes)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_flake8_plugin_on_each_file(case: Path) -> None:
    from torchlint.flake8_plugin import TorchLintChecker

    codes = _codes(case) - {"TL901"}  # flake8 reports a syntax error itself (E999)
    for path in _files(case):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        results = TorchLintChecker(None, lines, str(path)).run()
        findings = [_Finding(text.split()[0], row, column + 1, text) for row, column, text, _ in results]
        _check(path, findings, codes)


def test_messages_name_the_other_file(capsys) -> None:
    found = _cli([CASES_DIR / "dropout_in_sibling" / "predict.py"], capsys)
    assert [f["code"] for f in found] == ["TL107"]
    assert "`Net` (model.py:4)" in found[0]["message"]
    helper = _cli([CASES_DIR / "permuted_helper" / "train.py"], capsys)
    assert "utils.py:5" in helper[0]["message"]
    moved = _cli([CASES_DIR / "device_from_config" / "train.py"], capsys)
    assert [f["code"] for f in moved] == ["TL007", "TL007"]
    assert all("moved by `model = nn.Linear(4, 2).to(device)` (`device`, config.py:3):" in f["message"] for f in moved)


def test_sarif_carries_the_other_file_as_a_related_location(capsys) -> None:
    log = _run(["--no-cache", str(CASES_DIR / "dropout_in_sibling" / "predict.py")], "sarif")
    (result,) = log["runs"][0]["results"]
    (related,) = result["relatedLocations"]
    assert related["physicalLocation"]["artifactLocation"]["uri"].endswith("dropout_in_sibling/model.py")
    assert related["physicalLocation"]["region"]["startLine"] == 4


SCHEMA = Path(__file__).resolve().parent / "sarif-schema-2.1.0.json"
_ORIGIN = re.compile(r"\b((?:[\w.-]+/)*[\w.-]+\.py):(\d+)\b")


def test_sarif_related_locations_of_every_case_validate_and_match_the_messages() -> None:
    """Every case at once: the log validates against the official SARIF 2.1.0 schema, every
    `other.py:N` a message names is a related location (that file, that line), and every related
    location points at a line of a file that exists (in circular/, b.py's own `Head`, reached
    through a.py's `Body`)."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    log = _run(["--no-cache", str(CASES_DIR)], "sarif")
    cls = jsonschema.validators.validator_for(schema)
    errors = sorted(cls(schema).iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])
    results = log["runs"][0]["results"]
    crossing = [r for r in results if r.get("relatedLocations")]
    assert len(crossing) >= 15, len(crossing)
    base = Path.cwd()
    for result in results:
        here = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        related = {(loc["physicalLocation"]["artifactLocation"]["uri"], loc["physicalLocation"]["region"]["startLine"])
                   for loc in result.get("relatedLocations", [])}
        for uri, line in related:
            target = base / uri
            assert target.is_file() and line <= len(target.read_text(encoding="utf-8").splitlines()), (uri, line)
        for name, line in _ORIGIN.findall(result["message"]["text"]):
            assert any(uri.endswith("/" + name) and row == int(line) for uri, row in related), \
                (here, result["message"]["text"], related)


def test_sarif_related_locations_of_a_factory_in_a_re_exporting_package() -> None:
    log = _run(["--no-cache", str(CASES_DIR / "reexport_package" / "evaluate.py")], "sarif")
    first = min(log["runs"][0]["results"], key=lambda r: r["locations"][0]["physicalLocation"]["region"]["startLine"])
    assert first["ruleId"] == "TL107"
    assert "(built by `build()`, pkg/factory.py:4)" in first["message"]["text"]
    assert [(loc["message"]["text"], loc["physicalLocation"]["artifactLocation"]["uri"].rsplit("/", 3)[-3:],
             loc["physicalLocation"]["region"]["startLine"]) for loc in first["relatedLocations"]] == [
        ("pkg/factory.py:4", ["reexport_package", "pkg", "factory.py"], 4),
        ("pkg/net.py:4", ["reexport_package", "pkg", "net.py"], 4)]


def test_editing_the_sibling_relints_the_importer(tmp_path: Path, capsys) -> None:
    case = tmp_path / "case"
    shutil.copytree(CASES_DIR / "dropout_in_sibling", case)
    cache = tmp_path / "cache"
    args = ["--cache-dir", str(cache)]

    def lint():
        return [f["code"] for f in _run([*args, str(case)]) if f["code"] == "TL107"]

    assert lint() == ["TL107"]
    assert lint() == ["TL107"]  # from the cache
    model = case / "model.py"
    model.write_text(model.read_text().replace("self.drop = nn.Dropout(0.5)", "self.drop = nn.Identity()"))
    assert lint() == []  # model.py changed: predict.py is linted again
    model.write_text(model.read_text().replace("self.drop = nn.Identity()", "self.drop = nn.Dropout(0.5)"))
    assert lint() == ["TL107"]


def test_editing_the_sibling_relints_its_importers_and_nothing_else(tmp_path: Path, monkeypatch) -> None:
    """The files a warm run lints again (a cache miss stores a result): after `model.py` changes,
    `model.py` and `predict.py`, which imports it; `other.py`, which imports nothing of the
    project, is served from the cache."""
    from torchlint.cache import Cache

    case = tmp_path / "case"
    shutil.copytree(CASES_DIR / "dropout_in_sibling", case)
    (case / "other.py").write_text("import torch\n\nx = torch.zeros(3)\nprint(x.sum())\n")
    linted = []
    put = Cache.put

    def recording(self, key, result):
        linted.append(Path(result.path).name)
        return put(self, key, result)

    monkeypatch.setattr(Cache, "put", recording)
    args = ["--cache-dir", str(tmp_path / "cache"), str(case)]

    def lint():
        linted.clear()
        codes = [f["code"] for f in _run(args) if f["code"] == "TL107"]
        return codes, sorted(linted)

    assert lint() == (["TL107"], ["model.py", "other.py", "predict.py"])
    assert lint() == (["TL107"], [])  # all from the cache
    model = case / "model.py"
    model.write_text(model.read_text().replace("self.drop = nn.Dropout(0.5)", "self.drop = nn.Identity()"))
    assert lint() == ([], ["model.py", "predict.py"])
    assert lint() == ([], [])


def test_switched_off_the_project_is_not_read(monkeypatch, capsys) -> None:
    monkeypatch.setenv("TORCHLINT_NO_PROJECT", "1")
    assert _cli([CASES_DIR / "permuted_helper" / "train.py"], capsys) == []


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_what_torchlint_run_lints(case: Path) -> None:
    """`torchlint run script.py` lints the script with `runner.lint_file`: the same findings."""
    from torchlint.config import Config
    from torchlint.runner import lint_file

    codes = _codes(case)
    for path in _files(case):
        result = lint_file(str(path), Config(root=case), ["TL"], [])
        _check(path, [_Finding(f.code, f.start.row, f.start.column, f.message) for f in result.findings], codes)


def test_creating_the_imported_module_relints_the_importer(tmp_path: Path) -> None:
    case = tmp_path / "case"
    shutil.copytree(CASES_DIR / "dropout_in_sibling", case)
    model = case / "model.py"
    text = model.read_text()
    model.unlink()
    args = ["--cache-dir", str(tmp_path / "cache"), str(case / "predict.py")]
    assert [f["code"] for f in _run(args) if f["code"] == "TL107"] == []  # `Net` unknown: silent
    model.write_text(text)
    assert [f["code"] for f in _run(args) if f["code"] == "TL107"] == ["TL107"]


BROKEN_MODEL = "import torch.nn as nn\n\n\nclass Net(nn.Module)\n    def __init__(self):\n        super().__init__()\n"


def test_a_sibling_that_does_not_parse(tmp_path: Path) -> None:
    """The importing file is linted as if the sibling were missing; the run reports one
    diagnostic, the sibling's own syntax error (kept out of fixtures/: no fixture fails to parse)."""
    case = tmp_path / "case"
    shutil.copytree(CASES_DIR / "broken_sibling", case)
    (case / "model.py").write_text(BROKEN_MODEL)
    whole = [(Path(f["filename"]).name, f["code"], f["location"]["row"]) for f in _cli([case])]
    assert sorted(whole) == [("model.py", "TL901", 4), ("train.py", "TL003", 19)]
    alone = [(f["code"], f["location"]["row"]) for f in _cli([case / "train.py"])]
    assert alone == [("TL003", 19)]
    from torchlint.flake8_plugin import TorchLintChecker

    lines = (case / "train.py").read_text().splitlines(keepends=True)
    assert [(text.split()[0], row) for row, _, text, _ in TorchLintChecker(None, lines, str(case / "train.py")).run()] \
        == [("TL003", 19)]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_prefilter_sound_across_files(case: Path, monkeypatch) -> None:
    """Every rule enabled: the same findings with the pre-filter on and off, file by file, so a
    rule whose trigger stands only in an imported file is marked `cross_file_triggers`."""
    from torchlint import engine

    for path in _files(case):
        def key(findings):
            return sorted((f["code"], f["location"]["row"], f["location"]["column"]) for f in findings
                          if not f["code"].startswith("TL9"))
        on = key(_cli([path]))
        monkeypatch.setattr(engine, "PREFILTER_ENABLED", False)
        off = key(_cli([path]))
        monkeypatch.setattr(engine, "PREFILTER_ENABLED", True)
        assert on == off, path


RUNNABLE_MODEL = '''import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.drop = nn.Dropout(0.5)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.drop(self.fc(x)))


class PlainNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, x):
        return self.body(x)
'''
RUNNABLE_PREDICT = '''import torch

from model import Net, PlainNet

torch.manual_seed(0)
net, plain = Net(), PlainNet()
with torch.no_grad():
    for step in range(3):
        batch = torch.randn(2, 4)
        print(net(batch).argmax(1))
        print(plain(batch).argmax(1))
'''


@pytest.mark.slow  # a torch script under `torchlint run`, end to end (CI and --runslow run it)
@pytest.mark.skipif(__import__("importlib").util.find_spec("torch") is None, reason="torch is not installed")
def test_torchlint_run_reports_the_same_cross_file_finding(tmp_path: Path) -> None:
    """The fourth way: `torchlint run predict.py` executes a small runnable project and reports
    the static finding `torchlint predict.py` gives (same place, the same proof through model.py),
    in its JSON report and as a SARIF related location; the plain model stays silent."""
    import os
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(RUNNABLE_MODEL)
    (tmp_path / "predict.py").write_text(RUNNABLE_PREDICT)
    static = [(f["code"], f["location"]["row"], f["location"]["column"], f["message"])
              for f in _cli([tmp_path / "predict.py"])]
    assert [s[:3] for s in static] == [("TL107", 10, 15)] and "`Net` (model.py:4)" in static[0][3]
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1")

    def run(output_format):
        result = subprocess.run([sys.executable, "-m", "torchlint", "run", "--output-format", output_format,
                                 "predict.py"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
        assert result.returncode == 1, result.stderr[-2000:]
        return json.loads(result.stdout)

    report = run("json")
    found = [(f["code"], f["location"]["row"], f["location"]["column"], f["message"]) for f in report["findings"]
             if f["source"] == "static"]
    assert found == static
    (finding,) = report["findings"]
    assert finding["status"] == "CONFIRMED" and finding["filename"] == "predict.py"
    log = run("sarif")
    (result,) = log["runs"][0]["results"]
    (related,) = result["relatedLocations"]
    assert related["message"]["text"] == "model.py:4"
    assert related["physicalLocation"]["artifactLocation"]["uri"] == "model.py"
    assert related["physicalLocation"]["region"]["startLine"] == 4
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    assert not list(cls(schema).iter_errors(log))
