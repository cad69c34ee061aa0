"""Property tests for fixes: every fix, applied to generated variants of the fixtures (renamed
variables, extra blank lines and comments, CRLF endings, other indentation), gives code that
parses, and fixing the result again changes nothing."""

from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from torchlint.engine import select_rules
from torchlint.fixer import fix_data, fix_text, parses

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [path for path in sorted((ROOT / "fixtures" / "fixes").glob("TL*.py")) + sorted((ROOT / "fixtures").glob("TL*/*.py"))
           # TL204's fixtures do not parse (`.cuda(async=True)`); tests/test_rules_legacy.py fixes them
           if parses(path.read_text(encoding="utf-8"))]
RULES = select_rules(["TL"])
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class _Renamer(cst.CSTTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.new) if updated.value == self.old else updated

    def leave_Attribute(self, original, updated):  # `obj.old` is not the variable
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original, updated):  # nor is the keyword `f(old=...)`
        return updated.with_changes(keyword=original.keyword)


def _assigned_names(module: cst.Module) -> list:
    names = set()

    class Collect(cst.CSTVisitor):
        def visit_AssignTarget(self, node):
            if isinstance(node.target, cst.Name):
                names.add(node.target.value)

        def visit_Param(self, node):
            if node.name.value not in ("self", "cls"):
                names.add(node.name.value)

    module.visit(Collect())
    return sorted(names)


class _Padder(cst.CSTTransformer):
    """Blank lines and comments before random statements."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def _pad(self, updated):
        if self.rng.random() < 0.3:
            extra = [cst.EmptyLine()] if self.rng.random() < 0.5 else [cst.EmptyLine(comment=cst.Comment("# note"))]
            return updated.with_changes(leading_lines=[*extra, *updated.leading_lines])
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        return self._pad(updated)

    def leave_For(self, original, updated):
        return self._pad(updated)

    def leave_FunctionDef(self, original, updated):
        return self._pad(updated)


def _reindent(text: str, unit: str) -> str:
    lines = []
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip(" ")
        width = len(line) - len(stripped)
        lines.append(unit * (width // 4) + " " * (width % 4) + stripped)
    return "".join(lines)


@st.composite
def variants(draw):
    path = draw(st.sampled_from(SOURCES))
    text = path.read_text(encoding="utf-8")
    module = cst.parse_module(text)
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    names = _assigned_names(module)
    if names and draw(st.booleans()):
        old = draw(st.sampled_from(names))
        module = module.visit(_Renamer(old, old + "_renamed"))
    if draw(st.booleans()):
        module = module.visit(_Padder(rng))
    text = module.code
    indent = draw(st.sampled_from([None, "  ", "\t", "   "]))
    if indent is not None:
        text = _reindent(text, indent)
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    if newline != "\n":
        text = text.replace("\n", newline)
    assume(parses(text))
    return path.name, text


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@SETTINGS
@given(variant=variants())
def test_fixes_parse_and_are_idempotent(unsafe, variant) -> None:
    name, text = variant
    outcome = fix_text(text, name, RULES, unsafe)
    assert not outcome.invalid, f"a fix broke {name}"
    assert parses(outcome.text)
    assert not any(f.is_diagnostic for f in outcome.result.findings), outcome.result.findings
    again = fix_text(outcome.text, name, RULES, unsafe)
    assert again.count == 0 and again.text == outcome.text, f"second fix of {name} changed {dict(again.fixed)}"
    if "\r\n" in text:
        # No bare LF crept in: every line ending is still CRLF.
        assert "\n" not in outcome.text.replace("\r\n", "")


@SETTINGS
@given(variant=variants(), encoding=st.sampled_from(["utf-8", "utf-8-sig", "latin-1"]))
def test_bytes_outside_the_fixes_round_trip(variant, encoding) -> None:
    name, text = variant
    if encoding == "latin-1":
        text = "# -*- coding: latin-1 -*-\n" + text
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        assume(False)
    fixed = fix_data(name, data, RULES, True)
    assert not any(f.is_diagnostic for f in fixed.result.findings)
    new = fixed.new.decode(encoding)
    assert parses(new.lstrip("\ufeff"))
    assert fixed.new.startswith(b"\xef\xbb\xbf") == (encoding == "utf-8-sig")
    if not fixed.changed:
        assert fixed.new == data
    assert fix_data(name, fixed.new, RULES, True).new == fixed.new


@pytest.mark.slow
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_programs_with_fixture_code(data) -> None:
    """A hypothesmith program appended to a fixture: fixing never raises, the result parses,
    and a second fix changes nothing."""
    import hypothesmith

    generated = data.draw(hypothesmith.from_grammar())
    assume(parses(generated))
    path = data.draw(st.sampled_from(SOURCES))
    fixture = path.read_text(encoding="utf-8")
    for text in (fixture + "\n" + generated,):
        if not parses(text):
            continue
        outcome = fix_text(text, "gen.py", RULES, True)
        assert not outcome.invalid
        assert parses(outcome.text)
        assert fix_text(outcome.text, "gen.py", RULES, True).text == outcome.text
