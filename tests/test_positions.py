"""`node_ranges` gives the same ranges (and PositionProvider's starts), however it gets them: from the module's start, or
(with the module's index) skipping the bookkeeping in top-level statements that hold no target."""

from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.analysis.index import Index
from torchlint.parsing import parse_module
from torchlint.positions import node_ranges

FIXTURES = sorted(p for p in (Path(__file__).parent.parent / "fixtures").rglob("*.py"))


def _expected(module: cst.Module, nodes):
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    return {node: ((positions[node].start.line, positions[node].start.column),
                   (positions[node].end.line, positions[node].end.column)) for node in nodes}


@pytest.mark.parametrize("path", FIXTURES[::3], ids=lambda p: str(p.relative_to(p.parents[2])))
def test_ranges_with_and_without_the_index_match_position_provider(path):
    try:
        module = parse_module(path.read_text(encoding="utf-8"))
    except Exception:
        pytest.skip("not parseable by LibCST")
    index = Index(module)
    if len(index.preorder) < 2:
        pytest.skip("empty module")
    chooser = random.Random(str(path))
    nodes = chooser.sample(index.preorder[1:], min(4, len(index.preorder) - 1))
    whole = node_ranges(module, nodes)
    assert node_ranges(module, nodes, index) == whole
    # Expressions and small statements (what findings point at) start where PositionProvider says.
    reported = [n for n in nodes if isinstance(n, (cst.BaseExpression, cst.BaseSmallStatement))]
    assert {node: whole[node][0] for node in reported} == \
        {node: span[0] for node, span in _expected(module, reported).items()}


def test_a_target_outside_the_statements_falls_back_to_the_whole_module():
    module = parse_module("x = 1\ny = 2\n")
    index = Index(module)
    other = cst.parse_module("z = 3\n").body[0]
    assert node_ranges(module, [module.body[1], other], index) == node_ranges(module, [module.body[1], other])
