"""TL121: `torch.log(1 + x)` and `torch.exp(x) - 1` lose every digit for small `x`: `log1p`, `expm1`."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import value as v
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

# Functions whose result is integer-valued: `1 + x` of such an `x` is exact (0, or at least 1), so
# log(1 + x) loses nothing (`torch.log(1 + torch.floor(pos / n))` in attention scaling).
_INTEGER_VALUED = frozenset({"torch.floor", "torch.ceil", "torch.round", "torch.trunc"})
_INTEGER_METHODS = frozenset({"floor", "ceil", "round", "trunc", "long", "int"})
# torch's logarithm / exponential and the fused function that replaces `f(1 + x)` / `f(x) - 1`.
_FUSED = {
    "torch.log": "log1p",
    "torch.exp": "expm1",
}


class Log1pExpm1(Rule):
    code = "TL121"
    name = "log1p-expm1"
    summary = "`torch.log(1 + x)` / `torch.exp(x) - 1` round small `x` away: use `torch.log1p(x)` / `torch.expm1(x)`"
    fix_availability = "sometimes"
    default_severity = Severity.NOTE
    severity_docs = """
A **note** for `log(1 + x)` / `exp(x) - 1`: precision is lost only for small `x`. A **warning** for
`log(1 + exp(t))`, softplus by hand: it overflows to inf with a NaN gradient once `t` is about 90
(float32), so the harm depends on the data.
"""
    triggers = ("log", "exp")
    node_types = (cst.Call, cst.BinaryOperation)
    confirmation_module = "tl121"
    docs = """
## What it does
Flags `torch.log(1 + x)` / `torch.log(x + 1)` (also with `1.0`, and `(1 + x).log()` on a
tensor) and `torch.exp(x) - 1` / `-1 + torch.exp(x)` (also with `1.0`, and `x.exp() - 1` on a
tensor), however torch is imported. `torch.log(1 + torch.exp(t))` is softplus written by hand
and is flagged as that.

Not flagged: other constants (`torch.log(2 + x)`, `torch.log(x + 1e-8)`, `torch.exp(x) - 2`),
`torch.log(1 + x)` of an integer-valued `x` (`torch.floor(...)`, `.round()`, `.long()`: `1 + x`
is exact, so there is nothing to lose),
`math.log` / `np.log`, `.log()` / `.exp()` on something not known to be a tensor, and the right
spellings `torch.log1p` / `torch.expm1` / `torch.special.expm1`.

## Why is this bad?
`1 + x` is rounded to float before the logarithm sees it, so every digit of a small `x` below
the float's resolution is lost; `exp(x) - 1` cancels the same digits after the fact. Measured on
torch 2.13 in float32 with `x = 1e-8`: `torch.log(1 + x)` and `torch.exp(x) - 1` are exactly
`0.0`, `torch.log1p(x)` and `torch.expm1(x)` are `1e-08`. It matters where `x` is small by design
(log-likelihoods of near-zero probabilities, softplus-style terms, continuous-time rates); for `x`
of ordinary size the results agree to rounding, so this is a note, not a bug report.

`torch.log(1 + torch.exp(t))` fails the other way: `exp` overflows first. Measured on torch
2.13: at `t = 100` it is `inf` and its gradient `nan` (`log1p(exp(t))` is `inf` too), while
`F.softplus(t)` is `100.0`. Guarding it with `torch.where(t > 20, t, torch.log(1 + torch.exp(t)))`
keeps the forward finite but not the backward: both branches are computed, and the gradient at
`t = 100` is `nan` (measured). That depends on the scale of `t`, so it is a warning.

## Example
```python
y = torch.log(1 + rate)
z = torch.exp(delta) - 1
```

Use instead:
```python
y = torch.log1p(rate)
z = torch.expm1(delta)
```

## Fix safety
The fix rewrites the call to `log1p` / `expm1` on the same module (`torch.log(1 + x)` becomes
`torch.log1p(x)`, `x.exp() - 1` becomes `x.expm1()`, `torch.log(1 + torch.exp(t))` becomes
`torch.nn.functional.softplus(t)`). It is unsafe: the values change (they
become more accurate, which is the point), and results compared bit for bit, or code that relied
on the rounded 0, see a difference. No fix is offered when the function was imported on its own
(`from torch import log`) or the call has other arguments (`out=`).

## References
- https://pytorch.org/docs/stable/generated/torch.log1p.html
- https://pytorch.org/docs/stable/generated/torch.expm1.html
- https://en.wikipedia.org/wiki/Catastrophic_cancellation
"""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        if type(node) is cst.Call:
            self._check_log(node, ctx)
        else:
            self._check_exp_minus_one(node, ctx)

    # -- log(1 + x) ---------------------------------------------------------------------------
    def _check_log(self, call: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        function = _torch_function(sem, call)
        if function == "torch.log":
            if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
                return
            x = _other_operand(call.args[0].value, cst.Add)
            if x is None:
                return
            fix = None
            if isinstance(call.func, cst.Attribute):
                fix = FixSpec("Use `log1p`", (Replace(call, f"{ctx.code(call.func.value)}.log1p({ctx.code(x)})"),),
                              Applicability.UNSAFE)
        elif _is_tensor_method(sem, call, "log"):
            x = _other_operand(call.func.value, cst.Add)
            if x is None:
                return
            fix = FixSpec("Use `.log1p()`", (Replace(call, f"({ctx.code(x)}).log1p()"
                                                     if _needs_parens(x) else f"{ctx.code(x)}.log1p()"),),
                          Applicability.UNSAFE)
        else:
            return
        if _integer_valued(sem, x):
            return  # x is 0 or at least 1: nothing to lose
        exponent = _exp_argument(sem, x)
        if exponent is not None:
            # log(1 + exp(t)) is softplus: exp overflows first, log1p would not help
            fix = None
            if isinstance(call.func, cst.Attribute) and sem.call_name(call) == "torch.log":
                fix = FixSpec("Use `softplus`", (Replace(
                    call, f"{ctx.code(call.func.value)}.nn.functional.softplus({ctx.code(exponent)})"),),
                    Applicability.UNSAFE) if isinstance(call.func.value, cst.Name) else None
            ctx.report(
                call,
                f"`{ctx.short(call, 40)}` is softplus written by hand: `exp` overflows for inputs "
                "above ~88 in float32 (inf, and a NaN gradient, at 100); use "
                "`torch.nn.functional.softplus(t)`",
                fix,
                severity=Severity.WARNING,
            )
            return
        ctx.report(
            call,
            f"`{ctx.short(call, 40)}` rounds `1 + x` first and loses all of a small `x` (0.0 for "
            "x = 1e-8 in float32); `log1p(x)` keeps it",
            fix,
            severity=Severity.NOTE,
        )

    # -- exp(x) - 1 ---------------------------------------------------------------------------
    def _check_exp_minus_one(self, node: cst.BinaryOperation, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if type(node.operator) is cst.Subtract and _is_one(node.right):
            exp = node.left
        elif type(node.operator) is cst.Add and _is_minus_one(node.left):
            exp = node.right
        else:
            return
        if not isinstance(exp, cst.Call):
            return
        if _torch_function(sem, exp) == "torch.exp":
            if len(exp.args) != 1 or exp.args[0].keyword is not None or exp.args[0].star:
                return
            fix = None
            if isinstance(exp.func, cst.Attribute):
                # The edit keeps a parenthesized `(exp(x) - 1)`'s own parentheses: the bare call.
                fix = FixSpec("Use `expm1`", (Replace(
                    node, f"{ctx.code(exp.func.value)}.expm1({ctx.code(exp.args[0].value)})"),),
                    Applicability.UNSAFE)
        elif _is_tensor_method(sem, exp, "exp") and not exp.args:
            fix = FixSpec("Use `.expm1()`", (Replace(node, f"{ctx.code(exp.func.value)}.expm1()"),),
                          Applicability.UNSAFE)
        else:
            return
        ctx.report(
            node,
            f"`{ctx.short(node, 40)}` cancels the digits of a small `x` (0.0 for x = 1e-8 in "
            "float32); `expm1(x)` keeps them",
            fix,
            severity=Severity.NOTE,
        )


def _integer_valued(sem, expr: cst.BaseExpression) -> bool:
    if not isinstance(expr, cst.Call):
        return False
    if sem.call_name(expr) in _INTEGER_VALUED:
        return True
    func = expr.func
    return isinstance(func, cst.Attribute) and func.attr.value in _INTEGER_METHODS \
        and sem.qualified_name(func) is None


def _exp_argument(sem, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`t` of `torch.exp(t)` or of `t.exp()` on a tensor; else None."""
    if not isinstance(expr, cst.Call):
        return None
    if sem.call_name(expr) == "torch.exp":
        if len(expr.args) == 1 and expr.args[0].keyword is None and not expr.args[0].star:
            return expr.args[0].value
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value == "exp" and not expr.args \
            and sem.qualified_name(func) is None:
        return func.value  # `t.exp()` inside a log already known to be of a tensor
    return None


def _torch_function(sem, call: cst.Call) -> Optional[str]:
    name = sem.call_name(call)
    return name if name in _FUSED else None


def _is_tensor_method(sem, call: cst.Call, method: str) -> bool:
    """`<tensor>.log()` where the receiver certainly is a tensor (`(1 + x).log()` with `x` a
    tensor: the value model gives the sum the tensor's kind)."""
    if not (type(call.func) is cst.Attribute and call.func.attr.value == method and not call.args):
        return False
    if sem.qualified_name(call.func) is not None:
        return False  # `torch.log()`, `np.log()`, `math.exp()`: a module's function, not a method
    receiver = call.func.value
    if isinstance(receiver, cst.BinaryOperation):
        # the value model may not type arithmetic with a literal: the other operand decides
        other = _other_operand(receiver, cst.Add)
        if other is not None:
            receiver = other
    return sem.values.of(receiver).kind in v.TENSOR_KINDS


def _number(node: cst.BaseExpression) -> Optional[float]:
    if isinstance(node, (cst.Integer, cst.Float)):
        try:
            return float(node.value)
        except ValueError:
            return None
    return None


def _is_one(node: cst.BaseExpression) -> bool:
    return _number(node) == 1.0


def _is_minus_one(node: cst.BaseExpression) -> bool:
    return (isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus)
            and _is_one(node.expression))


def _other_operand(expr: cst.BaseExpression, operator: type) -> Optional[cst.BaseExpression]:
    """For `1 + x` or `x + 1` (operator Add), `x`; else None."""
    if not isinstance(expr, cst.BinaryOperation) or not isinstance(expr.operator, operator):
        return None
    if _is_one(expr.left) and not _is_one(expr.right):
        return expr.right
    if _is_one(expr.right):
        return expr.left
    return None


def _needs_parens(node: cst.BaseExpression) -> bool:
    return not isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not node.lpar
