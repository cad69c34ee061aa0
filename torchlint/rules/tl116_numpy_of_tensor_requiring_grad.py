"""TL116: `.numpy()` on a tensor that requires grad raises; `.detach()` it first."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis import silent
from torchlint.analysis.semantic import keyword
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


__all__ = ["NumpyOfTensorRequiringGrad"]
