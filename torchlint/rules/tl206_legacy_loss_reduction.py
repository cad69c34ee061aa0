"""TL206: `size_average=` / `reduce=` on torch losses, replaced by `reduction=` in PyTorch 0.4.1."""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from torchlint.analysis import legacy
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_REDUCTION_PARAMETERS = ("size_average", "reduce", "reduction")


class LegacyLossReduction(Rule):
    code = "TL206"
    name = "legacy-loss-reduction"
    summary = "`size_average=`/`reduce=` on a loss are deprecated and override `reduction=`: use the exact `reduction=`"
    fix_availability = "sometimes"
    # By keyword, or by position in a call whose name every loss class or function has in it.
    triggers = ("size_average", "reduce", "Loss", "_loss", "cross_entropy", "kl_div")
    node_types = (cst.Call,)
    confirmation_module = "tl206"
    default_severity = Severity.NOTE
    severity_docs = """
A **note**: `size_average=`/`reduce=` still work (with a UserWarning on every call)
and compute the same loss as the matching `reduction=`: a deprecated spelling, no effect on
results today.
"""
    docs = """
## What it does
Flags `size_average=` and `reduce=` (by keyword or by position) in the construction of a torch
loss (`nn.MSELoss(size_average=False)`, `nn.CrossEntropyLoss(reduce=False)`) and in the
functional losses (`F.nll_loss(out, y, size_average=False)`), unless every one of them is
`None` or a parameter with the default `None` passed on (`def my_loss(x, y, size_average=None):
return F.l1_loss(x, y, size_average=size_average)`: a wrapper that warns only when its caller
sets the flag).

Not flagged: `reduction=`; a `size_average` or `reduce` argument of anything that is not one of
torch's losses (a function of your own, `Tensor.scatter_(..., reduce="add")`).

## Why is this bad?
PyTorch 0.4.1 replaced the two flags with `reduction=`. They still work, but measured on torch
2.13 each call warns `UserWarning: size_average and reduce args will be deprecated, please use
reduction='sum' instead.`, and their meaning is easy to get wrong: a flag left out counts as
`True`, `reduce=False` wins over `size_average` (per-element losses), and when either flag is
given any `reduction=` argument is silently ignored. The exact mapping (checked on torch 2.13 for
every combination of `None`/`True`/`False`, with and without `reduction=`):

| `size_average` | `reduce` | `reduction` |
| --- | --- | --- |
| `True` or left out | `True` or left out | `"mean"` |
| `False` | `True` or left out | `"sum"` |
| anything | `False` | `"none"` |

## Example
```python
criterion = nn.MSELoss(size_average=False)
test_loss += F.nll_loss(output, target, size_average=False).item()
```

Use instead:
```python
criterion = nn.MSELoss(reduction="sum")
test_loss += F.nll_loss(output, target, reduction="sum").item()
```

## Fix safety
The fix replaces the flags (and any `reduction=` they override) with the `reduction=` above, and
passes by keyword the arguments that followed a flag given by position. It is safe: the loss
computes the same value. No fix is offered when a flag is not a literal (`size_average=avg`) or
when `*args`/`**kwargs` hide which argument is which.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.MSELoss.html (`size_average`, `reduce`: deprecated)
- https://github.com/pytorch/pytorch/blob/main/torch/nn/_reduction.py (`legacy_get_string`)
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        parameters = legacy.loss_parameters(sem, node)
        if parameters is None:
            return
        flags = _legacy_flags(node, parameters)
        if not flags or all(legacy.literal_flag(arg.value) is None or _forwarded_default_none(sem, arg.value)
                            for _, arg in flags):
            return
        values = {name: legacy.literal_flag(arg.value) for name, arg in flags}
        written = ", ".join(f"{name}={ctx.short(arg.value, 12)}" for name, arg in flags)
        first = flags[0][1]
        if any(value is legacy.UNKNOWN for value in values.values()):
            ctx.report(
                first,
                f"`{written}` is deprecated since PyTorch 0.4.1 (a UserWarning on every call) and overrides "
                "`reduction=`; write the matching `reduction=`: \"mean\" when both flags are true or left out, "
                "\"sum\" when only `size_average` is false, \"none\" when `reduce` is false",
            )
            return
        reduction = legacy.reduction_for(values.get("size_average"), values.get("reduce"))
        ctx.report(
            first,
            f"`{written}` is deprecated since PyTorch 0.4.1 (a UserWarning on every call) and overrides "
            f"`reduction=`; the exact equivalent is `reduction=\"{reduction}\"`",
            _fix(ctx, node, parameters, reduction),
        )


def _forwarded_default_none(sem, value: cst.BaseExpression) -> bool:
    """`size_average=size_average` inside `def f(..., size_average=None)`: a wrapper passing its
    caller's flag on; only the caller who sets it gets the warning."""
    if not isinstance(value, cst.Name):
        return False
    definition = sem.reaching_definition(value)
    if definition is None or definition.kind != "param":
        return False
    default = definition.target.default
    return default is not None and legacy.literal_flag(default) is None


def _legacy_flags(call: cst.Call, parameters: Tuple[str, ...]) -> List[Tuple[str, cst.Arg]]:
    """(parameter name, argument) for each `size_average`/`reduce` the call passes, in order."""
    bound = legacy.bound_arguments(call, parameters)
    if bound is None:
        bound = {arg.keyword.value: arg for arg in call.args if arg.keyword is not None}
    flags = [(name, arg) for name, arg in bound.items() if name in legacy.LEGACY_REDUCTION_ARGS]
    order = {id(arg): position for position, arg in enumerate(call.args)}
    return sorted(flags, key=lambda item: order[id(item[1])])


def _fix(ctx: RuleContext, call: cst.Call, parameters: Tuple[str, ...], reduction: str) -> Optional[FixSpec]:
    if any(arg.star for arg in call.args):
        return None
    new_reduction = legacy.keyword_argument("reduction", cst.SimpleString(f'"{reduction}"'))
    args: List[cst.Arg] = []
    placed = False
    by_keyword = False  # once a flag given by position is dropped, later positionals need names
    position = 0
    for arg in call.args:
        if arg.keyword is None:
            name = parameters[position]
            position += 1
        else:
            name = arg.keyword.value
        if name in _REDUCTION_PARAMETERS:
            if not placed:
                args.append(new_reduction)
                placed = True
            by_keyword = by_keyword or arg.keyword is None
            continue
        if by_keyword and arg.keyword is None:
            arg = legacy.keyword_argument(name, arg.value).with_changes(comma=arg.comma)
        args.append(arg)
    fixed = legacy.render_in_place(ctx.semantic, call, legacy.with_arguments(call, args))
    return FixSpec(f'Use `reduction="{reduction}"`', (Replace(call, fixed),), Applicability.SAFE)
