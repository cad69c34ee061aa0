"""TL134: `model.eval()` inside the training loop with no `model.train()` after it in the loop:
every later batch trains in evaluation mode."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.backward import is_backward
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext

_LOOPS = (cst.For, cst.While)


class EvalLeftOnInTrainingLoop(Rule):
    code = "TL134"
    name = "eval-left-on-in-training-loop"
    summary = "`model.eval()` inside the training loop and no `model.train()` before the next step: later batches train in eval mode"
    fix_availability = "none"
    default_severity = Severity.ERROR
    severity_docs = """
An **error** for a model that holds Dropout or BatchNorm: from the first `eval()` on, the training
batches run without dropout and with BatchNorm's frozen running statistics (which then stop
being updated), so the model trains as a different network.
"""
    triggers = (".eval(",)
    node_types = (cst.Call,)
    called_names = frozenset({"eval"})
    confirmation_module = "tl134"
    docs = """
## What it does
Flags `model.eval()` inside a loop that also runs a backward pass and an optimizer step (the
training loop), when nothing in that loop switches the model back (`model.train()`), no call in
the loop may do it for the model (a function of this file that calls `.train(`, or any function
the model is passed to), and the analysis knows the model holds Dropout or BatchNorm.

Not flagged: `model.eval()` before or after the training loop, loops with `model.train()` (at the
top of each iteration or after the evaluation), evaluation helpers that restore the mode
themselves, models without Dropout or BatchNorm (eval mode changes nothing for them).

## Why is this bad?
`eval()` sets `training = False` on every submodule and it stays so until `train()`. An
evaluation done in the middle of the batch loop (`if step % 100 == 0: model.eval(); ...`) with
no `train()` after it leaves every following batch in evaluation mode: measured on torch 2.13,
after `model.eval()` at the first batch of a loop without `train()`, the later batches run with
`model.training == False`, dropout is off and BatchNorm normalises with its running statistics
instead of the batch's and no longer updates them. Training goes on without an error, as a
different network.

## Example
```python
for step, (x, y) in enumerate(loader):
    if step % 100 == 0:
        model.eval()
        evaluate(val_x, val_y)
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
```

Use instead:
```python
    if step % 100 == 0:
        model.eval()
        evaluate(val_x, val_y)
        model.train()
```

## Fix safety
No fix: where the mode should be restored depends on the evaluation code.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "eval" or node.args:
            return
        sem = ctx.semantic
        if not isinstance(sem.parent(node), cst.Expr):
            return
        loop = _innermost_loop(sem, node)
        if loop is None:
            return
        try:
            model = sem.values.of(func.value)
        except Exception:  # noqa: BLE001
            return
        if model.kind != "module":
            return
        layer = sem.values.stochastic_layer(model)
        if layer is None:
            return
        spelled = ctx.code(func.value)
        calls = [c for c in sem.index.descendants(loop.body, cst.Call) if _same_function(sem, c, node)]
        if not any(is_backward(sem, c) for c in calls) or not any(
                isinstance(c.func, cst.Attribute) and c.func.attr.value == "step" for c in calls):
            return
        for call in calls:
            if _may_restore(sem, call, spelled, ctx):
                return
        ctx.report(node, f"`{spelled}.eval()` runs inside the training loop and nothing in the loop calls "
                         f"`{spelled}.train()` again: every later batch trains in evaluation mode ({layer} "
                         f"switched to inference behaviour); call `{spelled}.train()` after the evaluation or at "
                         f"the top of the loop", severity=Severity.ERROR)


def _innermost_loop(sem, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
        if isinstance(ancestor, _LOOPS) and sem.index.contains(ancestor.body, node):
            return ancestor
    return None


def _same_function(sem, call: cst.CSTNode, node: cst.CSTNode) -> bool:
    return sem.function_of(call) is sem.function_of(node)


def _may_restore(sem, call: cst.Call, spelled: str, ctx: RuleContext) -> bool:
    """`model.train()` (any argument), `model.train(True)`; a call the model is passed to; a call of
    a function of this file whose body calls `.train(`."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "train":
        return True  # this model's, or another name for it
    if any(ctx.code(a.value) == spelled or spelled.startswith(ctx.code(a.value) + ".") for a in call.args):
        return func is not None and not (isinstance(func, cst.Attribute) and ctx.code(func.value) == spelled) \
            and not _is_pure_call(sem, call, spelled, ctx)
    name = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
    if name is None:
        return False
    for definition in sem.index.nodes(cst.FunctionDef):
        if definition.name.value == name and ".train(" in sem.source(definition):
            return True
    return False


def _is_pure_call(sem, call: cst.Call, spelled: str, ctx: RuleContext) -> bool:
    """The model called as a function: `model(x)` is `model.__call__`, not a mode change."""
    return ctx.code(call.func) == spelled


__all__ = ["EvalLeftOnInTrainingLoop"]
