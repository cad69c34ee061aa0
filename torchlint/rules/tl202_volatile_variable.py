"""TL202: `Variable(x, volatile=True)`, PyTorch 0.3's way to evaluate without autograd."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from torchlint.analysis import evaluation, legacy
from torchlint.finding import Applicability, Severity
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
    severity_docs = """
A **note**: `volatile=True` is ignored since PyTorch 0.4. On an evaluation input the forward then
builds an autograd graph per batch, freed when the next batch's replaces it: extra memory and time,
the results are right (where outputs with graphs are kept across batches, TL106 says so as a
warning). On a label or target, and in a training step, nothing changes but the warning torch
prints.
"""
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
The fix removes the `volatile=` argument, which changes nothing at runtime (it has no effect).
On an input of an evaluation it silences the warning that points at the missing
`torch.no_grad()`, so it is unsafe there: after applying it, wrap the evaluation in `with
torch.no_grad():` yourself (torchlint cannot tell where the evaluation ends). It is safe where
no `no_grad` is missing: a label or target (`Variable(labels, volatile=True)`, spelled like one),
and a training step (the loop around it, or its function, backpropagates), where autograd must
stay on and the message says just to delete `volatile=`.

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
        sem = ctx.semantic
        value = ctx.short(volatile.value, 20)
        kept = [arg for arg in node.args if arg is not volatile]
        fixed = legacy.render_in_place(sem, node, legacy.with_arguments(node, kept))
        if _trains_here(sem, node):
            # Autograd must stay on here: `volatile` (ignored today) would have broken the step.
            message = (f"`volatile={value}` has no effect since PyTorch 0.4, and this code backpropagates, "
                       "so autograd must stay on here: delete `volatile=`")
            fix = FixSpec("Remove `volatile=`", (Replace(node, fixed),), Applicability.SAFE)
            severity = Severity.NOTE
        elif _is_label(node, sem):
            message = (f"`volatile={value}` has no effect since PyTorch 0.4; a label or target takes no part "
                       "in autograd anyway: delete `volatile=`")
            fix = FixSpec("Remove `volatile=`", (Replace(node, fixed),), Applicability.SAFE)
            severity = Severity.NOTE
        else:
            message = (f"`volatile={value}` has no effect since PyTorch 0.4, so the forward pass on this input "
                       "still builds an autograd graph; wrap the evaluation in `with torch.no_grad():` instead")
            fix = FixSpec("Remove `volatile=` (then wrap the evaluation in `torch.no_grad()`)",
                          (Replace(node, fixed),), Applicability.UNSAFE)
            # The graph of each evaluation batch, freed when the next batch's replaces it: extra
            # memory and time, the results are right (TL106 reports outputs kept across batches).
            severity = Severity.NOTE
        ctx.report(volatile, message, fix, severity=severity)


_LABEL_NAME = re.compile(r"label|target|^y$|^y_|_y$|^gt|truth|^tgt|mask", re.IGNORECASE)


def _is_label(call: cst.Call, sem) -> bool:
    """`Variable(labels, volatile=True)`, `target = Variable(t, volatile=True)`: spelled like a label
    or target, which no forward pass takes as input."""
    first = call.args[0].value if call.args and call.args[0].keyword is None else None
    names = [first.value] if isinstance(first, cst.Name) else []
    statement = sem.statement_of(call)
    if isinstance(statement, cst.Assign) and statement.value is call:
        names += [t.target.value for t in statement.targets if isinstance(t.target, cst.Name)]
    return bool(names) and all(_LABEL_NAME.search(name) for name in names)


def _trains_here(sem, call: cst.Call) -> bool:
    """The innermost loop around the call (or, outside loops, its function) backpropagates."""
    loops = sem.enclosing_loops(call)
    where = loops[0] if loops else sem.function_of(call)
    return where is not None and evaluation.has_backward(sem, where)


def _volatile_argument(call: cst.Call) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "volatile":
            return arg
    return None
