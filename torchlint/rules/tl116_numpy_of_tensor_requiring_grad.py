"""TL116: `.numpy()` on a tensor that requires grad raises; `.detach()` it first."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis import silent
from torchlint.analysis.semantic import keyword, receiver_chain
from torchlint.analysis.device_guards import string_value
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_WHAT = {"leaf": "a tensor that requires grad", "graph": "the result of a computation with a graph",
         "requires": "a tensor that requires grad"}


class NumpyOfTensorRequiringGrad(Rule):
    code = "TL116"
    name = "numpy-of-tensor-requiring-grad"
    summary = "`.numpy()` on a tensor that requires grad raises RuntimeError: call `.detach()` first"
    fix_availability = "always"
    default_severity = Severity.ERROR
    severity_docs = """
Always an **error**: `.numpy()` of a tensor that requires grad raises `RuntimeError: Can't call
numpy() on Tensor that requires grad`.
"""
    triggers = (".numpy(",)
    node_types = (cst.Call,)
    called_names = frozenset(("numpy",))  # check returns at once for any other call
    confirmation_module = "tl116"
    docs = """
## What it does
Flags `x.numpy()` when the analysis knows `x` requires grad: a model's output or a loss
computed with autograd on, a parameter (`model.fc.weight`), a tensor made with
`requires_grad=True`, or any of these moved with `.cpu()`/`.to()`. Silent under `torch.no_grad()`
/ `inference_mode()` (also in a function every caller calls that way), after `.detach()`,
`.data` or `.item()`, after a cast to an integer or boolean dtype (`.long()`,
`.to(torch.int64)`, `.type(torch.LongTensor)`, `argmax`: such tensors never require grad), with
`numpy(force=True)`, and on tensors of unknown origin.

## Why is this bad?
Measured on torch 2.13: `model(x).numpy()` and `model(x).cpu().numpy()` raise
`RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy()
instead.` The line is typically reached only at the end of the first epoch (logging, metrics,
plotting), after the whole epoch's compute. Under `torch.no_grad()` even a parameter's
`.numpy()` works (the check applies only with grad mode on).

## Example
```python
out = model(x)
preds = out.argmax(1)
scores = out.cpu().numpy()
```

Use instead:
```python
scores = out.detach().cpu().numpy()
```

## Fix safety
The fix inserts `.detach()` before `.numpy()` (`out.cpu().detach().numpy()`). It is safe: the
call raised before; the detached tensor shares the memory `numpy()` would have shared.

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.numpy.html
- https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value != "numpy":
            return
        if node.args:
            force = keyword(node, "force")
            if len(node.args) != 1 or not (isinstance(force, cst.Name) and force.value == "False"):
                return  # `numpy(force=True)` detaches by itself
        sem = ctx.semantic
        if sem.qualified_name(func) is not None:
            return  # a module attribute (`something.numpy` imported), not a tensor method
        value = sem.values.of(func.value)
        if not value.is_tensor or not value.requires_grad:
            return
        if silent.grad_may_be_off(sem, node) or silent.cast_to_integer(sem, func.value):
            return
        if _integer_entry(sem, func.value) or _requires_grad_ruled_out(sem, node, ctx.code(func.value)):
            return
        receiver = func.value
        spelled = ctx.short(receiver, 40)
        ctx.report(
            node,
            f"`{spelled}` is {_WHAT.get(value.autograd, 'a tensor that requires grad')}: `.numpy()` "
            f"raises `RuntimeError: Can't call numpy() on Tensor that requires grad`; use "
            f"`{spelled}.detach().numpy()`",
            FixSpec("Insert `.detach()` before `.numpy()`",
                    (Replace(func.attr, "detach().numpy"),), Applicability.SAFE),
            severity=Severity.ERROR)


# Entries of a model's output dict that hold integer tensors (a torchvision detection output's
# `labels` are int64): an integer tensor cannot require grad.
_INTEGER_KEYS = frozenset({"labels"})


def _integer_entry(sem, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """`out[0]["labels"].cpu()`, or `first["labels"]` with `first = outputs[0]`: an integer entry
    of a model's output."""
    for link in receiver_chain(expr):
        if isinstance(link, cst.Subscript) and len(link.slice) == 1 \
                and isinstance(link.slice[0].slice, cst.Index) \
                and string_value(link.slice[0].slice.value) in _INTEGER_KEYS:
            return True
    return False


def _requires_grad_ruled_out(sem, node: cst.CSTNode, receiver: str) -> bool:
    """The `else` of `if t.requires_grad:` (or the body of `if not t.requires_grad:`) around
    `t.cpu().numpy()`: there `t` does not require grad."""
    child: cst.CSTNode = node
    parent = sem.parent(child)
    while parent is not None:
        if isinstance(parent, cst.If):
            test, negated = parent.test, False
            if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                test, negated = test.expression, True
            if isinstance(test, cst.Attribute) and test.attr.value == "requires_grad":
                guarded = sem.source(test.value)
                if receiver == guarded or receiver.startswith(guarded + "."):
                    in_else = parent.orelse is not None and child is parent.orelse
                    if (in_else and not negated) or (child is parent.body and negated):
                        return True
        child, parent = parent, sem.parent(parent)
    return False


__all__ = ["NumpyOfTensorRequiringGrad"]
