"""TL122: `torch.log(torch.softmax(x, d))` and `torch.log(torch.sum(torch.exp(x), d))` overflow:
`log_softmax`, `logsumexp`."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import evaluation
from torchlint.analysis import value as v
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_LOG = "torch.log"
_SUM = "torch.sum"
_EXP = "torch.exp"
# softmax function -> the fused log-softmax on the same module (each exists in torch 2.13)
_LOG_SOFTMAX = {
    "torch.softmax": "log_softmax",
    "torch.nn.functional.softmax": "log_softmax",
    "torch.special.softmax": "log_softmax",
}


# Functions whose body is the stable form being implemented (torch's own `_refs.logsumexp`, a
# hand-written `log_softmax`): a log of a sum of exponentials there is the implementation.
_STABLE_NAMES = frozenset({"logsumexp", "log_softmax", "log_sum_exp", "logsoftmax"})


class UnstableLogOfSoftmax(Rule):
    code = "TL122"
    name = "unstable-log-of-softmax"
    summary = "`log(softmax(x))` / `log(sum(exp(x)))` give -inf / inf for large logits: use `log_softmax` / `logsumexp`"
    fix_availability = "sometimes"
    default_severity = Severity.WARNING
    severity_docs = """
A **warning**: `log(softmax(x))` gives -inf (and NaN gradients) and `log(sum(exp(x)))` overflows
once the logits grow, which depends on the data's scale.
"""
    triggers = ("log",)
    node_types = (cst.Call,)
    confirmation_module = "tl122"
    docs = """
## What it does
Flags the logarithm (`torch.log(p)`, `p.log()`) of
- a softmax output: `torch.softmax(x, d)`, `F.softmax(x, dim=d)`, `x.softmax(d)`,
  `nn.Softmax(dim=d)(x)`, a variable assigned one of them, or the output of a model defined in
  the same file whose last layer is `nn.Softmax`;
- a sum of exponentials over a dimension: `torch.sum(torch.exp(x), d)`, `torch.exp(x).sum(d)`.

Not flagged: `torch.log(p + eps)` and other arithmetic between the two (the author guards
against `log(0)`); a sum with no `dim`, or `dim=None` (there is no `torch.logsumexp` without a
dimension); `torch.sum(torch.exp(x) + c, d)`; the exponential of a difference
(`torch.exp(x - x_max)`, directly or through a variable: the max-shift of the log-sum-exp trick
written by hand); code inside a function named `logsumexp` / `log_softmax` (their
implementation); `log_softmax` and `logsumexp` themselves.

## Why is this bad?
Softmax and `exp` leave float range long before the logits look unusual. Measured on torch
2.13 (float32): `torch.log(torch.softmax(torch.tensor([1e4, 0, -1e4]), 0))` is `[0, -inf,
-inf]` while `torch.log_softmax` gives `[0, -1e4, -2e4]`; `torch.log(torch.sum(torch.exp(x),
1))` of `[[1000, 1000]]` is `inf` while `torch.logsumexp(x, 1)` is `1000.69`. One `-inf` in a
loss makes it `inf` and its gradient NaN, and the NaN spreads into every weight at the next
step. `log_softmax` / `logsumexp` subtract the maximum first and stay finite. Whether it happens
depends on the scale of the logits, so the finding is a warning.

## Example
```python
log_probs = torch.log(F.softmax(logits, dim=1))
log_z = torch.log(torch.sum(torch.exp(scores), dim=1))
```

Use instead:
```python
log_probs = F.log_softmax(logits, dim=1)
log_z = torch.logsumexp(scores, dim=1)
```

## Fix safety
Where the softmax or the sum is written inside the logarithm, the fix rewrites the pair as one
call with the same arguments: `torch.log(F.softmax(x, dim=1))` becomes `F.log_softmax(x, dim=1)`,
`torch.log(x.softmax(1))` becomes `x.log_softmax(1)`, `torch.log(torch.sum(torch.exp(x), 1,
keepdim=True))` becomes `torch.logsumexp(x, 1, keepdim=True)`. It is unsafe: the values change
(finite where they were `-inf`/`inf`, and in the last bits elsewhere), so code that tested for
`-inf`, or compares results bit for bit, sees a difference. No fix for a softmax reached through
a variable or a model, a sum with `dtype=`, or `*args`.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.functional.log_softmax.html
- https://pytorch.org/docs/stable/generated/torch.logsumexp.html
- https://github.com/pytorch/pytorch/issues/144339 (`logsumexp` needs a dimension)
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        argument = _log_argument(sem, node)
        if argument is None:
            return
        function = sem.function_of(node)
        if function is not None and function.name.value.lstrip("_") in _STABLE_NAMES:
            return  # the implementation of log_softmax / logsumexp itself
        softmax = evaluation.activation_output(sem, argument, "softmax")
        if softmax is not None:
            self._report_softmax(node, argument, softmax, ctx)
            return
        exp_input = _sum_of_exp(sem, argument)
        if exp_input is not None:
            ctx.report(
                node,
                f"`{ctx.short(node, 40)}` overflows to inf once a value passes ~88 in float32 "
                "(inf for [[1000, 1000]]); `torch.logsumexp(x, dim)` is the stable form",
                _logsumexp_fix(node, argument, exp_input, ctx),
                severity=Severity.WARNING,
            )

    def _report_softmax(self, node: cst.Call, argument: cst.BaseExpression, softmax: cst.CSTNode,
                        ctx: RuleContext) -> None:
        via = "" if softmax is argument else f" (`{ctx.short(softmax, 40)}`)"
        ctx.report(
            node,
            f"`{ctx.short(node, 40)}` is the log of a softmax{via}: -inf once the logits spread "
            "([1e4, 0, -1e4] gives [0, -inf, -inf]) and NaN gradients; use `log_softmax`",
            _log_softmax_fix(node, argument, softmax, ctx),
            severity=Severity.WARNING,
        )


def _log_argument(sem, call: cst.Call) -> Optional[cst.BaseExpression]:
    """`x` of `torch.log(x)` (one positional argument) or of `x.log()` on a tensor."""
    if sem.call_name(call) == _LOG:
        if len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star:
            return call.args[0].value
        return None
    func = call.func
    if type(func) is cst.Attribute and func.attr.value == "log" and not call.args \
            and sem.qualified_name(func) is None:
        return func.value
    return None


def _sum_of_exp(sem, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """For `torch.sum(torch.exp(x), d)` / `torch.exp(x).sum(d)` with a dimension that is not
    None: `x`; else None."""
    expr = sem.assigned_value(expr) if isinstance(expr, cst.Name) else expr
    if not isinstance(expr, cst.Call):
        return None
    if sem.call_name(expr) == _SUM:
        if not expr.args or expr.args[0].keyword is not None or expr.args[0].star:
            return None
        summed, rest = expr.args[0].value, expr.args[1:]
    elif isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "sum" \
            and sem.qualified_name(expr.func) is None:
        summed, rest = expr.func.value, expr.args
    else:
        return None
    if not _has_dimension(rest):
        return None
    summed = sem.assigned_value(summed) if isinstance(summed, cst.Name) else summed
    if not isinstance(summed, cst.Call):
        return None
    exponent = None
    if sem.call_name(summed) == _EXP and len(summed.args) == 1 and summed.args[0].keyword is None \
            and not summed.args[0].star:
        exponent = summed.args[0].value
    func = summed.func
    if isinstance(func, cst.Attribute) and func.attr.value == "exp" and not summed.args \
            and sem.qualified_name(func) is None and sem.values.of(func.value).kind in v.TENSOR_KINDS:
        exponent = func.value
    if exponent is None or _is_shifted(sem, exponent):
        return None
    return exponent


def _is_shifted(sem, exponent: cst.BaseExpression) -> bool:
    """`exp(x - m)`: a difference inside the exponential is the max-shift of the log-sum-exp trick
    done by hand (`shifted = x - x.amax(dim, keepdim=True)`), which stays finite."""
    exponent = sem.assigned_value(exponent) if isinstance(exponent, cst.Name) else exponent
    return isinstance(exponent, cst.BinaryOperation) and isinstance(exponent.operator, cst.Subtract)


def _has_dimension(args) -> bool:
    """`sum(x, 1)`, `sum(x, dim=1)`: a dimension is given and is not None."""
    for index, arg in enumerate(args):
        if arg.star:
            return False
        if (arg.keyword is None and index == 0) or (arg.keyword is not None and arg.keyword.value == "dim"):
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "None")
    return False


def _log_softmax_fix(node: cst.Call, argument: cst.BaseExpression, softmax: cst.CSTNode,
                     ctx: RuleContext) -> Optional[FixSpec]:
    if softmax is not argument or not isinstance(argument, cst.Call):
        return None
    if any(arg.star for arg in argument.args):
        return None
    sem = ctx.semantic
    func = argument.func
    args = ", ".join(_arg_text(arg, ctx) for arg in argument.args)
    name = sem.call_name(argument)
    if name in _LOG_SOFTMAX and isinstance(func, cst.Attribute):
        text = f"{ctx.code(func.value)}.{_LOG_SOFTMAX[name]}({args})"
    elif name is None and isinstance(func, cst.Attribute) and func.attr.value == "softmax":
        text = f"{ctx.code(func.value)}.log_softmax({args})"
    else:
        return None
    return FixSpec("Use `log_softmax`", (Replace(node, text),), Applicability.UNSAFE)


def _logsumexp_fix(node: cst.Call, argument: cst.BaseExpression, exp_input: cst.BaseExpression,
                   ctx: RuleContext) -> Optional[FixSpec]:
    sem = ctx.semantic
    if not isinstance(argument, cst.Call) or sem.call_name(argument) != _SUM:
        return None
    if not isinstance(argument.func, cst.Attribute):
        return None
    summed = argument.args[0].value
    if not (isinstance(summed, cst.Call) and sem.call_name(summed) == _EXP):
        return None  # the exp is reached through a variable: the fix would drop its use
    rest = argument.args[1:]
    if any(arg.keyword is not None and arg.keyword.value not in ("dim", "keepdim") for arg in rest):
        return None  # dtype= / out=: logsumexp has no such argument
    if len([arg for arg in rest if arg.keyword is None]) > 2:
        return None
    parts = [ctx.code(exp_input)] + [_arg_text(arg, ctx) for arg in rest]
    text = f"{ctx.code(argument.func.value)}.logsumexp({', '.join(parts)})"
    return FixSpec("Use `logsumexp`", (Replace(node, text),), Applicability.UNSAFE)


def _arg_text(arg: cst.Arg, ctx: RuleContext) -> str:
    value = ctx.code(arg.value)
    return value if arg.keyword is None else f"{arg.keyword.value}={value}"
