"""LibCST's node classes built from code objects kept on disk (torchlint/startup.py) are the classes
`dataclasses` builds, and a bad or missing cache file only means compiling as usual."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from torchlint import startup

pytestmark = pytest.mark.skipif(not startup._supported(getattr(dataclasses, "_create_fn", None)),
                                reason="this interpreter's dataclasses has no _create_fn to reuse")


def _point_class():
    @dataclasses.dataclass(frozen=True, order=True)
    class Point:
        x: int
        label: str = "origin"
        tags: tuple = dataclasses.field(default_factory=tuple)

    return Point


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "__pycache__" / "dataclass-methods.marshal"
    monkeypatch.setattr(startup, "cache_file", lambda: str(path))
    monkeypatch.setattr(startup, "_LOADED", {})  # as in a new process: the file is read again
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return path


def _same_behaviour(made, stock):
    assert made(1) == made(1) and made(1) != made(2) and made(1) < made(2)
    assert repr(made(3, "a")) == repr(stock(3, "a")).replace(stock.__qualname__, made.__qualname__)
    assert hash(made(4)) == hash(made(4))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made(5).x = 6
    assert made.__init__.__annotations__ == stock.__init__.__annotations__  # objects, not strings
    assert made.__init__.__code__.co_code == stock.__init__.__code__.co_code


def test_first_run_compiles_and_keeps_the_code_second_run_reuses_it(cache):
    stock = _point_class()
    with startup.compiled_dataclass_methods():
        first = _point_class()
    assert cache.is_file()
    kept = startup._read_table(str(cache))
    assert kept  # the code objects of __init__, __repr__, __eq__, __lt__, ... by their text's digest
    startup._LOADED.clear()  # a second process
    with startup.compiled_dataclass_methods():
        second = _point_class()
    assert startup._read_table(str(cache)).keys() == kept.keys()  # nothing new compiled, nothing rewritten
    _same_behaviour(first, stock)
    _same_behaviour(second, stock)
    assert dataclasses._create_fn is not None and dataclasses._create_fn.__module__ == "dataclasses"


def test_a_corrupt_or_foreign_file_means_compiling_as_usual(cache):
    cache.parent.mkdir(parents=True)
    for content in (b"", b"not marshal at all", b"\x00" * 64):
        cache.write_bytes(content)
        startup._LOADED.clear()  # each as a new process reading that file
        with startup.compiled_dataclass_methods():
            made = _point_class()
        _same_behaviour(made, _point_class())
    assert startup._read_table(str(cache))  # rewritten whole by the last run


def test_one_process_reads_the_file_once_and_reuses_what_it_compiled(cache, monkeypatch):
    with startup.compiled_dataclass_methods():
        _point_class()
    monkeypatch.setattr(startup, "_read_table", lambda path: pytest.fail("read again"))
    compiled = []
    monkeypatch.setattr(startup, "compile", lambda *a, **k: compiled.append(a) or compile(*a, **k), raising=False)
    with startup.compiled_dataclass_methods():  # e.g. the engine's import, then the rules'
        _point_class()
    assert not compiled


def test_nothing_is_written_where_bytecode_is_not(cache, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    with startup.compiled_dataclass_methods():
        _point_class()
    assert not cache.exists()


def test_the_stock_function_is_restored_when_an_import_fails(cache):
    original = dataclasses._create_fn
    with pytest.raises(RuntimeError):
        with startup.compiled_dataclass_methods():
            raise RuntimeError("an import failed")
    assert dataclasses._create_fn is original


def test_the_collector_is_off_inside_and_restored_after(cache):
    import gc

    was = gc.isenabled()
    gc.enable()
    try:
        with startup.compiled_dataclass_methods():
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with startup.compiled_dataclass_methods():
            pass
        assert not gc.isenabled()  # a linter that runs with the collector off keeps it off
    finally:
        (gc.enable if was else gc.disable)()


def test_only_a_block_that_imports_something_freezes(cache, monkeypatch):
    import gc

    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    with startup.compiled_dataclass_methods():
        pass  # what the flake8 plugin's block does for every file after the first
    assert not frozen
    monkeypatch.delitem(sys.modules, "json.tool", raising=False)
    with startup.compiled_dataclass_methods():
        import json.tool  # noqa: F401
    assert frozen


_COMMAND_SCRIPT = """
import builtins, sys
from torchlint import startup
startup.cache_file = lambda: sys.argv[1]
sys.dont_write_bytecode = False
compiled = []
real_compile = builtins.compile
def counting(source, filename, *args, **kwargs):
    if filename == "<string>":
        compiled.append(source)
    return real_compile(source, filename, *args, **kwargs)
builtins.compile = counting
from torchlint import cli
try:
    cli.main(["--version"])
except SystemExit:
    pass
print(len(compiled), "torchlint.finding" in sys.modules and "torchlint.config" in sys.modules)
"""


def test_the_command_builds_its_findings_and_config_dataclasses_from_the_kept_code(tmp_path):
    import subprocess

    table = tmp_path / "dataclass-methods.marshal"
    runs = [subprocess.run([sys.executable, "-c", _COMMAND_SCRIPT, str(table)], capture_output=True, text=True,
                           timeout=120) for _ in range(2)]
    first, second = (run.stdout.splitlines()[-1].split() for run in runs)
    assert int(first[0]) > 0 and first[1] == "True", runs[0].stderr  # the first run compiles and keeps
    assert second == ["0", "True"], runs[1].stderr  # the next one compiles none of them again


_LINT_SCRIPT = """
import builtins, sys
from torchlint import startup
startup.cache_file = lambda: sys.argv[1]
sys.dont_write_bytecode = False
built_from_text = set()
real_exec = builtins.exec
def watching(source, *args, **kwargs):
    if isinstance(source, str) and "def __create_fn__" in source:  # dataclasses compiling a method
        frame = sys._getframe(1)
        while frame is not None and "cls" not in frame.f_locals:
            frame = frame.f_back
        if frame is not None:
            built_from_text.add(frame.f_locals["cls"].__module__)
    return real_exec(source, *args, **kwargs)
builtins.exec = watching
from torchlint import cli
cli.main(["--no-cache", "--exit-zero", "-q", sys.argv[2]])
print(" ".join(sorted(m for m in built_from_text if m.startswith(("torchlint", "libcst")))) or "-")
"""


def test_a_lint_run_builds_the_rules_and_analysis_dataclasses_from_the_kept_code(tmp_path):
    import subprocess

    table = tmp_path / "dataclass-methods.marshal"
    script = tmp_path / "train.py"
    script.write_text("import torch\nx = torch.zeros(2, requires_grad=True)\nx.add_(1)\n")
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", _LINT_SCRIPT, str(table), str(script)], capture_output=True,
                             text=True, timeout=120)
    built = set(run.stdout.splitlines()[-1].split()) - {"-"}
    # Only the command's own module, whose dataclass is made as it is imported, before any block.
    assert built <= {"torchlint.cli", "torchlint.source"}, (built, run.stderr)


def test_the_rules_are_imported_through_the_block_once_per_process(monkeypatch):
    import contextlib

    startup.import_rules()
    entered = []
    monkeypatch.setattr(startup, "compiled_dataclass_methods", lambda: entered.append(1) or contextlib.nullcontext())
    assert startup.import_rules().all_rules()  # what `engine.select_rules` asks for every selection
    assert entered == []
