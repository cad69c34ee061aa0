"""The parts of `torchlint run` that need no torch: the command line split, the runtime
signatures, the reach probes, the project helpers, the reconciliation, the launcher's
`python SCRIPT` semantics, and the report formats."""

from __future__ import annotations

import ast
import json
import os
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from torchlint.finding import Finding, Location
from torchlint.runtime import launcher, project, signatures
from torchlint.runtime.command import UsageError, split_argv
from torchlint.runtime.observation import Observations
from torchlint.runtime.reach import Reach
from torchlint.runtime.reconcile import (CONFIRMED, FOUND_BY_RUN, NO_EVIDENCE, NOT_REACHED, RAN_WITHOUT_HARM,
                                         StaticFinding, reconcile)

ROOT = Path(__file__).resolve().parent.parent


# -- the command line ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["train.py"], ([], "train.py", None, [])),
    (["--max-steps", "5", "train.py", "--lr", "0.1"], (["--max-steps", "5"], "train.py", None, ["--lr", "0.1"])),
    (["-o", "r.json", "--anomaly", "train.py", "-m", "x"],
     (["-o", "r.json", "--anomaly"], "train.py", None, ["-m", "x"])),
    (["-m", "pkg.train", "--epochs", "1"], ([], None, "pkg.train", ["--epochs", "1"])),
    (["--", "-weird.py", "a"], ([], "-weird.py", None, ["a"])),
    ([], ([], None, None, [])),
])
def test_split_argv(argv, expected):
    assert split_argv(argv) == expected


@pytest.mark.parametrize("argv", [["-m"], ["--max-steps"], ["--"]])
def test_split_argv_errors(argv):
    with pytest.raises(UsageError):
        split_argv(argv)


def test_every_value_option_is_known_to_the_splitter():
    from torchlint.runtime.command import _VALUE_OPTIONS, build_parser

    takes_value = {option for action in build_parser()._actions if action.option_strings and action.nargs != 0
                   for option in action.option_strings}
    assert takes_value == _VALUE_OPTIONS


def test_select_and_ignore_apply_to_runtime_codes():
    from torchlint.runtime.command import _selected

    assert _selected("TL002", ["TL"], [])
    assert not _selected("TL002", ["TL"], ["TL002"])
    assert _selected("TL201", ["TL2"], []) and not _selected("TL002", ["TL2"], [])
    assert not _selected("TL007", ["ALL"], ["TL00"])


# -- signatures ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, message, family", [
    ("RuntimeError", "view size is not compatible with input tensor's size and stride (at least one dimension spans "
                     "across two contiguous subspaces). Use .reshape(...) instead.", signatures.VIEW_ERROR),
    ("RuntimeError", "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
     signatures.DEVICE_ERROR),
    ("RuntimeError", "Tensor on device meta is not on the expected device cpu!", signatures.DEVICE_ERROR),
    ("RuntimeError", "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same",
     signatures.DEVICE_ERROR),
    ("RuntimeError", "Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same",
     signatures.DTYPE_ERROR),
    ("RuntimeError", "mat1 and mat2 must have the same dtype, but got Half and Float", signatures.DTYPE_ERROR),
    ("AssertionError", "Torch not compiled with CUDA enabled", signatures.NO_CUDA),
    ("TypeError", "type torch.cuda.FloatTensor not available. Torch not compiled with CUDA enabled.",
     signatures.NO_CUDA),
    ("RuntimeError", "one of the variables needed for gradient computation has been modified by an inplace operation: "
                     "[torch.FloatTensor [3]], which is output 0 of Sigmoid, is at version 1; expected version 0 "
                     "instead.", signatures.SAVED_MODIFIED),
    ("RuntimeError", "a leaf Variable that requires grad is being used in an in-place operation.",
     signatures.LEAF_INPLACE),
    ("RuntimeError", "element 0 of tensors does not require grad and does not have a grad_fn",
     signatures.NO_GRAD_BACKWARD),
    ("IndexError", "invalid index of a 0-dim tensor. Use `tensor.item()` in Python", "TL201"),
    ("TypeError", "Tensor.backward() got an unexpected keyword argument 'retain_variables'", "TL203"),
    ("RuntimeError", "Legacy autograd function with non-static forward method is deprecated.", "TL205"),
    ("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)", "TL301"),
    ("ValueError", "Expected input batch_size (2) to match target batch_size (3).", "TL302"),
    ("RuntimeError", "shape '[-1, 400]' is invalid for input of size 2304", "TL302"),
    ("RuntimeError", "Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size can't be "
                     "greater than actual input size", "TL303"),
    ("RuntimeError", "Sizes of tensors must match except in dimension 1. Expected size 63 but got size 62", "TL304"),
    ("RuntimeError", "0D or 1D target tensor expected, multi-target not supported", "TL305"),
    ("RuntimeError", "Given groups=1, weight of size [6, 3, 3, 3], expected input[4, 1, 16, 16] to have 3 channels, "
                     "but got 1 channels instead", "TL301"),
    ("IndexError", "list index out of range", None),
    ("KeyError", "tensor(1)", "TL126"),
    ("KeyError", "'tensor(3, device='cuda:0')'", "TL126"),
    ("KeyError", "'missing'", None),
    ("NotImplementedError", 'Module [Net] is missing the required "forward" function', "TL128"),
])
def test_exception_families(kind, message, family):
    assert signatures.exception_family(kind, message) == family


@pytest.mark.parametrize("category, message, code", [
    ("UserWarning", "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad", "TL105"),
    ("UserWarning", "volatile was removed and now has no effect. Use `with torch.no_grad():` instead.", "TL202"),
    ("UserWarning", "size_average and reduce args will be deprecated, please use reduction='sum' instead.", "TL206"),
    ("UserWarning", "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0", "TL207"),
    ("FutureWarning", "`nn.init.xavier_uniform` is now deprecated in favor of `nn.init.xavier_uniform_`.", "TL208"),
    ("UserWarning", "`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", "TL208"),
    ("UserWarning", "some other warning", None),
    ("DeprecationWarning", "volatile was removed and now has no effect.", None),
])
def test_warning_codes(category, message, code):
    assert signatures.warning_code(category, message) == code


def test_async_keyword_syntax_error():
    assert signatures.is_async_keyword_syntax_error("    x = x.cuda(async=True)\n")
    assert signatures.is_async_keyword_syntax_error("y.to(device, async = True)")
    assert not signatures.is_async_keyword_syntax_error("async def f(): pass")
    assert not signatures.is_async_keyword_syntax_error(None)


def test_every_code_has_a_title_and_how_it_is_recognised():
    for code, entry in signatures.CODES.items():
        assert code.startswith("TL") and entry.title and entry.recognised_by


# -- reach probes --------------------------------------------------------------------------------------

SOURCE = '''\
"""docstring"""
from __future__ import annotations
import os


def used(x):
    y = [x,
         x]
    return len(y)


def unused():
    return os.sep


class Box:
    size = used(1)


if used(2) > 1:
    result = used(3)
else:
    result = unused()
'''


def _run_probed(tmp_path, lines):
    path = str(tmp_path / "probed.py")
    Path(path).write_text(SOURCE, encoding="utf-8")
    reach = Reach()
    reach.want(path, lines)
    code = reach.compile(SOURCE.encode(), path)
    reach.install()
    try:
        namespace = {"__name__": "probed"}
        exec(code, namespace)
    finally:
        reach.uninstall()
    return reach, path, namespace


def test_reach_probes_record_executed_statements_only(tmp_path):
    reach, path, namespace = _run_probed(tmp_path, [7, 8, 13, 17, 21, 23])
    assert namespace["result"] == 2 and namespace["__doc__"] == "docstring"
    assert reach.reached(path, 7, set()) is True  # first line of a two-line statement
    assert reach.reached(path, 8, set()) is True  # its continuation line
    assert reach.reached(path, 13, set()) is False  # the body of a function never called
    assert reach.reached(path, 17, set()) is True  # a class body
    assert reach.reached(path, 21, set()) is True
    assert reach.reached(path, 23, set()) is False  # the else branch


def test_reach_never_moves_docstrings_or_future_imports(tmp_path):
    reach, path, namespace = _run_probed(tmp_path, [1, 2])
    assert namespace["__doc__"] == "docstring"
    assert reach.reached(path, 1, set()) is None and reach.reached(path, 2, set()) is None


def test_reach_of_files_never_loaded_or_loaded_without_probes():
    reach = Reach()
    reach.want("/x/never.py", [3])
    assert reach.reached("/x/never.py", 3, set()) is False
    assert reach.reached("/x/never.py", 3, {"/x/never.py"}) is None


def test_reach_keeps_tracebacks_at_the_users_lines(tmp_path):
    source = "def f():\n    return 1 / 0\n\nf()\n"
    path = str(tmp_path / "fails.py")
    reach = Reach()
    reach.want(path, [2, 4])
    code = reach.compile(source.encode(), path)
    reach.install()
    try:
        with pytest.raises(ZeroDivisionError) as caught:
            exec(code, {"__name__": "fails"})
    finally:
        reach.uninstall()
    lines = [tb.tb_lineno for tb in _frames(caught.value.__traceback__) if tb.tb_frame.f_code.co_filename == path]
    assert lines == [4, 2]


def _frames(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def test_reach_imports_project_modules_with_probes(tmp_path, monkeypatch):
    package = tmp_path / "proj"
    package.mkdir()
    (package / "helper.py").write_text("def go():\n    return 41 + 1\n\ndef never():\n    return 0\n")
    reach = Reach()
    helper = str(package / "helper.py")
    reach.want(helper, [2, 5])
    monkeypatch.syspath_prepend(str(package))
    reach.install()
    try:
        import helper as imported  # noqa: F401 - loaded through the probing finder

        assert imported.go() == 42
    finally:
        reach.uninstall()
        sys.modules.pop("helper", None)
    assert reach.reached(helper, 2, set()) is True and reach.reached(helper, 5, set()) is False


# -- project helpers --------------------------------------------------------------------------------------

def test_user_files_exclude_installed_packages_and_torchlint(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "src").mkdir()
    script = tmp_path / "src" / "train.py"
    script.write_text("")
    root = project.find_project_root(str(script))
    assert root == str(tmp_path)
    files = project.Project(root)
    assert files.is_user_file(str(script))
    assert not files.is_user_file(str(tmp_path / ".venv" / "lib" / "site-packages" / "torch" / "nn.py"))
    assert not files.is_user_file("<frozen runpy>")
    assert not files.is_user_file(os.path.join(os.path.dirname(project.__file__), "session.py"))
    assert not files.is_user_file("/elsewhere/train.py")


def test_project_root_without_markers_is_the_scripts_directory(tmp_path):
    script = tmp_path / "alone.py"
    script.write_text("")
    assert project.find_project_root(str(script)) in (str(tmp_path), project.find_project_root(str(script)))


def test_imported_project_files_follow_imports(tmp_path):
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("from .net import Net\n")
    (tmp_path / "models" / "net.py").write_text("import torch\nfrom . import blocks\n")
    (tmp_path / "models" / "blocks.py").write_text("X = 1\n")
    (tmp_path / "utils.py").write_text("import os\n")
    script = tmp_path / "train.py"
    script.write_text("import utils\nfrom models import Net\nimport numpy\n")
    found = project.imported_project_files(str(script), [str(tmp_path)], project.Project(str(tmp_path)))
    names = [os.path.relpath(p, tmp_path) for p in found]
    assert names[0] == "train.py"
    assert set(names) == {"train.py", "utils.py", os.path.join("models", "__init__.py"),
                          os.path.join("models", "net.py"), os.path.join("models", "blocks.py")}


def test_attribute_and_container_lines(tmp_path):
    path = tmp_path / "net.py"
    path.write_text(textwrap.dedent('''\
        class Net:
            def __init__(self):
                self.layers = []
                self.layers.append(1)
                self.head, self.tail = 1, 2

            def forward(self, x):
                self.cache = x
                return x


        def train():
            losses = []
            total = 0
            for i in range(3):
                losses.append(i)
                total += i
                total = total + i
            return losses
        '''))
    namespace = {"__name__": "net"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    net = namespace["Net"]
    assert project.attribute_lines(net, "layers", ["__init__"]) == [(str(path), 3), (str(path), 4)]
    assert project.attribute_lines(net, "tail") == [(str(path), 5)]
    assert project.attribute_lines(net, "cache", ["forward"]) == [(str(path), 8)]
    assert project.class_span(net) == (str(path), 1, 9)
    scope = project.function_node(str(path), 12, "train")
    assert project.container_update_lines(scope, "losses") == [16]
    assert project.container_update_lines(scope, "total") == [17, 18]


def test_statement_span(tmp_path):
    path = tmp_path / "s.py"
    path.write_text("x = [1,\n     2]\nfor i in range(3):\n    y = i\n")
    assert project.statement_span(str(path), 2) == (1, 2)
    assert project.statement_span(str(path), 3) == (3, 3)
    assert project.statement_span(str(path), 4) == (4, 4)


# -- reconciliation ----------------------------------------------------------------------------------------

def _finding(code, path, row, column=5):
    return StaticFinding(path, Finding(code, f"static {code}", path, Location(row, column), Location(row, column + 1)))


def test_reconcile_statuses(tmp_path):
    path = str(tmp_path / "t.py")
    Path(path).write_text("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\n")
    observations = Observations()
    observations.add("TL002", None, "m", "ev", path=path, line=2)
    observations.add("TL003", None, "m", "ev3", path=path, line=5, related=((path, 6),))
    observations.add("TL009", None, "m", "ev9", path=path, line=1)
    statics = [_finding("TL002", path, 2), _finding("TL004", path, 3), _finding("TL106", path, 4),
               _finding("TL003", path, 6), _finding("TL001", path, 1)]
    reach = {3: True, 4: False, 1: None}
    results = reconcile(statics, observations.all(), lambda p, line: reach.get(line))
    by_code = {r.code: r for r in results}
    assert by_code["TL002"].status == CONFIRMED and by_code["TL002"].evidence == "ev"
    assert by_code["TL003"].status == CONFIRMED  # matched through a related line
    assert by_code["TL004"].status == RAN_WITHOUT_HARM
    assert by_code["TL106"].status == NOT_REACHED
    assert by_code["TL001"].status == NO_EVIDENCE
    assert by_code["TL009"].status == FOUND_BY_RUN and by_code["TL009"].column is None


def test_reconcile_structural_codes_match_within_the_class_or_file(tmp_path):
    path = str(tmp_path / "m.py")
    Path(path).write_text("\n" * 40)
    observations = Observations()
    observations.add("TL005", None, "split", "ev", path=path, line=30, spans=((path, 10, 20),))
    observations.add("TL101", None, "list", "ev", path=path, line=35)
    statics = [_finding("TL005", path, 12), _finding("TL101", path, 3), _finding("TL004", path, 35)]
    results = {r.code: r for r in reconcile(statics, observations.all(), lambda p, line: True)}
    assert results["TL005"].status == CONFIRMED  # inside the class the observation is about
    assert results["TL101"].status == CONFIRMED  # same file, nothing closer
    assert results["TL004"].status == RAN_WITHOUT_HARM  # a different code never matches


def test_observations_deduplicate_and_count(tmp_path):
    observations = Observations()
    for _ in range(3):
        observations.add("TL002", None, "m", "first", path="/p.py", line=3, step=2)
    (only,) = observations.all()
    assert only.count == 3 and only.evidence == "first" and only.step == 2


# -- the launcher ---------------------------------------------------------------------------------------

def _script(tmp_path, text):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(text))
    return path


def _launch(target):
    return launcher.run(target, lambda source, path: compile(source, path, "exec"))


def test_launcher_runs_like_python_script(tmp_path):
    (tmp_path / "sibling.py").write_text("VALUE = 7\n")
    path = _script(tmp_path, '''\
        import sys
        import sibling
        if __name__ == "__main__":
            RESULT = (sys.argv, sys.path[0], __file__, sibling.VALUE, sys.modules["__main__"].__dict__ is globals())
        ''')
    saved_argv, saved_main = sys.argv[:], sys.modules["__main__"]
    outcome = _launch(launcher.script_target(str(path), ["--lr", "0.1"]))
    sys.modules.pop("sibling", None)
    assert outcome.kind == launcher.FINISHED
    argv, path0, file, value, is_main = outcome.namespace["RESULT"]
    assert argv == [str(path), "--lr", "0.1"] and path0 == str(tmp_path) and file == str(path)
    assert value == 7 and is_main
    assert sys.argv == saved_argv and sys.modules["__main__"] is saved_main


@pytest.mark.parametrize("body, kind, status", [
    ("import sys\nsys.exit(0)\n", launcher.FINISHED, 0),
    ("import sys\nsys.exit()\n", launcher.FINISHED, 0),
    ("import sys\nsys.exit(3)\n", launcher.EXITED, 3),
    ("raise ValueError('own')\n", launcher.FAILED, None),
    ("from torchlint.runtime.launcher import StopRun\nraise StopRun('enough')\n", launcher.STOPPED, None),
    ("from torchlint.runtime.launcher import StopRun\ntry:\n    raise StopRun('x')\nexcept BaseException:\n"
     "    raise RuntimeError('wrapped')\n", launcher.STOPPED, None),
])
def test_launcher_outcomes(tmp_path, body, kind, status):
    outcome = _launch(launcher.script_target(str(_script(tmp_path, body)), []))
    assert outcome.kind == kind
    if status is not None:
        assert outcome.exit_status == status


def test_launcher_module_target(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text(
        "from . import helper\nimport sys\nRESULT = (__name__, __package__, sys.argv[1:], helper.X)\n")
    (package / "helper.py").write_text("X = 5\n")
    monkeypatch.chdir(tmp_path)
    target = launcher.module_target("pkg.train", ["a"])
    try:
        outcome = _launch(target)
    finally:
        for name in ("pkg", "pkg.helper", "pkg.train"):
            sys.modules.pop(name, None)
    assert outcome.kind == launcher.FINISHED
    assert outcome.namespace["RESULT"] == ("__main__", "pkg", ["a"], 5)
    with pytest.raises(launcher.TargetError):
        launcher.module_target("no_such_module_here", [])


def test_launcher_missing_script(tmp_path):
    with pytest.raises(launcher.TargetError):
        launcher.script_target(str(tmp_path / "missing.py"), [])


# -- the report formats --------------------------------------------------------------------------------------

def _report(tmp_path):
    from torchlint.runtime.reconcile import Result
    from torchlint.runtime.report import RunReport

    path = str(tmp_path / "train.py")
    Path(path).write_text("x = 1\n" * 20)
    observation = SimpleNamespace(count=3, step=2, ended_run=False)
    results = [
        Result("TL002", path, 5, 9, CONFIRMED, "step without zero_grad", "4 parameters ...", observation=observation,
               static=object()),
        Result("TL007", path, 8, None, FOUND_BY_RUN, "batch not moved", "data on cpu", observation=observation),
        Result("TL106", path, 12, 5, NOT_REACHED, "eval without no_grad", static=object()),
    ]
    health = [SimpleNamespace(name="fc.weight", problems=0, none=0, nonfinite=0, zero=0, vanishing=0, exploding=0,
                              norms=[0.5, 0.25], to_json=lambda: {"parameter": "fc.weight"})]
    samples = [SimpleNamespace(step=i, saved_bytes=1024 * i, saved_tensors=i, cuda_allocated=None) for i in (1, 2)]
    return RunReport("train.py", "stopped", "stopped after 2 optimizer steps (--max-steps 2)", 1.5, 2, results,
                     health, 2, samples, None, [], None, 1, thresholds={"vanishing": 1e-7, "exploding": 1e3})


@pytest.mark.parametrize("name", ["concise", "full", "grouped"])
def test_text_report_sections(tmp_path, name):
    import io

    from torchlint.runtime.report import WRITERS

    stream = io.StringIO()
    WRITERS[name](_report(tmp_path), stream, {"format": name})
    text = stream.getvalue()
    assert "CONFIRMED" in text and "NOT REACHED" in text and "(found by the run)" in text
    assert "Gradient health" in text and "Memory per step" in text and "Exit status 1" in text
    assert "evidence: 4 parameters ... (×3)" in text


def test_json_and_json_lines_reports(tmp_path):
    import io

    from torchlint.runtime.report import WRITERS

    stream = io.StringIO()
    WRITERS["json"](_report(tmp_path), stream, {})
    data = json.loads(stream.getvalue())
    assert data["exit_code"] == 1 and data["outcome"]["kind"] == "stopped"
    assert [f["status"] for f in data["findings"]] == [CONFIRMED, FOUND_BY_RUN, NOT_REACHED]
    assert data["findings"][1]["title"] == signatures.title("TL007") and data["findings"][1]["source"] == "run"
    stream = io.StringIO()
    WRITERS["json-lines"](_report(tmp_path), stream, {})
    assert len(stream.getvalue().splitlines()) == 3


def test_sarif_report_is_valid_and_describes_runtime_only_codes(tmp_path):
    import io

    jsonschema = pytest.importorskip("jsonschema")
    from torchlint.runtime.report import WRITERS

    stream = io.StringIO()
    WRITERS["sarif"](_report(tmp_path), stream, {"root": str(tmp_path)})
    log = json.loads(stream.getvalue())
    schema = json.loads((ROOT / "tests" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.validate(log, schema)
    run = log["runs"][0]
    rules = {rule["id"] for rule in run["tool"]["driver"]["rules"]}
    assert {"TL002", "TL007", "TL201"} <= rules
    levels = [r["level"] for r in run["results"]]
    assert levels == ["warning", "warning", "note"]
    assert run["results"][0]["properties"]["status"] == CONFIRMED
    assert run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.py"


def test_github_report(tmp_path):
    import io

    from torchlint.runtime.report import WRITERS

    stream = io.StringIO()
    WRITERS["github"](_report(tmp_path), stream, {})
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("::warning file=") and "title=torchlint run (TL002)::CONFIRMED: " in lines[0]
    assert lines[2].startswith("::notice ")


def test_runtime_package_imports_no_torch():
    import subprocess

    code = ("import sys\nimport torchlint.runtime.command, torchlint.runtime.report, torchlint.runtime.reach\n"
            "import torchlint.runtime.launcher, torchlint.runtime.reconcile\n"
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch.'))[:5]\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode == 0, result.stderr


def test_ast_of_probe_is_a_plain_call():
    reach = Reach()
    reach.want("/p.py", [2])
    tree = reach.instrument(ast.parse("a = 1\nb = 2\n"), "/p.py")
    assert ast.unparse(tree).splitlines() == ["a = 1", "__torchlint_reached__(1000002)", "b = 2"]


# -- issue 24 ------------------------------------------------------------------------------------------

def test_one_observation_confirms_one_finding_of_a_line_and_an_unfinished_statement_is_no_evidence(tmp_path):
    path = str(tmp_path / "t.py")
    Path(path).write_text("print(loss.data[0], acc.data[0])\nx = 1\n")
    observations = Observations()
    observations.add("TL201", None, "m", "IndexError", path=path, line=1, ended_run=True)
    statics = [_finding("TL201", path, 1, column=20), _finding("TL201", path, 1, column=7), _finding("TL004", path, 2)]
    results = reconcile(statics, observations.all(), lambda p, line: True, unfinished={(path, 1): "IndexError"})
    by_column = {r.column: r for r in results}
    assert by_column[7].status == CONFIRMED and by_column[7].evidence == "IndexError"
    assert by_column[20].status == NO_EVIDENCE and "raised (IndexError)" in by_column[20].evidence
    (other,) = [r for r in results if r.code == "TL004"]
    assert other.status == RAN_WITHOUT_HARM


def test_display_path_outside_the_working_directory_is_shown_from_the_project_root(tmp_path, monkeypatch):
    (tmp_path / "scripts").mkdir()
    monkeypatch.chdir(tmp_path / "scripts")
    inside = str(tmp_path / "src" / "pkg" / "m.py")
    try:
        project.set_display_root(str(tmp_path))
        assert project.display_path(inside) == os.path.join("src", "pkg", "m.py")
        assert project.display_path(str(tmp_path / "scripts" / "t.py")) == "t.py"
        assert project.display_path("/elsewhere/x.py") == "/elsewhere/x.py"
    finally:
        project.set_display_root(None)


def test_imports_resolve_through_sys_path_entries(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "src" / "lib").mkdir(parents=True)
    (tmp_path / "src" / "lib" / "__init__.py").write_text("")
    (tmp_path / "src" / "lib" / "model.py").write_text("from .layers import Block\n")
    (tmp_path / "src" / "lib" / "layers.py").write_text("Block = 1\n")
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "train.py"
    script.write_text("from lib.model import Block\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setattr(sys, "path", [sys.path[1]] + sys.path)  # sys.path[0] is torchlint's own
    own = project.Project(str(tmp_path))
    alone = project.imported_project_files(str(script), [str(tmp_path / "scripts")], own)
    assert alone == [str(script)]
    roots = project.import_roots([str(tmp_path / "scripts")], own)
    found = project.imported_project_files(str(script), roots, own)
    assert [os.path.relpath(p, tmp_path) for p in found] == [
        os.path.join("scripts", "train.py"), os.path.join("src", "lib", "__init__.py"),
        os.path.join("src", "lib", "model.py"), os.path.join("src", "lib", "layers.py")]


def test_sigint_is_deferred_out_of_our_frames_and_weakref_callbacks():
    import weakref

    from torchlint.runtime.interrupt import Interrupts

    interrupts = Interrupts()
    here = sys._getframe()
    assert not interrupts._unsafe(here)  # a frame of the script (here: the test's): raise at once

    class Thing:
        pass

    thing = Thing()
    frames = []

    def grab(_):
        frames.append(sys._getframe())

    keep = weakref.ref(thing, grab)  # noqa: F841 - the callback runs when `thing` dies
    del thing
    (callback,) = frames
    assert not interrupts._unsafe(callback)  # a callback of the test's own file: its frames are ordinary
    assert interrupts._unsafe(_frame_in_weakrefset())


def _frame_in_weakrefset():
    """A frame of _weakrefset.py (where WeakSet's `_remove` callback runs), taken while iterating."""
    import weakref

    class Thing:
        pass

    things = [Thing()]
    found = []
    holder = weakref.WeakSet(things)
    original = sys.gettrace()

    def tracer(frame, event, arg):
        if frame.f_code.co_filename.endswith("_weakrefset.py") and not found:
            found.append(frame)
        return None

    sys.settrace(tracer)
    try:
        list(holder)
    finally:
        sys.settrace(original)
    return found[0]


def test_saved_tensor_hook_stride():
    from torchlint.runtime.detectors.memory import Memory

    assert Memory.choose_every(30, 0.02) == 1  # a CNN: a few dozen saved tensors a step
    assert Memory.choose_every(3100, 0.07) == 4  # a recurrent model stepping cells: thousands
    assert Memory.choose_every(10 ** 7, 0.01) == Memory.MAX_EVERY


def test_fix_marker_only_for_a_fix_that_fix_applies():
    from torchlint.finding import Applicability, Edit, Fix
    from torchlint.fixer import applicable
    from torchlint.output.text import line

    def with_fix(applicability, edits=(Edit("y", Location(1, 1), Location(1, 2)),)):
        return Finding("TL108", "m", "t.py", Location(1, 1), Location(1, 2), fix=Fix("f", edits, applicability))

    assert "[*]" in line(with_fix(Applicability.SAFE), {})
    assert "[*]" not in line(with_fix(Applicability.UNSAFE), {})
    assert "[*]" in line(with_fix(Applicability.UNSAFE), {"unsafe_fixes": True})
    assert "[*]" not in line(with_fix(Applicability.SAFE, edits=()), {})  # nothing for --fix to apply
    for finding in (with_fix(Applicability.SAFE), with_fix(Applicability.UNSAFE), with_fix(Applicability.SAFE, ())):
        for unsafe in (False, True):  # the marker and the fixer ask the same question
            assert ("[*]" in line(finding, {"unsafe_fixes": unsafe})) == applicable(finding, unsafe)


def test_editable_install_finders_give_their_source_directories(tmp_path, monkeypatch):
    import types

    module = types.ModuleType("__editable___mylib_0_1_finder")
    module.MAPPING = {"mylib": str(tmp_path / "src" / "mylib")}
    finder = type("_EditableFinder", (), {"__module__": module.__name__})
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(sys, "meta_path", sys.meta_path + [finder])
    assert str(tmp_path / "src") in project._editable_directories()


def test_ran_without_harm_only_where_a_detector_observes_the_code(tmp_path):
    """Issue 44: a line that ran is RAN WITHOUT HARM only where the run can observe the code's
    harm; else NO EVIDENCE, saying why. Evidence for a static finding only (`confirms_only`) is no
    finding of its own."""
    path = str(tmp_path / "t.py")
    Path(path).write_text("a = 1\nb = 2\nc = 3\n")
    observations = Observations()
    only = observations.add("TL106", None, "m", "ev", path=path, line=3)
    only.confirms_only = True
    statics = [_finding("TL004", path, 1), _finding("TL121", path, 2)]
    results = reconcile(statics, observations.all(), lambda p, line: True,
                        unobservable=lambda code, path, line: signatures.unobservable(code))
    by_code = {r.code: r for r in results}
    assert by_code["TL004"].status == RAN_WITHOUT_HARM
    assert by_code["TL121"].status == NO_EVIDENCE and "no detector for TL121" in by_code["TL121"].evidence
    assert "TL106" not in by_code


def test_escape_codes_are_stripped():
    from torchlint.runtime.report import strip_ansi

    assert strip_ansi("\x1b[31mboom\x1b[0m: \x1b[1;32mok\x1b[K") == "boom: ok"
    assert strip_ansi("\x1b]8;;https://x\x1b\\link\x1b]8;;\x1b\\ text") == "link text"
    assert strip_ansi("plain [31m text") == "plain [31m text" and strip_ansi(None) is None
