"""TL203: `loss.backward(retain_variables=True)`, renamed `retain_graph=` in PyTorch 0.2."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_BACKWARD_FUNCTIONS = ("torch.autograd.backward",)


class RetainVariables(Rule):
    code = "TL203"
    name = "retain-variables"
    summary = "`backward(retain_variables=...)` raises TypeError since PyTorch 0.4: it is `retain_graph=`"
    fix_availability = "sometimes"
    triggers = ("retain_variables",)
    node_types = (cst.Call,)
    confirmation_module = "tl203"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: `backward(retain_variables=True)` raises `TypeError:
Tensor.backward() got an unexpected keyword argument 'retain_variables'` on the current PyTorch.
"""
    docs = """
## What it does
Flags a `retain_variables=` keyword in `t.backward(...)` and `torch.autograd.backward(...)`.

## Why is this bad?
PyTorch 0.2 renamed the argument `retain_graph` and 0.4 removed the old name. Measured on torch
2.13: `loss.backward(retain_variables=True)` raises `TypeError: Tensor.backward() got an
unexpected keyword argument 'retain_variables'` (`torch.autograd.backward` the same, as
`backward()`), so the training step never runs. GAN tutorials of 2017 that back-propagate twice
through one graph used it.

## Example
```python
d_loss.backward(retain_variables=True)
```

Use instead:
```python
d_loss.backward(retain_graph=True)
```

## Fix safety
The fix renames the keyword to `retain_graph`, the same argument under its current name, and is
safe. No fix is offered when the call passes `retain_graph=` as well.

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html
- https://github.com/pytorch/pytorch/pull/2107 (`retain_variables` -> `retain_graph`)
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        old = _keyword(node, "retain_variables")
        if old is None or not _is_backward(ctx, node):
            return
        fix = None
        if _keyword(node, "retain_graph") is None:
            fix = FixSpec("Rename `retain_variables=` to `retain_graph=`", (Replace(old.keyword, "retain_graph"),),
                          Applicability.SAFE)
        ctx.report(
            old,
            "`retain_variables=` was removed in PyTorch 0.4, so this backward raises `TypeError: ... unexpected "
            "keyword argument 'retain_variables'`; write `retain_graph=`",
            fix,
        )


def _keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def _is_backward(ctx: RuleContext, call: cst.Call) -> bool:
    """`<t>.backward(...)` or `torch.autograd.backward(...)`."""
    if ctx.semantic.is_torch(call, *_BACKWARD_FUNCTIONS):
        return True
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward"
