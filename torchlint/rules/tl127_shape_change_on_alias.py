"""TL127: a shape-changing in-place method on `.data` or `.detach()` (`x.data.t_()`): it changes the
temporary alias's shape, not `x`'s."""

from __future__ import annotations

import libcst as cst

from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext

# Measured on torch 2.13: after `x.data.<op>` or `x.detach().<op>`, `x.shape` is unchanged for
# each of these (the alias is a new tensor object sharing x's storage; its sizes and strides are
# its own).
_SHAPE_CHANGING = frozenset({"t_", "transpose_", "squeeze_", "unsqueeze_", "resize_", "resize_as_", "swapaxes_",
                             "swapdims_", "as_strided_"})


class ShapeChangeOnAlias(Rule):
    code = "TL127"
    name = "shape-change-on-alias"
    summary = "A shape-changing in-place method on `.data` or `.detach()` (`x.data.t_()`): the shape change is lost"
    fix_availability = "none"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: the statement changes only a temporary alias, so the tensor keeps its old shape and
the code after it works on the wrong layout (a transposed sequence/batch pair mixes samples, or
a later shape check fails).
"""
    triggers = ("_(",)
    node_types = (cst.Call,)
    called_names = _SHAPE_CHANGING
    confirmation_module = "tl127"
    docs = """
## What it does
Flags a statement that calls `t_`, `transpose_`, `squeeze_`, `unsqueeze_`, `resize_`,
`resize_as_`, `swapaxes_`, `swapdims_` or `as_strided_` on `x.data` or `x.detach()` of a tensor
`x` and throws the result away: `feature.data.t_()`, `h.detach().unsqueeze_(0)`.

`x` is a tensor by the analysis, or a name unpacked from the fields of the item of the loop it
is in and fed to a model there (`for batch in train_iter: feature, target = batch.text,
batch.label` ... `model(feature)`), and the call may be
one element of a tuple statement (`feature.data.t_(), target.data.sub_(1)`).

Not flagged: the same methods on `x` itself (`x.t_()` changes `x`), results that are used
(`y = x.data.t_()`), value-changing in-place methods (`x.data.zero_()`, `x.data.clamp_()`,
which write into the shared storage and so do reach `x`), and `.data` of objects the analysis
does not know are tensors (a dataset's `data` attribute).

## Why is this bad?
`x.data` and `x.detach()` return a *new* tensor object that shares `x`'s storage. A value-changing
in-place method writes into that storage and `x` sees it; a shape-changing one only changes the
new object's sizes and strides, which are thrown away with it. Measured on torch 2.13: after
`x.data.t_()` (and each method above, through `.data` or `.detach()`) a (2, 3) `x` is still
(2, 3). Code that relied on this in PyTorch 0.3, where `.data` was the tensor itself, now runs
on the untransposed tensor: a (seq, batch) feature fed where (batch, seq) is expected mixes
samples in the loss without an error.

## Example
```python
feature.data.t_()
loss = criterion(classifier(feature), labels)
```

Use instead:
```python
feature = feature.t()
loss = criterion(classifier(feature), labels)
```

## Fix safety
No fix: whether the new shape should keep the autograd graph (`x = x.t()`) or not
(`x = x.detach().t()`) is the author's choice.

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html
- https://pytorch.org/blog/pytorch-0_4_0-migration-guide/
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in _SHAPE_CHANGING:
            return
        sem = ctx.semantic
        if not _discarded(sem, node):
            return  # the result is used
        alias = func.value
        if isinstance(alias, cst.Attribute) and alias.attr.value == "data":
            base, how = alias.value, ".data"
        elif isinstance(alias, cst.Call) and isinstance(alias.func, cst.Attribute) \
                and alias.func.attr.value == "detach" and not alias.args:
            base, how = alias.func.value, ".detach()"
        else:
            return
        if not _tensor(sem, base):
            return
        name = ctx.short(base, 30)
        ctx.report(node, f"`{ctx.short(node, 40)}` changes the shape of a temporary alias: `{name}{how}` is a new "
                         f"tensor object, so `{name}` keeps its shape and the code after this line uses the old "
                         f"layout; write `{name} = {name}.{func.attr.value.rstrip('_')}(...)` (or keep the result)",
                   severity=Severity.ERROR)


def _discarded(sem, call: cst.Call) -> bool:
    """A statement of its own, or an element of a tuple that is one (`f.data.t_(), t.data.sub_(1)`)."""
    parent = sem.parent(call)
    if isinstance(parent, cst.Element):
        parent = sem.parent(sem.parent(parent)) if isinstance(sem.parent(parent), cst.Tuple) else None
    return isinstance(parent, cst.Expr)


def _tensor(sem, base: cst.BaseExpression) -> bool:
    """A tensor by the value model, or a name unpacked from the item of the loop it is in
    (`for batch in train_iter: feature, target = batch.text, batch.label`): a batch's fields."""
    try:
        if sem.values.of(base).is_tensor:
            return True
    except Exception:  # noqa: BLE001 - unknown is not a tensor
        return False
    if not isinstance(base, cst.Name):
        return False
    definitions = sem.values.flow.reaching(base)
    if not definitions or len(definitions) != 1:
        return False
    definition = definitions[0]
    value = definition.value
    if definition.kind != "assign" or value is None or definition.path is None:
        return False
    if definition.path:
        if not (isinstance(value, cst.Tuple) and len(definition.path) == 1
                and definition.path[0] < len(value.elements)):
            return False
        field = value.elements[definition.path[0]].value
    else:
        field = value
    for ancestor in sem.ancestors(value):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.For) and sem.index.contains(ancestor.body, value):
            items = {n.value for n in ([ancestor.target] if isinstance(ancestor.target, cst.Name)
                                       else sem.index.descendants(ancestor.target, cst.Name))}
            return _field_of(field, items) and _fed_to_model(sem, ancestor.body, base.value)
    return False


def _fed_to_model(sem, body: cst.CSTNode, name: str) -> bool:
    """`name` is an argument of a call of a module (or of a parameter named like a model) in
    `body`: `logit = model(feature)`."""
    for call in sem.index.descendants(body, cst.Call):
        if not any(isinstance(a.value, cst.Name) and a.value.value == name for a in call.args):
            continue
        try:
            callee = sem.values.of(call.func)
        except Exception:  # noqa: BLE001
            continue
        if callee.kind == "module" or callee.role == "model":
            return True
    return False


def _field_of(expr: cst.BaseExpression, items: set) -> bool:
    """`batch.text`, `batch[0]`: a field of a loop item."""
    if isinstance(expr, (cst.Attribute, cst.Subscript)) and isinstance(expr.value, cst.Name):
        return expr.value.value in items
    return False


__all__ = ["ShapeChangeOnAlias"]
