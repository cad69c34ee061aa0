"""Severity and fixes of the rules that cover TorchFix's checks (TL120-TL122, TL213-TL215): the
severity of each finding follows from the program's facts."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.engine import lint_source
from torchlint.finding import Applicability, Severity


def findings(source: str, code: str):
    return [f for f in lint_source(textwrap.dedent(source), select=[code]) if f.code == code]


@pytest.mark.parametrize("source, severity", [
    ("import torch.nn as nn\nm = nn.Linear(2, 2)\nfor p in m.parameters():\n    p.require_grad = False\n",
     Severity.ERROR),
    ("import torch.nn as nn\nm = nn.Linear(2, 2)\nm.require_grad = False\n", Severity.ERROR),
    ("import torch\npe = torch.zeros(4, 4)\npe.require_grad = False\n", Severity.NOTE),
    ("import torch\nt = torch.zeros(4)\nt.require_grad = True\n", Severity.WARNING),
    ("import torch\ndef f(p):\n    p.require_grad = False\n", Severity.WARNING),
])
def test_tl120_severity(source, severity):
    (finding,) = findings(source, "TL120")
    assert finding.severity == severity, finding.message


def test_tl120_fix_is_unsafe():
    (finding,) = findings("import torch\nw = torch.zeros(2)\nw.require_grad = True\n", "TL120")
    assert finding.fix.applicability == Applicability.UNSAFE


@pytest.mark.parametrize("source, code, severity", [
    ("import torch\ny = torch.log(1 + torch.rand(3))\n", "TL121", Severity.NOTE),
    ("import torch\ny = torch.log(1 + torch.exp(torch.rand(3)))\n", "TL121", Severity.WARNING),
    ("import torch\ny = torch.log(torch.softmax(torch.rand(3), 0))\n", "TL122", Severity.WARNING),
    ("import torch\nfrom torch.utils.checkpoint import checkpoint\ny = checkpoint(torch.sin, torch.rand(2))\n",
     "TL213", Severity.WARNING),
    ("from torch.utils.data._utils.collate import default_collate\n", "TL214", Severity.NOTE),
    ("import torchvision\nm = torchvision.models.resnet50(pretrained=True)\n", "TL215", Severity.NOTE),
    ("import torchvision\nm = torchvision.models.vit_h_14(pretrained=True)\n", "TL215", Severity.ERROR),
    ("import torchvision\nm = torchvision.models.vit_h_14(pretrained=False)\n", "TL215", Severity.NOTE),
])
def test_severity(source, code, severity):
    (finding,) = findings(source, code)
    assert finding.severity == severity, finding.message


@pytest.mark.parametrize("source, applicability", [
    ("import torchvision\nm = torchvision.models.resnet50(pretrained=False)\n", Applicability.SAFE),
    ("import torchvision\nm = torchvision.models.resnet50(pretrained=True)\n", Applicability.UNSAFE),
])
def test_tl215_fix_safety(source, applicability):
    (finding,) = findings(source, "TL215")
    assert finding.fix.applicability == applicability


def test_api_change_entries_feed_the_rules():
    from torchlint.analysis.api_changes import BY_API

    assert BY_API["torch.utils.checkpoint.checkpoint"].keyword == "use_reentrant"
    assert BY_API["torchvision.models.*(pretrained=)"].check.checked == "source"


def test_runtime_recognises_the_checkpoint_warning():
    from torchlint.runtime import signatures

    message = ("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in "
               "PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception.")
    assert signatures.warning_code("UserWarning", message) == "TL213"
    assert signatures.warning_code("UserWarning", "something else") is None
    assert "TL213" in signatures.CODES and signatures.WARNING_MESSAGES["TL213"]


@pytest.mark.parametrize("code", ["TL120", "TL121", "TL122", "TL213", "TL214", "TL215"])
def test_docs_and_metadata(code):
    from torchlint.rules import get_rule

    rule = get_rule(code)
    for section in ("## What it does", "## Why is this bad?", "## Example", "Use instead:",
                    "## Fix safety", "## References"):
        assert section in rule.docs
    assert rule.confirmation_module == code.lower()
    assert rule.triggers


def test_docs_quote_measured_facts():
    from torchlint.rules import get_rule

    assert "`p.requires_grad` is still\n`True`" in get_rule("TL120").docs
    assert "[0, -inf,\n-inf]" in get_rule("TL122").docs
    assert "the use_reentrant parameter should be passed explicitly" in get_rule("TL213").docs
