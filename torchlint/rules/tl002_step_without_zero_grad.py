"""TL002: optimizer step in a training loop that never clears gradients."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import training
from torchlint.analysis.semantic import method_call
from torchlint.analysis.value import identity
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, InsertBefore, Rule, RuleContext


# The calls `check` looks at: `zero_grad()`, an optimizer's `.step()`, a manual update's `.add_()`.
_CALLS_LOOKED_AT = frozenset(("zero_grad", "step")) | training.MANUAL_UPDATE_METHODS

class StepWithoutZeroGrad(Rule):
    code = "TL002"
    name = "step-without-zero-grad"
    summary = "Optimizer step in a loop that never clears gradients (they accumulate)"
    fix_availability = "sometimes"
    triggers = ("step", ".grad")
    node_types = (cst.Call, cst.AugAssign, cst.Assign)
    called_names = _CALLS_LOOKED_AT
    confirmation_module = "tl002"
    default_severity = Severity.ERROR
    severity_docs = """
Always an **error**: a loop whose steps never clear the gradients (or clear them
between the backward pass and the step) trains on the sum of every earlier gradient, or on none:
the model trains wrongly on every run.
"""
    docs = """
## What it does
Flags the optimizer step (`opt.step()`, `scaler.step(opt)`) inside a loop whose body runs a
backward pass (`loss.backward()`, `scaler.scale(loss).backward()`, `torch.autograd.backward`)
when nothing in the loop clears the gradients: no `zero_grad(...)` call on any object, no
`p.grad = None`, no `p.grad.zero_()`, and no call of a same-file function or method that does
one of those.

The same holds for a hand-written step (`p.data -= lr * p.grad`, `p -= lr * p.grad` under
`no_grad`, `p.data.add_(p.grad, ...)` on a parameter), also inside a helper the training loop
calls (`sgd([w, b], lr)`), and for an optimizer whose loop clears only other modules' gradients
(`D.zero_grad()` in a GAN loop that also steps `opt_G`, built over `G.parameters()`).

Also flags a `zero_grad()` placed after the backward pass and before the step in the same
straight-line block: the step then sees no gradients at all.

A name bound to another framework's optimizer (`opt = paddle.optimizer.SGD(...)`; also MindSpore,
MXNet, TensorFlow, Keras, JAX, Optax, Flax) is not an optimizer to this rule: Paddle clears with
`opt.clear_grad()` and has no `zero_grad`, so the advice would be wrong.

## Why is this bad?
`backward()` adds into `.grad`; it never overwrites it. Without clearing, every step uses the sum
of all gradients since the start of training. Measured on torch 2.13: two backward passes of the
same loss give exactly twice the gradient (2×), so the effective learning rate grows with every
iteration and training diverges or stalls — silently, with no error.
A `zero_grad()` between `backward()` and `step()` throws the fresh gradients away, so the
optimizer steps on zeros (or on `None`, skipping the parameters) and the model never learns.

## Example
```python
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
```

Use instead:
```python
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
```

Gradient accumulation (`zero_grad()` inside an `if` that steps every k iterations), LBFGS-style
closures (`opt.step(closure)`), loops calling a helper whose name contains `zero_grad`, and
Lightning `training_step` methods (which do not call backward themselves) are not flagged.

## Fix safety
The fix inserts `<optimizer>.zero_grad()` as the first statement of the loop body. It is unsafe:
it changes the training behaviour (on purpose), and code that deliberately accumulates gradients
in a way the analysis cannot see would lose that accumulation. No fix is offered for a misplaced
`zero_grad()`.

## References
- https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html
- https://pytorch.org/tutorials/recipes/recipes/zeroing_out_gradients.html
"""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if type(node) is cst.Call and sem.is_zero_grad_call(node):
            self._check_misplaced_zero_grad(node, ctx)
            return
        optimizer = training.step_optimizer(sem, node) if type(node) is cst.Call else None
        updated = None if optimizer is not None else training.manual_update(sem, node)
        if optimizer is None and updated is None:
            return
        for loop, via in self._training_loops(node, sem):
            clearings = training.gradient_clearings(sem, loop.body)
            if not clearings:
                reason = "in a loop that never clears gradients"
            elif optimizer is not None and self._clears_only_others(sem, optimizer, clearings):
                reason = "in a loop that clears only other modules' gradients"
            else:
                continue
            if optimizer is not None:
                opt = ctx.short(optimizer, 40)
                advice = f"call `{opt}.zero_grad()` at the top of the loop"
                fix = self._fix(loop, optimizer, ctx) if via is None and reason.endswith("never clears gradients") \
                    else None
            else:
                advice = f"clear `{ctx.short(updated, 20)}.grad` after the update (`.grad.zero_()` or `= None`)"
                fix = None
            where = "" if via is None else f" (through `{ctx.short(via, 40)}`)"
            ctx.report(
                node,
                f"`{ctx.short(node, 40)}` runs {reason}{where}, so each step uses the sum of all previous "
                f"gradients; {advice}",
                fix,
            )
            return

    def _training_loops(self, node: cst.CSTNode, sem):
        """The loops that run backward and then `node`: the one around it, or, for a step inside
        a helper, the one around each call of the helper (`sgd(params, lr)` in the batch loop)."""
        loop = training.training_loop_of(sem, node)
        if loop is not None:
            return [(loop, None)]
        function = sem.function_of(node)
        if function is None or sem.enclosing_loops(node) and training.backward_calls_under(sem, function.body):
            return []
        found = []
        for call, _ in sem.values.call_sites(function):
            outer = training.training_loop_of(sem, call)
            if outer is not None and not sem.index.contains(function, call):
                found.append((outer, call))
        return found

    def _clears_only_others(self, sem, optimizer, clearings) -> bool:
        """Every clearing in the loop is of modules whose parameters `optimizer` does not update:
        `D.zero_grad()` in a GAN loop that steps `opt_G` clears nothing of G's."""
        owners = training.optimizer_owners(sem, optimizer)
        if not owners:
            return False
        return all(cleared is not None and not (cleared & owners) for _, cleared in clearings)

    def _fix(self, loop: cst.CSTNode, optimizer: cst.BaseExpression, ctx: RuleContext) -> Optional[FixSpec]:
        body = loop.body
        if not isinstance(body, cst.IndentedBlock) or not body.body:
            return None
        first = body.body[0]
        if isinstance(first, cst.SimpleStatementLine):
            first = first.body[0]
        # The optimizer must exist when the loop body starts.
        root = optimizer
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        if not isinstance(root, cst.Name) or ctx.semantic.binds_in(body, root.value):
            return None
        text = f"{ctx.code(optimizer)}.zero_grad()"
        return FixSpec(f"Insert `{text}` at the top of the loop", (InsertBefore(first, text),),
                       Applicability.UNSAFE)

    def _check_misplaced_zero_grad(self, node: cst.Call, ctx: RuleContext) -> None:
        """`loss.backward(); opt.zero_grad(); opt.step()` in one straight-line block."""
        sem = ctx.semantic
        if not method_call(node) or not sem.is_expression_statement(node):
            return
        statement = sem.parent(node)
        line = sem.parent(statement)
        if not isinstance(line, cst.SimpleStatementLine):
            return
        block = sem.parent(line)
        body = getattr(block, "body", None)
        if not isinstance(body, (list, tuple)):
            return
        smalls = []  # (small statement, its SimpleStatementLine or compound statement)
        for item in body:
            if isinstance(item, cst.SimpleStatementLine):
                smalls.extend(item.body)
            else:
                smalls.append(item)
        position = next(i for i, s in enumerate(smalls) if s is statement)
        receiver = ctx.code(node.func.value)

        def kind(small: cst.CSTNode) -> Optional[str]:
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                call = small.value
                if training.is_backward(sem, call):
                    return "backward"
                if training.step_optimizer(sem, call) is not None or training.is_closure_step(sem, call):
                    return "step"
                if sem.is_zero_grad_call(call):
                    return "zero_grad"
            calls = sem.calls_under(small)
            if any(training.is_backward(sem, c) for c in calls) or any(
                method_call(c, "step") for c in calls
            ) or any(sem.is_zero_grad_call(c) for c in calls):
                return "opaque"  # control flow around a backward/step: not straight-line
            return None

        before = None
        for small in reversed(smalls[:position]):
            k = kind(small)
            if k is None:
                continue
            before = k
            break
        if before != "backward":
            return
        step = None
        for small in smalls[position + 1:]:
            k = kind(small)
            if k is None:
                continue
            if k == "step":
                step = small.value
            break
        if step is None:
            return
        optimizer = training.step_optimizer(sem, step)
        if optimizer is None:
            return
        if receiver != ctx.code(optimizer) and not self._updates(sem, optimizer, node.func.value):
            return  # another optimizer's or module's gradients (GAN, teacher/student): intended
        ctx.report(
            node.func,
            f"`{ctx.short(node, 40)}` runs after the backward pass and before "
            f"`{ctx.short(step, 40)}`, so the step sees no gradients; "
            "clear gradients before the backward pass or after the step",
        )

    def _updates(self, sem, optimizer, cleared) -> bool:
        """`optimizer` updates the parameters whose gradients `cleared.zero_grad()` clears."""
        owners = training.optimizer_owners(sem, optimizer)
        found = identity(sem.values.of(cleared))
        return bool(owners) and found is not None and id(found) in owners
