"""TL135: `opt.zero_grad()` then `opt.step()` with no backward pass in between: the step applies
no gradient (a loss computed and never backpropagated)."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from torchlint.analysis.backward import is_backward
from torchlint.analysis.value import CRITERION, MODULE, TENSOR_KINDS
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext

_BUILTINS = frozenset({"print", "len", "range", "float", "int", "str", "max", "min", "abs", "sum", "enumerate",
                       "zip", "isinstance", "format", "round", "list", "tuple", "dict"})


class StepWithoutBackward(Rule):
    code = "TL135"
    name = "step-without-backward"
    summary = "`opt.zero_grad()` then `opt.step()` with no backward pass in between: the step applies no gradient"
    fix_availability = "none"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: `zero_grad()` sets the gradients to None (the default since PyTorch 2.0), and a step
skips parameters without a gradient, so the parameters this optimizer holds never change.
"""
    triggers = ("zero_grad",)
    node_types = (cst.Call,)
    called_names = frozenset({"step"})
    confirmation_module = "tl135"
    docs = """
## What it does
Flags `opt.step()` when what runs before it, back to an `opt.zero_grad()` on the same optimizer
that certainly runs first (in the step's block or in a block around it: a step under
`if i % n_critic == 0:`, inside `with autocast():`, or in a loop that follows the `zero_grad()`),
runs no backward pass: no `.backward()`, `torch.autograd.backward`,
`accelerator.backward(...)`, and no call that might run one (a function of this file whose body
mentions `backward`, or any call the analysis cannot name as a torch function, a module or a
loss criterion). The typical case is a GAN's generator step where `g_loss` is computed and
`g_loss.backward()` was forgotten.

A loop around the step counts as a whole: its next iteration runs the statements after the step
before the step comes again.

Not flagged: steps with a closure (`opt.step(closure)`); anything between that calls a helper
which may backpropagate (a function of the file that receives the loss, `accelerator.backward`,
`scaler.scale(loss).backward()`, `(g_loss + d_loss).backward()`, `torch.autograd.backward`);
a `zero_grad()` that may not run before the step (in a branch, in another function), or none at
all (then gradients of an earlier backward may still be there).

## Why is this bad?
Since PyTorch 2.0 `zero_grad()` sets every `.grad` to None, and optimizers skip parameters whose
`.grad` is None. Measured on torch 2.13: after `opt.zero_grad()`, a loss computed without
`backward()` and `opt.step()`, an Adam's parameters are unchanged (and with
`zero_grad(set_to_none=False)` the zero gradients move nothing but weight decay). The model that
optimizer holds never trains, while the loss is printed as if it did.

## Example
```python
optimizer_G.zero_grad()
g_loss = adversarial_loss(discriminator(generator(z)), valid)
optimizer_G.step()
```

Use instead:
```python
optimizer_G.zero_grad()
g_loss = adversarial_loss(discriminator(generator(z)), valid)
g_loss.backward()
optimizer_G.step()
```

## Fix safety
No fix: which loss the step should follow is the author's choice.

## References
- https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "step" or node.args:
            return
        sem = ctx.semantic
        line = sem.parent(node)
        if not isinstance(line, cst.Expr):
            return
        statement = sem.parent(line)
        if not isinstance(statement, cst.SimpleStatementLine):
            return
        spelled = ctx.code(func.value)
        zero_grad = _zero_grad_before(statement, spelled, ctx)
        if zero_grad is None:
            return
        try:
            optimizer = sem.values.of(func.value)
        except Exception:  # noqa: BLE001
            return
        if optimizer.kind != "optimizer" and optimizer.role != "optimizer":
            return
        between = _between(sem, zero_grad, statement)
        loss = None
        for earlier in between:
            if "backward" in ctx.code(earlier):
                return
            for call in [earlier] if isinstance(earlier, cst.Call) else sem.index.descendants(earlier, cst.Call):
                if call is node or _optimizer_call(sem, call):
                    continue
                if is_backward(sem, call) or _may_backpropagate(sem, call):
                    return
        for earlier in between:
            for line in [earlier, *sem.index.descendants(earlier, cst.SimpleStatementLine)]:
                if loss is None:
                    loss = _loss_assigned(sem, line)
        what = f" (`{loss}` is computed and never backpropagated)" if loss else ""
        ctx.report(node, f"`{spelled}.step()` follows `{spelled}.zero_grad()` with no backward pass in between"
                         f"{what}: the gradients are None, so this step changes nothing; call `.backward()` on the "
                         f"loss before the step", severity=Severity.ERROR)


def _zero_grad_before(statement: cst.SimpleStatementLine, spelled: str, ctx: RuleContext):
    """The `opt.zero_grad()` statement that certainly runs before `statement` (the step): the
    nearest one before it in its own block or, walking out through the compound statements around
    it (`if`, `for`, `with`, ...), in an enclosing block of the same function. None when a
    function, class or lambda boundary comes first."""
    sem = ctx.semantic
    child: cst.CSTNode = statement
    parent = sem.parent(child)
    while parent is not None:
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        body = getattr(parent, "body", None)
        if isinstance(body, (list, tuple)) and child in body:
            for earlier in reversed(body[:body.index(child)]):
                if _is_zero_grad(earlier, spelled, ctx):
                    return earlier
            if isinstance(parent, cst.Module):
                return None
        child, parent = parent, sem.parent(parent)
    return None


def _between(sem, zero_grad: cst.CSTNode, step: cst.CSTNode) -> List[cst.CSTNode]:
    """What may run after `zero_grad` and before `step`: the statements between them in the file
    and, for each loop around `step` inside `zero_grad`'s block, that loop's whole body (its
    next iteration comes back to the step)."""
    index = sem.index
    first, last = index.number(zero_grad), index.number(step)
    block = sem.parent(zero_grad)
    found: List[cst.CSTNode] = []
    for node in index.descendants(block, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        number = index.number(node)
        if first < number < last and not any(index.contains(kept, node) for kept in found[-1:]) \
                and not index.contains(node, step):
            found.append(node)
    for ancestor in index.ancestors(step):
        if ancestor is block:
            break
        if isinstance(ancestor, (cst.For, cst.While)):
            found.append(ancestor)
        elif isinstance(ancestor, cst.If):
            found.append(ancestor.test)
    return found


def _is_zero_grad(statement: cst.CSTNode, spelled: str, ctx: RuleContext) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    expr = statement.body[0]
    if not isinstance(expr, cst.Expr) or not isinstance(expr.value, cst.Call):
        return False
    call = expr.value
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "zero_grad" \
        and ctx.code(call.func.value) == spelled


def _optimizer_call(sem, call: cst.Call) -> bool:
    """`opt.step()` / `opt.zero_grad()` of an optimizer without a closure: no backward pass."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("step", "zero_grad") or \
            any(a.keyword is None for a in call.args):
        return False
    try:
        receiver = sem.values.of(func.value)
    except Exception:  # noqa: BLE001
        return False
    return receiver.kind == "optimizer"


def _may_backpropagate(sem, call: cst.Call) -> bool:
    """A call that may run a backward pass inside: anything but torch's own functions, modules,
    criteria, tensor methods and a few builtins."""
    func = call.func
    qualified = sem.qualified_name(func)
    if qualified is not None:
        return not qualified.startswith("torch.") and qualified.split(".")[0] not in ("numpy", "math", "random", "tqdm")
    if isinstance(func, cst.Name) and func.value in _BUILTINS and not sem.scopes.lookup(func.value, func):
        return False
    try:
        callee = sem.values.of(func)
    except Exception:  # noqa: BLE001
        return True
    if callee.kind in (MODULE, CRITERION):
        return False
    if isinstance(func, cst.Attribute):
        try:
            receiver = sem.values.of(func.value)
        except Exception:  # noqa: BLE001
            return True
        if receiver.kind in TENSOR_KINDS or receiver.kind == MODULE and func.attr.value in (
                "train", "eval", "to", "cuda", "cpu", "parameters"):
            return False
    return True


def _loss_assigned(sem, statement: cst.CSTNode) -> Optional[str]:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
            and isinstance(statement.body[0], cst.Assign):
        assign = statement.body[0]
        target = assign.targets[0].target
        if len(assign.targets) == 1 and isinstance(target, cst.Name):
            try:
                if sem.values.of(assign.value).kind == "loss":
                    return target.value
            except Exception:  # noqa: BLE001
                return None
    return None


__all__ = ["StepWithoutBackward"]
