"""TL215: `torchvision.models.resnet50(pretrained=True)`: the keyword torchvision 0.13 replaced by
`weights=`."""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from torchlint.analysis.api_changes import BY_API
from torchlint.analysis.api_changes.keywords import (
    VISION_LEGACY_BUILDERS,
    VISION_LEGACY_KEYWORDS,
    VISION_NO_LEGACY_WEIGHTS,
    VISION_NO_POSITIONAL_WEIGHTS,
)
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_PREFIX = "torchvision.models"
_CHANGES = {change.keyword: change for change in BY_API.values()
            if change.api.startswith(_PREFIX + ".*(") and change.keyword in VISION_LEGACY_KEYWORDS}


class TorchvisionPretrainedKeyword(Rule):
    code = "TL215"
    name = "torchvision-pretrained-keyword"
    summary = "`pretrained=` of torchvision's model builders is deprecated since 0.13: use `weights=`"
    fix_availability = "sometimes"
    default_severity = Severity.NOTE
    severity_docs = """
A **note**: `pretrained=` still works on torchvision 0.29, with two warnings. An **error** for
`pretrained=True` on the builders that have no legacy weights (`vit_h_14`, `regnet_y_128gf`), which
raise `ValueError`.
"""
    triggers = ("pretrained", "torchvision")
    node_types = (cst.Call,)
    confirmation_module = "tl215"
    docs = """
## What it does
Flags calls of torchvision's model builders (`torchvision.models.resnet50`,
`models.detection.fasterrcnn_resnet50_fpn`, `models.resnet.resnet18`, ..., however imported)
that pass `pretrained=` or `pretrained_backbone=`, or `True`/`False` as the first positional
argument. The builders and their keywords are the ones torchvision 0.29.1 decorates with
`handle_legacy_interface` (the table in `torchlint/analysis/api_changes/keywords.py`, read from
its released sources: torchvision cannot be installed beside the CPU torch here).

Not flagged: `weights=` / `weights_backbone=`; a builder's first positional argument that is not
a bool literal (a weights enum); functions of `torchvision.models` that are not builders
(`vgg.make_layers(cfg, False)`); `timm.create_model(name, pretrained=True)` and other libraries'
`pretrained=`, which is their current API.

## Why is this bad?
Nothing breaks today: per torchvision 0.29.1's sources the old keyword is mapped to the new one,
with two warnings (`The parameter 'pretrained' is deprecated since 0.13 and may be removed in the
future, please use 'weights' instead.` and `Arguments other than a weight enum or None for
'weights' are deprecated ... The current behavior is equivalent to passing weights=...`). So
it is a note, except for the two builders that have no legacy weights (`vit_h_14`,
`regnet_y_128gf`): there `pretrained=True` raises `ValueError: No weights available for model`,
an error. What `pretrained=True` loads is the builder's legacy weights, which are not always the
newest (`resnet50`: `IMAGENET1K_V1`, while `ResNet50_Weights.DEFAULT` is `IMAGENET1K_V2`).

## Example
```python
model = torchvision.models.resnet50(pretrained=True)
scratch = torchvision.models.resnet18(pretrained=False)
```

Use instead:
```python
model = torchvision.models.resnet50(weights=torchvision.models.ResNet50_Weights.IMAGENET1K_V1)
scratch = torchvision.models.resnet18(weights=None)
```

## Fix safety
`pretrained=False` becomes `weights=None` (and `pretrained_backbone=False` becomes
`weights_backbone=None`): safe, torchvision maps the one to the other exactly.
`pretrained=True` becomes `weights="DEFAULT"`: unsafe, because DEFAULT may name newer weights
than the legacy ones `pretrained=True` loaded (other accuracy, other numbers); pin the enum
member (`IMAGENET1K_V1`) to keep them. No fix for a value that is not a literal, or for the
positional form.

## References
- https://pytorch.org/vision/stable/models.html
- https://github.com/pytorch/vision/blob/main/torchvision/models/_utils.py (`handle_legacy_interface`)
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        builder = _builder(ctx.semantic.call_name(node))
        if builder is None:
            return
        package, function, keywords = builder
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in keywords:
                self._report(node, arg, arg.keyword.value, function, package, ctx)
        first = node.args[0] if node.args else None
        if first is not None and first.keyword is None and not first.star \
                and function not in VISION_NO_POSITIONAL_WEIGHTS and _bool(first.value) is not None:
            self._report(node, first, "pretrained", function, package, ctx, positional=True)

    def _report(self, node: cst.Call, arg: cst.Arg, keyword: str, function: str, package: str,
                ctx: RuleContext, positional: bool = False) -> None:
        new = VISION_LEGACY_KEYWORDS[keyword]
        value = _bool(arg.value)
        raises = (keyword == "pretrained" and value is not False and package == ""
                  and function in VISION_NO_LEGACY_WEIGHTS)
        spelled = f"`{ctx.code(arg.value)}` as the first argument" if positional else f"`{keyword}=`"
        change = _CHANGES.get(keyword)
        since = change.deprecated_in if change is not None and change.deprecated_in else "torchvision 0.13"
        if raises:
            message = (f"{spelled} of `{function}`: deprecated since {since}, and `{function}` has no "
                       f"legacy weights, so a true value raises `ValueError: No weights available`; "
                       f"pass `{new}=` a weights enum member")
        else:
            message = (f"{spelled} of `{function}` is deprecated since {since} (two warnings per "
                       f"call, may be removed); use `{new}=`")
        ctx.report(arg, message, None if positional else _fix(arg, new, value),
                   severity=Severity.ERROR if raises and value is True else
                   (Severity.WARNING if raises else Severity.NOTE))


def _builder(name: Optional[str]) -> Optional[Tuple[str, str, frozenset]]:
    """(package, builder, its legacy keywords) for a torchvision model builder's qualified name:
    `torchvision.models.resnet50`, `torchvision.models.resnet.resnet50`,
    `torchvision.models.detection.faster_rcnn.fasterrcnn_resnet50_fpn`."""
    if not name or not name.startswith(_PREFIX + "."):
        return None
    parts = name[len(_PREFIX) + 1:].split(".")
    package = parts[0] if len(parts) > 1 and parts[0] in VISION_LEGACY_BUILDERS else ""
    inner = parts[1:] if package else parts
    if not 1 <= len(inner) <= 2:
        return None
    keywords = VISION_LEGACY_BUILDERS[package].get(inner[-1])
    if keywords is None:
        return None
    return package, inner[-1], keywords


def _bool(node: cst.BaseExpression) -> Optional[bool]:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def _fix(arg: cst.Arg, new: str, value: Optional[bool]) -> Optional[FixSpec]:
    if value is None or arg.keyword is None:
        return None
    if value is False:
        return FixSpec(f"Use `{new}=None`", (Replace(arg.keyword, new), Replace(arg.value, "None")),
                       Applicability.SAFE)
    return FixSpec(f'Use `{new}="DEFAULT"` (maybe newer weights)',
                   (Replace(arg.keyword, new), Replace(arg.value, '"DEFAULT"')), Applicability.UNSAFE)
