"""TL131: a loss overwritten before anything reads it, in a function that backpropagates that
name: the first loss is never trained."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.backward import backwarded_uses
from torchlint.analysis.dead_stores import is_dead_store
from torchlint.analysis.value import LOSS
from torchlint.finding import Severity
from torchlint.positions import node_ranges
from torchlint.rules.base import Rule, RuleContext


class LossOverwrittenBeforeBackward(Rule):
    code = "TL131"
    name = "loss-overwritten-before-backward"
    summary = "A loss overwritten before its backward (`d_loss = ...; d_loss = 10 * gp`): the first loss never trains"
    fix_availability = "none"
    default_severity = Severity.WARNING
    severity_docs = """
A **warning**: the overwritten loss contributes no gradient; whether that term was meant to be
trained (almost always) is the author's intent, which the analysis cannot see.
"""
    triggers = ("backward",)
    node_types = (cst.Assign,)
    confirmation_module = "tl131"
    docs = """
## What it does
Flags an assignment of a loss (a criterion's output, or arithmetic on one, that carries a
graph) to a name when no read of the name can see that value, because the name is assigned again
first, and the new value is the one a backward pass then runs on (`loss.backward()`,
`scaler.scale(loss).backward()`).

Not flagged: model outputs that are not losses (`out = net1(x); out = net2(x)`), a loss read before it is replaced (`loss = loss + 10 * gp`, `print(loss)`,
`losses.append(loss)`), accumulation (`loss += ...`), names no backward runs on, and names read
by nested functions.

## Why is this bad?
The backward pass differentiates only the value the name holds when `backward()` runs. A loss
computed and then overwritten (`d_loss = d_real + d_fake` followed by `d_loss = 10 * gp`, where
`d_loss = d_loss + 10 * gp` was meant) gives no gradient: measured on torch 2.13, the layers
that only the first loss depends on get `grad is None` after the backward. The model trains on
the second term alone, without an error.

## Example
```python
d_loss = criterion(D(real), ones) + criterion(D(fake), zeros)
d_loss = 10 * gradient_penalty(D, real, fake)
d_loss.backward()
```

Use instead:
```python
d_loss = criterion(D(real), ones) + criterion(D(fake), zeros)
d_loss = d_loss + 10 * gradient_penalty(D, real, fake)
d_loss.backward()
```

## Fix safety
No fix: how the terms combine is the author's choice.

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html
"""

    def check(self, node: cst.Assign, ctx: RuleContext) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        target = node.targets[0].target
        sem = ctx.semantic
        scope = sem.scopes.scope_of(target)
        if scope is None or target.value not in backwarded_uses(sem, scope):
            return
        # The flow questions first: nearly every assignment is read before it is replaced, and
        # they settle that without the value model.
        if is_dead_store(sem, target) is not True:
            return
        later = _next_store(sem, target, scope)
        if later is None:
            return  # never replaced, or no later value is the one backpropagated
        try:
            value = sem.values.of(node.value)
        except Exception:  # noqa: BLE001
            return
        if not (value.kind == LOSS and value.requires_grad):
            return  # a loss: a criterion's output or arithmetic on one (a model's output may be anything)
        span = node_ranges(sem.module, [later], sem.index).get(later)
        where = f" at line {span[0][0]}" if span is not None and not ctx.path.endswith(".ipynb") else ""
        ctx.report(node, f"`{target.value} = {ctx.short(node.value, 40)}` is overwritten{where} before anything "
                         f"reads it, and the backward pass runs on the new value: this loss contributes no gradient, "
                         f"so what it measures is never trained; combine the terms (`{target.value} = "
                         f"{target.value} + ...`)", severity=Severity.WARNING)


def _next_store(sem, target: cst.Name, scope) -> cst.CSTNode:
    index = sem.index
    position = index.number(target)
    for use in index.names_spelled(target.value):
        if index.number(use) <= position or sem.scopes.scope_of(use) is not scope:
            continue
        if sem.values.flow.definition_of_store(use) is not None and _reaches_backward(sem, use, scope):
            return use
    return None


def _reaches_backward(sem, store: cst.Name, scope) -> bool:
    """The value `store` assigns is one a backward pass runs on."""
    flow = sem.values.flow
    for use in backwarded_uses(sem, scope).get(store.value, ()):
        reaching = flow.reaching(use)
        if reaching and any(d.target is store for d in reaching):
            return True
    return False


__all__ = ["LossOverwrittenBeforeBackward"]
