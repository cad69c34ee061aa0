"""TL202: `Variable(x, volatile=True)`, PyTorch 0.3's way to evaluate without autograd."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import legacy
from torchlint.finding import Applicability
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_VARIABLE = ("torch.autograd.Variable", "torch.autograd.variable.Variable")


class VolatileVariable(Rule):
    code = "TL202"
    name = "volatile-variable"
    summary = "`Variable(x, volatile=True)` has no effect since PyTorch 0.4: the forward still builds a graph"
    fix_availability = "always"
    triggers = ("volatile",)
    node_types = (cst.Call,)
    confirmation_module = "tl202"
    docs = """
## What it does
Flags `Variable(x, volatile=...)` (`torch.autograd.Variable`) unless the value is literally
`False` or `None`.

Not flagged: `Variable(x)` and `Variable(x, requires_grad=True)` (a `Variable` is a plain tensor
since PyTorch 0.4: harmless), `volatile=False`, and a `Variable` or `volatile` keyword of
another library.

## Why is this bad?
Before PyTorch 0.4, `volatile=True` switched autograd off for everything computed from that
input: evaluation ran without building graphs. PyTorch 0.4 removed it. Measured on torch 2.13:
`Variable(x, volatile=True)` only warns `UserWarning: volatile was removed and now has no effect.
Use with torch.no_grad(): instead.`, and a model applied to it returns a tensor with a `grad_fn`:
every evaluation batch builds (and keeps, while the output lives) the autograd graph, costing the
memory and time that `volatile` was there to save.

## Example
```python
for images, labels in test_loader:
    images = Variable(images, volatile=True)
    outputs = model(images)
```

Use instead:
```python
with torch.no_grad():
    for images, labels in test_loader:
        outputs = model(images)
```

## Fix safety
The fix removes the `volatile=` argument, which changes nothing at runtime (it has no effect) but
silences the warning that points at the missing `torch.no_grad()`, so it is unsafe: after
applying it, wrap the evaluation in `with torch.no_grad():` yourself (torchlint cannot tell where
the evaluation ends).

## References
- https://pytorch.org/blog/pytorch-0_4_0-migration-guide/ (`volatile` is deprecated)
- https://pytorch.org/docs/stable/generated/torch.no_grad.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        volatile = _volatile_argument(node)
        if volatile is None or not ctx.semantic.is_torch(node, *_VARIABLE):
            return
        if legacy.literal_flag(volatile.value) in (False, None):
            return
        value = ctx.short(volatile.value, 20)
        kept = [arg for arg in node.args if arg is not volatile]
        fixed = legacy.render_in_place(ctx.semantic, node, legacy.with_arguments(node, kept))
        ctx.report(
            volatile,
            f"`volatile={value}` has no effect since PyTorch 0.4, so the forward pass on this input still "
            "builds an autograd graph; wrap the evaluation in `with torch.no_grad():` instead",
            FixSpec("Remove `volatile=` (then wrap the evaluation in `torch.no_grad()`)",
                    (Replace(node, fixed),), Applicability.UNSAFE),
        )


def _volatile_argument(call: cst.Call) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "volatile":
            return arg
    return None
