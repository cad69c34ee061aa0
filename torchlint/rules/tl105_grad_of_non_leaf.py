"""TL105: reading `.grad` of a non-leaf tensor, which autograd never populates."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis import evaluation
from torchlint.analysis.value import AG_GRAPH
from torchlint.analysis.semantic import method_call
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext


class GradOfNonLeaf(Rule):
    code = "TL105"
    name = "grad-of-non-leaf"
    summary = "`.grad` of a non-leaf tensor is always `None` (use `retain_grad()` or the leaf)"
    fix_availability = "none"
    triggers = ("grad",)
    node_types = (cst.Attribute,)
    confirmation_module = "tl105"
    default_severity = Severity.ERROR
    severity_docs = """
An **error** when the `.grad` is used as a gradient (`w - lr * y.grad`, `y.grad.data`,
`y.grad.zero_()`): it is None after backward (torch warns that a non-leaf `.grad` is being
accessed), so the code fails on None or computes with a gradient that is not there. A
**warning** when it is only shown or tested (`print(y.grad)`, `y.grad is None`, a notebook cell
that displays it): the program prints None, which a lesson may do on purpose.
"""
    docs = """
## What it does
Flags reading `y.grad` when `y` is certainly a non-leaf tensor that requires grad: the result of
an operation on a tensor that requires grad (`y = w * 2`, `y = w.sum()`, `y = torch.sigmoid(w)`,
`y = w[0]`), or of a conversion that makes a copy of such a leaf
(`torch.ones(3, requires_grad=True).cuda()`, `.to(torch.float64)`, `.double()`), when the
function never calls `y.retain_grad()`.

## Why is this bad?
Autograd only stores gradients in the `.grad` of leaf tensors. For an intermediate result
`.grad` stays `None` after `backward()`, and reading it warns (measured on torch 2.13):
`UserWarning: The .grad attribute of a Tensor that is not a leaf Tensor is being accessed.`
A common variant: `w = torch.randn(3, requires_grad=True).to(device)` makes `w` a copy of the
leaf, so the optimizer-style update `w -= lr * w.grad` fails on `None`.

## Example
```python
w = torch.randn(3, requires_grad=True).cuda()
loss = (w * x).sum()
loss.backward()
print(w.grad)  # None
```

Use instead:
```python
w = torch.randn(3, requires_grad=True, device="cuda")  # a leaf on the right device
loss = (w * x).sum()
loss.backward()
print(w.grad)
```
or call `y.retain_grad()` before `backward()` when the intermediate's gradient is wanted.

## Fix safety
No fix is offered: the author may want the leaf's gradient (create the tensor differently) or
the intermediate's (`retain_grad()`); the tool cannot tell which.

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.is_leaf.html
- https://pytorch.org/docs/stable/generated/torch.Tensor.retain_grad.html
"""

    def candidates(self, node_type, semantic):
        return semantic.index.attributes_named(("grad",))

    def check(self, node: cst.Attribute, ctx: RuleContext) -> None:
        if node.attr.value != "grad" or not isinstance(node.value, cst.Name):
            return
        sem = ctx.semantic
        if _is_store(sem, node):
            return
        name = node.value
        value = sem.values.of(name)
        if not value.is_tensor or value.autograd != AG_GRAPH:
            return  # a leaf, a tensor without a graph, or not known to be either
        source = sem.assigned_value(name)
        if source is None or source is name:
            return
        scope = evaluation.scope_body(sem, node)
        for call in sem.calls_under(scope, follow_functions=False):
            if method_call(call, "retain_grad") or method_call(call, "retain_grads"):
                return
        ctx.report(
            node,
            f"`{name.value}` is a non-leaf tensor (`{ctx.short(source, 40)}`), so `{name.value}.grad` "
            "is None after backward; call `retain_grad()` on it or read the leaf's `.grad`",
            # Shown (`print(y.grad)`, `y.grad is None`) it only prints None, as lessons do on
            # purpose; used as a gradient (`y.grad * lr`, `y.grad.data`) it fails or computes wrongly.
            severity=Severity.WARNING if _only_shown(sem, node) else Severity.ERROR,
        )


def _is_store(sem, node: cst.Attribute) -> bool:
    parent = sem.parent(node)
    if isinstance(parent, cst.AssignTarget) and parent.target is node:
        return True
    if isinstance(parent, (cst.AugAssign, cst.AnnAssign)) and parent.target is node:
        return True
    if isinstance(parent, cst.Del):
        return True
    return False


_SHOWING_FUNCTIONS = {"print", "repr", "str", "display"}


def _only_shown(sem, node: cst.Attribute) -> bool:
    """`print(y.grad)`, `y.grad is None`, a cell ending in `(x.grad, y.grad)`: the value is shown
    or tested, not used as a gradient."""
    parent = sem.parent(node)
    while isinstance(parent, (cst.Element, cst.Tuple, cst.List)):
        node, parent = parent, sem.parent(parent)
    if isinstance(parent, cst.Arg):
        call = sem.parent(parent)
        return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in _SHOWING_FUNCTIONS
    if isinstance(parent, cst.Comparison):
        return all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in parent.comparisons)
    if isinstance(parent, cst.ComparisonTarget):
        comparison = sem.parent(parent)
        return isinstance(parent.operator, (cst.Is, cst.IsNot)) and isinstance(comparison, cst.Comparison)
    # A notebook cell or REPL line that is just `y.grad` displays it.
    return sem.is_expression_statement(node)
