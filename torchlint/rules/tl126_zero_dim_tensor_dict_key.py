"""TL126: a 0-dim tensor used as a dict key: tensors hash by identity, so the lookup raises
KeyError (or `.get` returns the default)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.value import CONTAINER
from torchlint.analysis.zero_dim import is_certainly_zero_dim
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext


class ZeroDimTensorDictKey(Rule):
    code = "TL126"
    name = "zero-dim-tensor-dict-key"
    summary = "A 0-dim tensor used as a dict key (`idx2word[pred.argmax()]`): tensors hash by identity, so the lookup fails"
    fix_availability = "always"
    default_severity = Severity.ERROR
    severity_docs = """
An **error** for a read (`d[t]`, `d[t] += 1`): it raises `KeyError` for every key. A **warning**
for `d.get(t)`: it silently returns the default.
"""
    triggers = ("[", ".get(")
    node_types = (cst.Subscript, cst.Call)
    confirmation_module = "tl126"
    docs = """
## What it does
Flags a lookup in a Python dict (one the analysis knows is a dict: a `{...}` literal, a dict
comprehension, `dict(...)`) whose key is a tensor: one the analysis knows is 0-dim (a full
reduction `logits.argmax()`, a loss), or one the key expression itself makes (`logits.argmax(1)`,
`scores[0]` of a tensor whose rank is known): a new object that no stored key can be. `d[t]`, `d[t] += 1` and
`d.get(t)` are flagged.

Not flagged: fields of a batch (a DataLoader collates file names into lists of strings),
subscripts of unknown rank (`pred.data[0][0]` may raise IndexError first), a name holding a
tensor of unknown rank (it may be the very object a store used as
the key), lists and tuples (a 0-dim integer tensor is a valid list index through
`__index__`), keys of unknown type (a NumPy integer hashes like an int), `.item()` keys,
storing with `d[t] = v`.

## Why is this bad?
A tensor hashes by its identity, not its value (`hash(torch.tensor(3)) != hash(3)`), and `==`
between a tensor and an int gives a tensor, so a dict never finds a tensor key among its int keys.
Measured on torch 2.13: `{3: "cat"}[torch.tensor(3)]` raises `KeyError: tensor(3)`, and
`.get(torch.tensor(3))` returns None. Decoding loops that map a predicted index to a word
(`idx2word[topi[0][0]]`) crash at the first step.

## Example
```python
word = idx2word[logits.argmax()]
```

Use instead:
```python
word = idx2word[logits.argmax().item()]
```

## Fix safety
Safe for a 0-dim key: `.item()` turns it into the Python number the dict's keys are compared
with; the lookup that raised now finds the key. Unsafe for a key whose size the analysis does not
know (`topi[0]`): `.item()` works for one element and raises for more.

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.item.html
"""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if isinstance(node, cst.Subscript):
            if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
                return
            base, key, how = node.value, node.slice[0].slice.value, "subscript"
            parent = sem.parent(node)
            if isinstance(parent, cst.AssignTarget) or isinstance(parent, cst.Del):
                return  # a store: no lookup
        else:
            func = node.func
            positional = [a for a in node.args if a.keyword is None and not a.star]
            if not (isinstance(func, cst.Attribute) and func.attr.value == "get" and positional):
                return
            base, key, how = func.value, positional[0].value, "get"
        if _literal(key) or not _is_dict(sem, base) or not _zero_dim_key(sem, key):
            return
        atom = isinstance(key, (cst.Name, cst.Call, cst.Attribute, cst.Subscript))
        text = f"{ctx.code(key)}.item()" if atom else f"({ctx.code(key)}).item()"
        zero_dim = is_certainly_zero_dim(sem, key)
        fix = FixSpec(f"Use `{ctx.short(key, 30)}.item()`", (Replace(key, text),),
                      Applicability.SAFE if zero_dim else Applicability.UNSAFE)
        what = "a 0-dim tensor" if zero_dim else "a tensor"
        if how == "get":
            ctx.report(key, f"`{ctx.short(key, 40)}` is {what} used as a dict key: tensors hash by "
                            f"identity, so `.get` never finds it and returns the default; use "
                            f"`{ctx.short(key, 30)}.item()`", fix, severity=Severity.WARNING)
            return
        ctx.report(key, f"`{ctx.short(key, 40)}` is {what} used as a dict key: tensors hash by identity, "
                        f"so `{ctx.short(node, 40)}` raises KeyError; use `{ctx.short(key, 30)}.item()`", fix,
                   severity=Severity.ERROR)


_LITERALS = (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)


def _literal(key: cst.BaseExpression) -> bool:
    """`d['lr']`, `x[0]`, `x[-1]`, `grid[0, 1]`: a key no tensor can be, settled before the value
    model is asked about the container (most subscripts of a file are these)."""
    kind = type(key)
    if kind in _LITERALS:
        return True
    if kind is cst.UnaryOperation:
        return type(key.expression) in _LITERALS
    if kind is cst.Tuple:
        return all(_literal(e.value) for e in key.elements)
    return False


def _is_dict(sem, expr: cst.BaseExpression) -> bool:
    try:
        value = sem.values.of(expr)
    except Exception:  # noqa: BLE001 - unknown is not a dict
        return False
    return value.kind == CONTAINER and value.detail == "dict"


def _root(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        elif isinstance(expr, (cst.Subscript, cst.Attribute)):
            expr = expr.value
        else:
            return expr


def _zero_dim_key(sem, key: cst.BaseExpression) -> bool:
    """A tensor key that no stored key can be: a 0-dim tensor, or a tensor made by the key
    expression itself (`topi[0][0]`, `logits.argmax(1)[0]`: a new object, never the one a
    store used), whose origin the analysis knows is a tensor (not an argument of unknown type,
    which may be a NumPy array)."""
    try:
        value = sem.values.of(key)
        if not value.is_tensor or value.role == "batch":
            return False  # a batch's fields may be strings (file names) the value model calls tensors
        # A subscript of unknown rank may raise IndexError before any lookup (`pred.data[0][0]` of a
        # 1-D `pred`): only one whose rank is known counts as a fresh tensor.
        fresh = isinstance(key, cst.Call) or isinstance(key, cst.Subscript) and value.shape is not None
        if not fresh and not is_certainly_zero_dim(sem, key):
            return False
        root = _root(key)
        if root is None:
            return False
        origin = sem.values.of(root)
        return origin.is_tensor and origin.role != "batch"
    except Exception:  # noqa: BLE001 - unknown is not a tensor
        return False


__all__ = ["ZeroDimTensorDictKey"]
