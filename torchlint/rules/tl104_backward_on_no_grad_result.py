"""TL104: `.backward()` on a tensor computed under `torch.no_grad()` / `inference_mode()`."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import evaluation
from torchlint.analysis.semantic import method_call
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext


class BackwardOnNoGradResult(Rule):
    code = "TL104"
    name = "backward-on-no-grad-result"
    summary = "`.backward()` on a result computed under `no_grad`/`inference_mode` always fails"
    fix_availability = "none"
    triggers = ("no_grad", "inference_mode")
    cross_file_triggers = True
    node_types = (cst.Call,)
    confirmation_module = "tl104"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: backward on a result computed under `no_grad` raises `element 0 of
tensors does not require grad and does not have a grad_fn`.
"""
    docs = """
## What it does
Flags `loss.backward()` (and `torch.autograd.backward(loss)`) when `loss` was assigned inside a
`with torch.no_grad():` or `with torch.inference_mode():` block (or a function decorated with
one) and is not re-assigned before the call.

## Why is this bad?
Under `no_grad` autograd records nothing: the result has no `grad_fn` and `requires_grad=False`,
so backward has nothing to differentiate and raises (measured on torch 2.13):
`RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`.
It typically appears when a validation-style block is copied into a training step, or when the
forward pass is wrapped in `no_grad` "to save memory".

## Example
```python
with torch.no_grad():
    loss = criterion(model(x), y)
loss.backward()
```

Use instead:
```python
loss = criterion(model(x), y)
loss.backward()
```

## Fix safety
No fix is offered: whether the computation should leave the `no_grad` block, or the backward
call is the mistake, is a decision only the author can make.

## References
- https://pytorch.org/docs/stable/generated/torch.no_grad.html
- https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        target: Optional[cst.BaseExpression] = None
        anchor: cst.CSTNode = node.func
        func = node.func
        if not (type(func) is cst.Attribute and func.attr.value == "backward") \
                and not (type(func) is cst.Name and sem.is_torch(node, "torch.autograd.backward")):
            return
        if sem.is_torch(node, "torch.autograd.backward"):
            if node.args and node.args[0].keyword is None:
                target = node.args[0].value
        elif method_call(node, "backward") and sem.qualified_name(node.func) is None:
            target = node.func.value
            anchor = node.func.attr
        if not isinstance(target, cst.Name):
            return
        definition = sem.reaching_definition(target)
        if definition is None or definition.kind != "assign" or definition.path != () or definition.value is None:
            return
        if not evaluation.certainly_no_grad(sem, definition.statement):
            return
        if sem.function_of(definition.statement) is not sem.function_of(node):
            return
        value = definition.value
        # A fresh leaf that requires grad is fine even when created under no_grad.
        if sem.values.of(value).is_leaf_requiring_grad or _enables_grad(sem, value):
            return
        if not isinstance(value, (cst.Call, cst.BinaryOperation, cst.UnaryOperation, cst.Subscript)):
            return
        ctx.report(
            anchor,
            f"`{target.value}` is computed under `no_grad`/`inference_mode` "
            f"(`{ctx.short(value, 40)}`), so it has no grad_fn and `.backward()` raises; "
            "compute it outside the no-grad block",
        )


def _enables_grad(sem, value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Call) and (
        method_call(value, "requires_grad_") or evaluation.mentions_grad_switch(sem, value)
    ):
        return True
    return False
