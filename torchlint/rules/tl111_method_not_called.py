"""TL111: `model.eval`, `optimizer.zero_grad`, `loss.backward` named as a statement, never called."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis import evaluation, silent
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_WHAT = {
    "module": "module",
    "optimizer": "optimizer",
    "scheduler": "scheduler",
    "grad_scaler": "GradScaler",
    "tensor": "tensor",
}


class MethodNotCalled(Rule):
    code = "TL111"
    name = "method-not-called"
    summary = "`model.eval` / `optimizer.step` / `loss.backward` without `()`: the method is named, never called"
    fix_availability = "always"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: the method never runs (the model stays in its mode, the gradients are never cleared,
the step never happens). A **warning** for `model.train` in a file that never switches the model to
eval mode, where the missing call changes nothing yet.
"""
    triggers = tuple(sorted({"." + m for names in silent.MUST_CALL.values() for m in names}))
    node_types = (cst.Expr,)
    confirmation_module = "tl111"
    docs = """
## What it does
Flags an expression statement that is only an attribute naming a method that acts when called,
on a receiver the analysis knows: `model.eval`, `model.train`, `model.cuda` on an
`nn.Module`; `optimizer.zero_grad`, `optimizer.step` on an optimizer; `scheduler.step` on a
learning-rate scheduler; `scaler.step`/`scaler.update` on a `GradScaler`; `loss.backward`,
`x.retain_grad`, `x.requires_grad_` on a tensor. Receivers of unknown type stay silent.

Severity: an error, except `model.train` in a file that never switches a model to eval mode
(the module is in training mode already, so nothing changes): a warning.

## Why is this bad?
An attribute on its own evaluates to a bound method and throws it away: Python raises nothing.
Measured on torch 2.13: after `model.eval` as a statement, `model.training` is still `True` and
an `nn.Dropout(0.5)` still zeroes about half of its input; after `optimizer.zero_grad` the
gradients of the previous batches keep accumulating; after `loss.backward` no gradient is
computed and `optimizer.step()` leaves the weights as they were (SGD skips parameters whose
`.grad` is None).

## Example
```python
model.eval
with torch.no_grad():
    out = model(x)

optimizer.zero_grad
loss.backward()
optimizer.step()
```

Use instead:
```python
model.eval()
with torch.no_grad():
    out = model(x)

optimizer.zero_grad()
loss.backward()
optimizer.step()
```

## Fix safety
The fix adds `()`. It is unsafe: the method now runs, which changes what the program computes
(that is the point: the model evaluates in eval mode, the gradients are cleared).

## References
- https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval
- https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html
- https://docs.python.org/3/reference/simple_stmts.html#expression-statements
"""

    def check(self, node: cst.Expr, ctx: RuleContext) -> None:
        attribute = node.value
        if type(attribute) is not cst.Attribute:
            return
        sem = ctx.semantic
        if ctx.path.endswith(".ipynb") and sem.function_of(node) is None and not sem.enclosing_loops(node):
            return  # a notebook cell may end with `model.eval` to show the method
        kind = silent.must_call_kind(sem, attribute)
        if kind is None:
            return
        method = attribute.attr.value
        severity = Severity.ERROR
        if kind == "module" and method == "train" and not any(
                evaluation.is_eval_mode_call(sem, call) for call in sem.index.nodes(cst.Call)):
            severity = Severity.WARNING
        spelled = ctx.short(attribute, 40)
        ctx.report(
            attribute,
            f"`{spelled}` names the {_WHAT[kind]}'s method without calling it: nothing happens "
            f"(Python raises nothing); call it: `{spelled}()`",
            FixSpec(f"Call it: `{spelled}()`", (Replace(attribute, ctx.code(attribute) + "()"),),
                    Applicability.UNSAFE),
            severity=severity)


__all__ = ["MethodNotCalled"]
