"""TL129: the logits a model is trained on with BCEWithLogitsLoss, thresholded at 0.5 (a
probability threshold) instead of 0."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.value import CRITERION
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_WITH_LOGITS = frozenset({"torch.nn.BCEWithLogitsLoss"})
_FUNCTIONAL = frozenset({"torch.nn.functional.binary_cross_entropy_with_logits"})
_SHAPE_KEEPING = frozenset({"squeeze", "view", "reshape", "flatten", "float", "detach", "cpu", "cuda", "to",
                            "view_as", "contiguous", "double"})


class LogitsThresholdedAtHalf(Rule):
    code = "TL129"
    name = "logits-thresholded-at-half"
    summary = "Logits of a model trained with `BCEWithLogitsLoss` thresholded at 0.5: that is probability 0.62, not 0.5"
    fix_availability = "always"
    default_severity = Severity.WARNING
    severity_docs = """
A **warning**: predictions count as positive only where the probability exceeds sigmoid(0.5) ≈
0.62, so accuracy, precision and recall are those of another classifier; how much they move
depends on how many outputs fall between logits 0 and 0.5.
"""
    triggers = ("0.5", "round")
    node_types = (cst.Comparison, cst.Call)
    confirmation_module = "tl129"
    docs = """
## What it does
Flags `out > 0.5` (`>=`, `<`, `<=`, and `torch.round(out)` / `out.round()`) where `out` is the
output of a model (`model(x)`, or a name assigned from it, through `squeeze`/`view`/`detach`/...)
that the same file trains with `nn.BCEWithLogitsLoss` or
`F.binary_cross_entropy_with_logits`: the model's output is a logit.

Not flagged: `torch.sigmoid(out) > 0.5`, `out > 0`, models whose output the file never passes
to a with-logits loss, and outputs of another model.

## Why is this bad?
`BCEWithLogitsLoss` applies the sigmoid itself, so the model learns logits: a logit of 0 is
probability 0.5. Thresholding the logit at 0.5 means thresholding the probability at
sigmoid(0.5) ≈ 0.62. Measured on torch 2.13: for logits `[0.2, 0.4, 0.6, -1.0]`, `logits > 0.5`
predicts `[0, 0, 1, 0]` while `torch.sigmoid(logits) > 0.5` (and `logits > 0`) predicts `[1, 1, 1,
0]`. The evaluation reports the accuracy of a different, biased classifier. `torch.round` of a
logit is wrong the same way (it rounds at 0.5, and gives values outside {0, 1}).

## Example
```python
criterion = nn.BCEWithLogitsLoss()
loss = criterion(model(x), y)
...
preds = model(x) > 0.5
```

Use instead:
```python
preds = torch.sigmoid(model(x)) > 0.5  # or: model(x) > 0
```

## Fix safety
Safe for comparisons: `0.5` becomes `0`, the same decision as `sigmoid(out) > 0.5`. No fix for
`round`.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.BCEWithLogitsLoss.html
"""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if isinstance(node, cst.Comparison):
            if len(node.comparisons) != 1:
                return
            target = node.comparisons[0]
            if not isinstance(target.operator, (cst.GreaterThan, cst.GreaterThanEqual, cst.LessThan,
                                                cst.LessThanEqual)) or not _is_half(target.comparator):
                return
            logits = node.left
            half = target.comparator
        else:
            logits = _rounded(sem, node)
            half = None
            if logits is None:
                return
        model = _model_of(sem, logits)
        if model is None or model not in _with_logits_models(sem):
            return
        if half is not None:
            fix = FixSpec("Threshold the logits at 0", (Replace(half, "0"),), Applicability.SAFE)
            ctx.report(node, f"`{ctx.short(logits, 30)}` is a logit (`{model}` is trained with a with-logits BCE "
                             f"loss): thresholding it at 0.5 is a probability threshold of 0.62; compare with 0, or "
                             f"apply `torch.sigmoid` first", fix, severity=Severity.WARNING)
        else:
            ctx.report(node, f"`{ctx.short(node, 40)}` rounds a logit (`{model}` is trained with a with-logits BCE "
                             f"loss): that thresholds the probability at 0.62 and gives values outside {{0, 1}}; use "
                             f"`({ctx.short(logits, 30)} > 0)`", severity=Severity.WARNING)


def _is_half(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Float) and float(expr.value) == 0.5


def _rounded(sem, call: cst.Call) -> Optional[cst.BaseExpression]:
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "round" and not call.args \
            and not (isinstance(call.func.value, cst.Name) and call.func.value.value in ("torch", "np", "numpy")):
        return call.func.value
    if sem.qualified_name(call.func) == "torch.round" and len(call.args) == 1:
        return call.args[0].value
    return None


def _strip(expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
            and expr.func.attr.value in _SHAPE_KEEPING:
        expr = expr.func.value
    while isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        expr = expr.value
    return expr


def _model_of(sem, expr: cst.BaseExpression) -> Optional[str]:
    """The spelling of the model whose output `expr` is: `model` for `model(x)`, or for a name
    every assignment of which in its scope is `model(...)` (through shape-keeping steps)."""
    expr = _strip(expr)
    if isinstance(expr, cst.Name):
        scope = sem.scopes.scope_of(expr)
        values = []
        for assign in sem.index.nodes(cst.Assign):
            if sem.scopes.scope_of(assign) is not scope:
                continue
            for target in assign.targets:
                if isinstance(target.target, cst.Name) and target.target.value == expr.value:
                    values.append(assign.value)
                elif isinstance(target.target, (cst.Tuple, cst.List)) and any(
                        isinstance(e.value, cst.Name) and e.value.value == expr.value for e in target.target.elements):
                    return None
        spellings = {_call_spelling(sem, _strip(v)) for v in values}
        if len(spellings) != 1:
            return None
        return spellings.pop()
    return _call_spelling(sem, expr)


def _call_spelling(sem, expr: cst.BaseExpression) -> Optional[str]:
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, (cst.Name, cst.Attribute)):
        return None
    try:
        value = sem.values.of(expr.func)
    except Exception:  # noqa: BLE001
        return None
    if value.kind != "module":
        return None
    if sem.values.output_activation(value) is not None:
        return None
    return sem.source(expr.func)


def _with_logits_models(sem) -> frozenset:
    """The spellings of the models whose outputs the file passes to a with-logits BCE loss."""
    cached = sem.__dict__.get("_tl129_models")
    if cached is not None:
        return cached
    found = set()
    for call in sem.index.nodes(cst.Call):
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if not positional:
            continue
        qualified = sem.qualified_name(call.func)
        with_logits = qualified in _FUNCTIONAL
        if not with_logits and isinstance(call.func, (cst.Name, cst.Attribute)) and qualified is None:
            try:
                value = sem.values.of(call.func)
            except Exception:  # noqa: BLE001
                continue
            with_logits = value.kind == CRITERION and value.detail in _WITH_LOGITS
        if not with_logits:
            continue
        model = _model_of(sem, positional[0].value)
        if model is not None:
            found.add(model)
    result = frozenset(found)
    sem.__dict__["_tl129_models"] = result
    return result


__all__ = ["LogitsThresholdedAtHalf"]
