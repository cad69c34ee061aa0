"""torchlint's parse (LibCST's, without re-validating the parser's own nodes) gives LibCST's tree."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst._nodes.base import CSTNode

from torchlint import parsing
from torchlint.engine import parse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _sources():
    return sorted(FIXTURES.rglob("*.py"))


@pytest.mark.parametrize("path", _sources()[:60], ids=lambda p: p.name)
def test_same_tree_and_same_code_as_libcst(path):
    text = path.read_text(encoding="utf-8")
    try:
        expected = cst.parse_module(text)
    except Exception as error:  # the broken-input fixtures: both must refuse alike
        with pytest.raises(type(error)):
            parsing.parse_module(text)
        return
    got = parsing.parse_module(text)
    assert got.deep_equals(expected)
    assert got.code == text


def test_nodes_built_after_a_parse_are_validated_again():
    parsing.parse_module("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")


def test_validation_is_restored_when_the_parse_fails():
    with pytest.raises(cst.ParserSyntaxError):
        parsing.parse_module("def (:\n")
    assert CSTNode.__dict__["__post_init__"] is parsing._HOOK
    with pytest.raises(cst.CSTValidationError):
        cst.Name("a b")


def test_falls_back_to_the_stock_parse_when_a_node_class_has_its_own_hook(monkeypatch):
    monkeypatch.setattr(parsing, "_SAFE", False)
    calls = []
    original = cst.parse_module
    monkeypatch.setattr(parsing.cst, "parse_module", lambda source: calls.append(source) or original(source))
    assert parsing.parse_module("y = 2\n").code == "y = 2\n"
    assert calls == ["y = 2\n"]
    assert CSTNode.__dict__["__post_init__"] is parsing._HOOK


def test_the_engine_parses_through_it():
    module = parse("import torch\nx = torch.zeros(3)\n", "<test>")
    assert isinstance(module, cst.Module)
    assert module.code == "import torch\nx = torch.zeros(3)\n"


def test_the_fast_path_is_taken_on_the_pinned_libcst():
    assert parsing._hook_is_only_on_the_base()


def test_the_per_node_import_shortcut_is_taken_and_stays_in_its_frame():
    import builtins

    before = builtins.__import__
    assert parsing._native is not None  # LibCST 1.x layout: the native entry point is called directly
    assert parsing._native_parse.__globals__["__builtins__"]["__import__"] == "".format
    assert parsing.parse_module(b"import os\nx = os.sep\n").code == "import os\nx = os.sep\n"
    assert builtins.__import__ is before
    import json  # noqa: F401 - a real import after a parse still works

    with pytest.raises(cst.ParserSyntaxError):  # LibCST's error class is found through the same lookup
        parsing.parse_module("x = (\n")
