"""TL207: `scheduler.step()` before the epoch's `optimizer.step()` calls (the PyTorch < 1.1 order)."""

from __future__ import annotations

import re
from typing import List, Optional, Sequence

import libcst as cst

from torchlint.analysis import legacy, training
from torchlint.analysis.semantic import method_call
from torchlint.analysis.value import INPUT, SCHEDULER, UNKNOWN
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_SCHEDULERS = "torch.optim.lr_scheduler."
_METRIC_SCHEDULERS = {"ReduceLROnPlateau"}  # stepped with a metric, after validation
_SCHEDULER_NAME = re.compile(r"(?:^|_)(?:lr_)?sched(?:uler)?(?:$|_|\d)", re.IGNORECASE)


class SchedulerStepBeforeOptimizerStep(Rule):
    code = "TL207"
    name = "scheduler-step-before-optimizer-step"
    summary = "`scheduler.step()` before the loop's `optimizer.step()` runs the schedule one step ahead (PyTorch < 1.1 order)"
    fix_availability = "sometimes"
    triggers = ("lr_scheduler",)
    node_types = (cst.Call,)
    called_names = frozenset(("step",))  # check returns at once for any other call
    confirmation_module = "tl207"
    default_severity = Severity.WARNING
    severity_docs = """
A **warning**: stepping the scheduler before the optimizer runs the schedule one
step ahead (a decay one epoch early for StepLR/MultiStepLR, the first learning rate never used
for the others): training differs by one step of the schedule, it does not break.
"""
    docs = """
## What it does
Flags `scheduler.step()` (a `torch.optim.lr_scheduler` scheduler, called without arguments) that
runs in a loop before every optimizer step of the same iteration: at the top of an epoch loop
whose batches (directly, or in a same-file function such as `train(epoch)`) call
`optimizer.step()` afterwards, or in the `if phase == "train":` branch that starts an epoch.

Not flagged: `scheduler.step()` after the batch loop; a per-batch scheduler (`OneCycleLR`,
`CyclicLR`) stepped after `optimizer.step()` inside the batch loop; `ReduceLROnPlateau`'s
`scheduler.step(val_loss)` after validation (and any `step(...)` with an argument); a step under
another condition (`if epoch > 0:`); objects not known to be torch schedulers.

## Why is this bad?
PyTorch 1.1 changed the order: the scheduler is now stepped after the optimizer. Code written
for 1.0 and earlier calls `scheduler.step()` first, at the top of each epoch. Measured on torch
2.13 with `StepLR(optimizer, step_size=1, gamma=0.1)` and lr 0.1: torch warns `UserWarning:
Detected call of lr_scheduler.step() before optimizer.step(). In PyTorch 1.1.0 and later, you
should call them in the opposite order`, and the epochs train at 0.01, 0.001, 0.0001 instead of
0.1, 0.01, 0.001: the first value of the schedule is skipped and every epoch runs one step ahead
(a warm-up schedule loses its first step: `LambdaLR` warming up over 3 epochs trains at 0.067,
0.1, 0.1 instead of 0.033, 0.067, 0.1). Where the rate changes only at milestones the first
rate is still used and each decay just comes one epoch early: `StepLR(step_size=3, gamma=0.1)`
trains at 0.1, 0.1, 0.01, 0.01 instead of 0.1, 0.1, 0.1, 0.01, and `MultiStepLR([2, 4])` at 0.1,
0.01, 0.01, 0.001 instead of 0.1, 0.1, 0.01, 0.01 (measured on torch 2.13). The message says which
of these the scheduler at hand does.

## Example
```python
for epoch in range(epochs):
    scheduler.step()
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
```

Use instead:
```python
for epoch in range(epochs):
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    scheduler.step()
```

## Fix safety
The fix moves the `scheduler.step()` line after the last statement of the loop body that runs an
optimizer step. It is unsafe: it changes the learning rate of every epoch (on purpose), and code
after the batches that reads the learning rate sees the next epoch's value. No fix is offered for
a step inside an `if`, or sharing its line with other statements.

## References
- https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate
- https://github.com/pytorch/pytorch/releases/tag/v1.1.0 (the order of `step()` calls)
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if not method_call(node, "step") or node.args or not sem.is_expression_statement(node):
            return
        if not _is_scheduler(sem, node.func.value):
            return
        loops = sem.enclosing_loops(node)
        if not loops:
            return
        loop = loops[0]
        body = _statements(loop.body)
        item = _loop_statement_holding(sem, node, loop)
        if item is None:
            return
        position = next(i for i, statement in enumerate(body) if statement is item)
        order = sem.index.order
        earlier = [c for c in _calls_in(sem, item) if order[c] < order[node]]
        if any(_runs_optimizer_step(sem, s) for s in body[:position]) or any(_is_step(sem, c) for c in earlier):
            return
        stepping = [i for i in range(position + 1, len(body)) if _runs_optimizer_step(sem, body[i])]
        if not stepping:
            return
        receiver = ctx.short(node.func.value, 30)
        ctx.report(
            node,
            f"`{receiver}.step()` runs before this iteration's `optimizer.step()` (the PyTorch < 1.1 order): "
            f"{_effect(sem, node.func.value)} and torch warns 'Detected call of "
            "`lr_scheduler.step()` before `optimizer.step()`'; call it after the optimizer steps",
            _fix(ctx, loop, body, position, stepping[-1], node),
            # The schedule runs one step ahead: the training differs by a step, it does not break.
            severity=Severity.WARNING,
        )


# Schedulers whose learning rate changes only at milestones: stepped first, each decay comes one
# epoch early and the first learning rate is still used (measured on torch 2.13:
# StepLR(step_size=3, gamma=0.1) trains at 0.1, 0.1, 0.01, 0.01 instead of 0.1, 0.1, 0.1, 0.01).
_MILESTONE_SCHEDULERS = {"StepLR", "MultiStepLR"}


def _effect(sem, receiver: cst.BaseExpression) -> str:
    """What the early step does to the schedule at hand."""
    site = sem.values.of(receiver).site
    name = sem.qualified_name(site.func) if isinstance(site, cst.Call) else None
    member = name.rsplit(".", 1)[-1] if name and name.startswith(_SCHEDULERS) else None
    if member in _MILESTONE_SCHEDULERS and not (member == "StepLR" and _step_size(site) == 1):
        return f"every `{member}` decay comes one epoch early"
    if member is not None:
        return (f"every epoch runs one step ahead of the `{member}` schedule (its first learning rate "
                "is never used)")
    return "every epoch runs one step ahead of the schedule"


def _step_size(call: cst.Call) -> Optional[int]:
    value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "step_size"), None)
    if value is None:
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        value = positional[1] if len(positional) > 1 else None
    if isinstance(value, cst.Integer):
        return int(value.value, 0)
    return None


def _is_scheduler(sem, expr: cst.BaseExpression) -> bool:
    """A torch LR scheduler stepped without a metric: bound to `lr_scheduler.StepLR(...)` and
    the like, or spelled like one (`scheduler`, `exp_lr_scheduler`, `sched`) in a file that
    builds a torch scheduler (the tutorials pass it to `train_model(..., scheduler, ...)`)."""
    value = sem.values.of(expr)
    if value.kind == SCHEDULER:
        return value.site is None or _is_scheduler_construction(sem, value.site) is not False
    if value.kind not in (UNKNOWN, INPUT) or type(value.site) is cst.Call:
        return False  # bound to something else (`NoamScheduler(optimizer)`)
    name = training.last_identifier(expr)
    if name is None or not _SCHEDULER_NAME.search(name):
        return False
    return _file_builds_scheduler(sem)


def _is_scheduler_construction(sem, value: cst.BaseExpression) -> Optional[bool]:
    """True for `lr_scheduler.StepLR(...)` (not ReduceLROnPlateau), False for another call."""
    if not isinstance(value, cst.Call):
        return False
    name = sem.qualified_name(value.func)
    if name is None or not name.startswith(_SCHEDULERS):
        return False
    return name.rsplit(".", 1)[-1] not in _METRIC_SCHEDULERS


def _file_builds_scheduler(sem) -> bool:
    cached = sem.__dict__.get("_legacy_builds_scheduler")
    if cached is None:
        cached = any(_is_scheduler_construction(sem, call) for call in sem.index.nodes(cst.Call))
        sem.__dict__["_legacy_builds_scheduler"] = cached
    return cached


def _statements(block: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return block.body if isinstance(block, cst.IndentedBlock) else ()


def _loop_statement_holding(sem, call: cst.Call, loop: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The statement of `loop`'s body that holds `call`: its own line, or an `if <x> == "train":`
    whose body holds the line (the train/val phase loop of the transfer-learning tutorial)."""
    line = sem.parent(sem.parent(call))
    if not isinstance(line, cst.SimpleStatementLine):
        return None
    block = sem.parent(line)
    if block is loop.body:
        return line
    branch = sem.parent(block)
    if isinstance(branch, cst.If) and branch.body is block and sem.parent(sem.parent(branch)) is loop \
            and sem.parent(branch) is loop.body and _is_phase_test(branch.test):
        return branch
    return None


def _is_phase_test(test: cst.BaseExpression) -> bool:
    """`phase == "train"`, `"train" == mode`: a string comparison, not an epoch-count guard."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    comparison = test.comparisons[0]
    sides = (test.left, comparison.comparator)
    return isinstance(comparison.operator, cst.Equal) and any(isinstance(s, cst.SimpleString) for s in sides)


def _calls_in(sem, node: cst.CSTNode) -> List[cst.Call]:
    return list(sem.index.descendants(node, cst.Call))


def _is_step(sem, call: cst.Call) -> bool:
    return training.step_optimizer(sem, call) is not None or training.is_closure_step(sem, call)


def _runs_optimizer_step(sem, statement: cst.CSTNode) -> bool:
    """Whether `statement` runs an optimizer step, itself or in a same-file function it calls."""
    return any(_is_step(sem, call) for call in sem.calls_under(statement))


def _fix(ctx: RuleContext, loop, body, position: int, last_stepping: int, call: cst.Call) -> Optional[FixSpec]:
    line = body[position]
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    moved = list(body[:position]) + list(body[position + 1:last_stepping + 1]) + [line] + list(body[last_stepping + 1:])
    block = loop.body.with_changes(body=moved)
    fixed = legacy.render_in_place(ctx.semantic, loop.body, block)
    # A block's range starts after its header (the rest of the `for ...:` line).
    header = legacy.render_in_place(ctx.semantic, loop.body, loop.body.header)
    if not fixed.startswith(header):
        return None
    fixed = fixed[len(header):]
    return FixSpec(f"Move `{ctx.short(call, 30)}` after the optimizer steps", (Replace(loop.body, fixed),),
                   Applicability.UNSAFE)
