"""Cases whose snippets need a package that cannot be installed here (torchvision): the verifier
checks the static part and reports SOURCE-CHECKED with the sources the claim was read in."""

from __future__ import annotations

from torchlint.verify import static
from torchlint.verify.case import Case
from torchlint.verify.runner import (FAILING, SOURCE_CHECKED, VERDICTS, _row, decide_source_checked,
                                     missing_requirements)

_CASE = Case(
    rule="TL215",
    title="resnet18(pretrained=False) warns",
    bad="import torch\nimport torchvision\n\nmodel = torchvision.models.resnet18(pretrained=False)\n",
    good="import torch\nimport torchvision\n\nmodel = torchvision.models.resnet18(weights=None)\n",
    bad_line=4,
    probe="warns",
    expect={"category": "UserWarning", "match": "deprecated"},
    requires=("a_package_that_is_not_installed_anywhere",),
    source="torchvision 0.29.1 torchvision/models/_utils.py",
)


def test_missing_requirements_only_looks_up():
    assert missing_requirements(_CASE) == ["a_package_that_is_not_installed_anywhere"]
    assert missing_requirements(Case(**{**_CASE.__dict__, "requires": ("json",)})) == []


def test_source_checked_is_a_passing_verdict():
    assert SOURCE_CHECKED in VERDICTS and SOURCE_CHECKED not in FAILING


def test_static_part_decides():
    from torchlint.engine import lint_source

    row = _row(_CASE, "cpu", static.check_case(_CASE, lint_source))
    decide_source_checked(row, _CASE, missing_requirements(_CASE))
    assert row["verdict"] == SOURCE_CHECKED, row
    assert "torchvision 0.29.1" in row["reason"] and row["bad"] is None

    wrong = Case(**{**_CASE.__dict__, "bad_line": 1})
    row = _row(wrong, "cpu", static.check_case(wrong, lint_source))
    decide_source_checked(row, wrong, missing_requirements(wrong))
    assert row["verdict"] == "NOT CONFIRMED" and "static analyzer disagrees" in row["reason"]


def test_round_trip_keeps_requires():
    assert Case.from_json(_CASE.to_json()) == _CASE
