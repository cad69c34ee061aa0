"""TL115: `x == float("nan")` is never true (and `!=` always true): NaN equals nothing."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import silent
from torchlint.analysis.semantic import Semantic
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext


class ComparisonWithNan(Rule):
    code = "TL115"
    name = "comparison-with-nan"
    summary = "`x == float(\"nan\")` is never true (`!=` always): use `torch.isnan(x)` / `math.isnan(x)`"
    fix_availability = "sometimes"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: the NaN check never fires (`==`) or always fires (`!=`). A **note** for `np.nan ==
np.nan` and the like, a comparison of two constants that is usually a demonstration.
"""
    triggers = ("nan", "NaN", "NAN")
    node_types = (cst.Comparison,)
    confirmation_module = "tl115"
    docs = """
## What it does
Flags `==` and `!=` comparisons with a NaN constant: `float("nan")` (any case, any sign),
`math.nan`, `np.nan` (`np.NaN`, `np.NAN`), `torch.nan`, on either side. `torch.isnan(x)`,
`math.isnan(x)`, `np.isnan(x)` and `x != x` are not flagged. The message advises
`torch.isnan(x)` for a tensor, `math.isnan(x)` for a number, and `df.isna()` / `np.isnan(a)`
for a name bound to a pandas / NumPy call (`df = pd.DataFrame(...)`).

Severity: an error (the check never fires); a note for a NaN compared with a NaN
(`np.nan == np.nan`, usually a demonstration of the rule itself).

## Why is this bad?
IEEE 754 NaN compares unequal to everything, itself included, in Python, numpy and torch alike.
Measured on torch 2.13: `torch.tensor(float("nan")) == float("nan")` is `tensor(False)`,
`float("nan") == math.nan` is `False`, `float("nan") != float("nan")` is `True`. So
`if loss == float("nan"): break` never stops a diverged run, and an
`assert loss != np.nan` always passes: the check the author wrote never fires.

## Example
```python
if loss == float("nan"):
    raise RuntimeError("training diverged")
if lr != math.nan:
    ...
```

Use instead:
```python
if torch.isnan(loss):
    raise RuntimeError("training diverged")
if not math.isnan(lr):
    ...
```

## Fix safety
When the other side is a tensor and the file imports `torch`, the fix writes `torch.isnan(x)`
(`~torch.isnan(x)` for `!=`); when it is a Python number and the file imports `math`,
`math.isnan(x)` (`not math.isnan(x)`). It is unsafe: the comparison now holds for NaN, so the
branch it guards starts to run (that is the point). Other operands get no fix.

## References
- https://pytorch.org/docs/stable/generated/torch.isnan.html
- https://docs.python.org/3/library/math.html#math.isnan
"""

    def check(self, node: cst.Comparison, ctx: RuleContext) -> None:
        sem = ctx.semantic
        left = node.left
        for target in node.comparisons:
            operator = target.operator
            right = target.comparator
            if isinstance(operator, (cst.Equal, cst.NotEqual)):
                if silent.is_nan_constant(sem, right):
                    other = left
                elif silent.is_nan_constant(sem, left):
                    other = right
                else:
                    other = None
                if other is not None:
                    equal = isinstance(operator, cst.Equal)
                    # `np.nan == np.nan` is a demonstration more often than a check
                    both = silent.is_nan_constant(sem, other)
                    never = "never true" if equal else "always true"
                    ctx.report(
                        node,
                        f"`{ctx.short(node, 50)}` is {never}: NaN compares unequal to everything, "
                        f"itself included, so the check never fires; use {_advice(sem, ctx, other, equal)}",
                        None if both else _fix(sem, ctx, node, other, equal),
                        severity=Severity.NOTE if both else Severity.ERROR)
                    return
            left = right


def _advice(sem: Semantic, ctx: RuleContext, other: cst.BaseExpression, equal: bool) -> str:
    value = sem.values.of(other)
    spelled = ctx.short(other, 30)
    tensor = f"`{'' if equal else '~'}torch.isnan({spelled})`"
    number = f"`{'' if equal else 'not '}math.isnan({spelled})`"
    if value.is_tensor:
        return tensor
    if value.kind == "number":
        return number
    library = _built_by(sem, other)
    if library == "pandas":  # `df = pd.DataFrame(...)`: neither torch.isnan nor math.isnan takes it
        return f"`{spelled}.{'isna' if equal else 'notna'}()`"
    if library == "numpy":
        return f"`{'' if equal else '~'}np.isnan({spelled})`"
    return f"{tensor} for a tensor, {number} for a number"


def _built_by(sem: Semantic, other: cst.BaseExpression) -> Optional[str]:
    """`pandas` or `numpy` when `other` is a name certainly bound to a call of that library."""
    root = sem.assigned_call_package(other)
    return root if root in ("pandas", "numpy") else None


def _fix(sem: Semantic, ctx: RuleContext, node: cst.Comparison, other: cst.BaseExpression,
         equal: bool) -> Optional[FixSpec]:
    if len(node.comparisons) != 1 or node.lpar:
        return None
    value = sem.values.of(other)
    text = ctx.code(other)
    if value.is_tensor and _module_bound(sem, "torch"):
        replacement = f"torch.isnan({text})" if equal else f"~torch.isnan({text})"
    elif value.kind == "number" and _module_bound(sem, "math"):
        replacement = f"math.isnan({text})" if equal else f"not math.isnan({text})"
        if not equal and not _safe_for_not(sem, node):
            return None
    else:
        return None
    return FixSpec(f"Use `{replacement}`", (Replace(node, replacement),), Applicability.UNSAFE)


def _module_bound(sem: Semantic, name: str) -> bool:
    """The file binds `name` to the module of that name (`import torch`)."""
    return any(sem.qualified_name(n) == name for n in sem.index.names_spelled(name))


def _safe_for_not(sem: Semantic, node: cst.Comparison) -> bool:
    """`not ...` may replace `node` without parentheses: it stands on its own as a condition,
    an assert's test or a boolean operand."""
    parent = sem.parent(node)
    return isinstance(parent, (cst.If, cst.While, cst.Assert, cst.BooleanOperation, cst.Expr)) \
        or (isinstance(parent, cst.Assign) and parent.value is node)


__all__ = ["ComparisonWithNan"]
