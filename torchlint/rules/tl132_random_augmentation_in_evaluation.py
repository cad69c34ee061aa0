"""TL132: random data augmentation in the transforms of an evaluation (test / validation) dataset."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext

_RANDOM_EXTRA = frozenset({"ColorJitter", "RandAugment", "AutoAugment", "TrivialAugmentWide", "AugMix",
                           "ElasticTransform"})
_EVALUATION_NAME = re.compile(r"(?:^|_)(?:test|val|valid|validation|eval|evaluation)(?:_|$|\d)", re.IGNORECASE)
_EVALUATION_SPLITS = frozenset({"test", "val", "valid", "validation", "eval"})


class RandomAugmentationInEvaluation(Rule):
    code = "TL132"
    name = "random-augmentation-in-evaluation"
    summary = "Random augmentation (`RandomResizedCrop`, `RandomHorizontalFlip`, `ColorJitter`) in the transforms of a test or validation set"
    fix_availability = "none"
    default_severity = Severity.WARNING
    severity_docs = """
A **warning**: every evaluation sees different random crops, flips and colours, so the reported
metric is noisy from run to run and biased (usually low: random crops cut objects out); how much
depends on the data.
"""
    triggers = ("Random", "ColorJitter", "AutoAugment", "RandAugment", "TrivialAugment", "AugMix")
    node_types = (cst.Call,)
    confirmation_module = "tl132"
    docs = """
## What it does
Flags a random torchvision transform (`RandomResizedCrop`, `RandomCrop`, `RandomHorizontalFlip`,
`RandomRotation`, `ColorJitter`, `RandAugment`, `RandomErasing`, any `Random*`) inside the
`transforms.Compose([...])` of an evaluation set:

- passed as `transform=` to a dataset built with `train=False` or `split="test"` / `"val"`;
- assigned to a name that says so (`test_transform`, `transform_val`, `valid_tf`), or to the
  `'val'` / `'test'` entry of a dict of transforms (`data_transforms = {'train': ..., 'val': ...}`).

Not flagged: training transforms, deterministic ones (`Resize`, `CenterCrop`, `Normalize`), files
that mention test-time augmentation (`tta`), and `p=0` flips.

## Why is this bad?
Evaluation should measure one fixed function of one fixed input. A random crop or flip makes
every evaluation pass see different inputs: measured on torch 2.13, `RandomResizedCrop(4)` of
the same 8×8 image gives different tensors on two calls, so two evaluations of the same model
disagree, and the numbers cannot be compared between epochs or with published ones. Random
crops also cut objects out, which lowers accuracy; early stopping and model selection then
follow the noise.

## Example
```python
test_transform = transforms.Compose([
    transforms.RandomResizedCrop(224),
    transforms.ToTensor(),
])
```

Use instead:
```python
test_transform = transforms.Compose([
    transforms.Resize(256),
    transforms.CenterCrop(224),
    transforms.ToTensor(),
])
```

## Fix safety
No fix: the deterministic replacement (`Resize` + `CenterCrop`) depends on the training crop.

## References
- https://pytorch.org/vision/stable/transforms.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        member = _random_transform(sem, node)
        if member is None:
            return
        compose = _enclosing_compose(sem, node)
        if compose is None or _mentions_tta(sem):
            return
        why = _evaluation_use(sem, compose)
        if why is None:
            return
        ctx.report(node, f"`{ctx.short(node, 40)}` is a random augmentation in the transforms of an evaluation set "
                         f"({why}): each evaluation sees different random inputs, so the metric is noisy and biased; "
                         f"use deterministic transforms there (`Resize` + `CenterCrop`)", severity=Severity.WARNING)


def _mentions_tta(sem) -> bool:
    """The file speaks of test-time augmentation (`tta` in a name, string or comment): random
    transforms at evaluation are its purpose. Asked once per file."""
    found = sem.__dict__.get("_mentions_tta")
    if found is None:
        found = any("tta" in node.value.lower() for node in sem.index.nodes(cst.Name)) or \
            "tta" in sem.source(sem.module).lower()  # comments too: generated once per file
        sem.__dict__["_mentions_tta"] = found
    return found


def _random_transform(sem, call: cst.Call) -> Optional[str]:
    name = sem.qualified_name(call.func)
    if name is None or not name.startswith("torchvision.transforms."):
        return None
    member = name.rsplit(".", 1)[-1]
    if not (member.startswith("Random") or member in _RANDOM_EXTRA):
        return None
    for argument in call.args:
        if (argument.keyword is not None and argument.keyword.value == "p" or argument.keyword is None
                and member.endswith("Flip") and argument is call.args[0]) \
                and isinstance(argument.value, (cst.Integer, cst.Float)) and float(argument.value.value) == 0:
            return None
    return member


def _enclosing_compose(sem, call: cst.Call) -> Optional[cst.Call]:
    """The `transforms.Compose([...])` whose list holds `call` directly."""
    element = sem.parent(call)
    if not isinstance(element, cst.Element):
        return None
    listing = sem.parent(element)
    if not isinstance(listing, (cst.List, cst.Tuple)):
        return None
    argument = sem.parent(listing)
    compose = sem.parent(argument) if isinstance(argument, cst.Arg) else None
    if not isinstance(compose, cst.Call):
        return None
    name = sem.qualified_name(compose.func)
    if name is None or not name.startswith("torchvision.transforms.") or not name.endswith("Compose"):
        return None
    return compose


def _evaluation_use(sem, compose: cst.Call) -> Optional[str]:
    parent = sem.parent(compose)
    # `{'train': Compose(...), 'val': Compose(...)}`
    if isinstance(parent, cst.DictElement) and parent.value is compose:
        key = parent.key
        if isinstance(key, cst.SimpleString) and key.evaluated_value.lower() in _EVALUATION_SPLITS:
            return f"the `{key.evaluated_value}` entry"
        return None
    # `test_transform = Compose(...)`
    statement = sem.statement_of(compose)
    if isinstance(statement, cst.Assign) and statement.value is compose and len(statement.targets) == 1:
        target = statement.targets[0].target
        spelled = target.value if isinstance(target, cst.Name) else (
            target.attr.value if isinstance(target, cst.Attribute) else None)
        if spelled is not None and _EVALUATION_NAME.search(spelled) and not re.search("train", spelled, re.I):
            return f"`{spelled}`"
        if isinstance(target, cst.Name):
            for use in sem.index.names_spelled(target.value):
                why = _dataset_use(sem, use)
                if why is None:
                    continue
                reaching = sem.values.flow.reaching(use)
                if reaching and any(d.target is target for d in reaching):
                    return why  # this Compose is the one the evaluation set gets there
        return None
    # `MNIST(root, train=False, transform=Compose(...))`
    if isinstance(parent, cst.Arg):
        return _dataset_use(sem, compose)
    return None


def _dataset_use(sem, value: cst.CSTNode) -> Optional[str]:
    """`value` is the `transform=` of a dataset built with `train=False` or an evaluation split."""
    argument = sem.parent(value)
    if not (isinstance(argument, cst.Arg) and argument.value is value and argument.keyword is not None
            and argument.keyword.value == "transform"):
        return None
    call = sem.parent(argument)
    if not isinstance(call, cst.Call):
        return None
    for other in call.args:
        if other.keyword is None:
            continue
        if other.keyword.value == "train" and isinstance(other.value, cst.Name) and other.value.value == "False":
            return "a dataset built with `train=False`"
        if other.keyword.value == "split" and isinstance(other.value, cst.SimpleString) \
                and other.value.evaluated_value.lower() in _EVALUATION_SPLITS:
            return f"a dataset built with `split={other.value.value}`"
    return None


__all__ = ["RandomAugmentationInEvaluation"]
