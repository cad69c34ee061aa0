"""Evidence from use for a tensor's size: a value that a backward pass runs on without a gradient
argument (`loss.backward()`, `scaler.scale(loss).backward()`, `accelerator.backward(loss)`,
`torch.autograd.backward(loss)`) holds exactly one element, whatever made it (a loss callable the
analysis cannot see: `loss = loss_fn(model(x), y)` in `train_epoch(model, loader, opt, loss_fn)`).

Measured on torch 2.13: `backward()` without a gradient checks `numel() == 1`, not the rank. A
vector raises `RuntimeError: grad can be implicitly created only for scalar outputs`, but a `(1,)`
or `(1, 1)` tensor backpropagates like a 0-dim one. So the fact is "one element", never "0-dim":
`loss.data[0]` of such a loss raises only when the loss is 0-dim, which only the loss's own maker
can tell (TL201 and TL212 keep asking `zero_dim.py` for the rank; a loss of `loss_fn(...)` whose
`loss_fn` is a parameter stays of unknown rank). `tests/test_evidence_of_use.py` checks both
halves against torch.

A backward with a gradient (`loss.backward(torch.ones_like(loss))`, `backward(gradient=g)`,
`torch.autograd.backward(t, grad_tensors=g)`), one on an expression of the name
(`loss.mean().backward()`: `loss` may be a vector), and one the definition does not reach say
nothing.
"""

from __future__ import annotations

from typing import Dict, List

import libcst as cst

from torchlint.analysis.backward import backward_target


def _gradient_free(sem, call: cst.Call) -> bool:
    """A backward call that passes no gradient: `t.backward()`, `t.backward(retain_graph=True)`,
    `accelerator.backward(t)`, `torch.autograd.backward(t)`."""
    func = call.func
    positional = [a for a in call.args if a.keyword is None]
    keywords = {a.keyword.value for a in call.args if a.keyword is not None}
    if any(a.star for a in call.args):
        return False
    if sem.is_torch(call, "torch.autograd.backward"):
        return len(positional) == 1 and not keywords & {"grad_tensors", "grad_variables"}
    if isinstance(func, cst.Attribute) and func.attr.value == "backward":
        receiver_is_target = backward_target(sem, call) is not None and not (
            positional and backward_target(sem, call) is positional[0].value)
        if receiver_is_target:  # `t.backward(...)`: the first positional argument is the gradient
            return not positional and "gradient" not in keywords
        return len(positional) == 1 and "gradient" not in keywords  # `accelerator.backward(t)`
    return False  # `self.manual_backward(loss, *args)` and others: not followed


def _gradient_free_uses(sem, scope: cst.CSTNode) -> Dict[str, List[cst.Name]]:
    """{name: the Name nodes a gradient-free backward runs on directly} in `scope`."""
    cache = sem.__dict__.setdefault("_one_element_uses", {})
    found = cache.get(id(scope))
    if found is not None:
        return found
    found = {}
    index = sem.index
    calls = index.nodes(cst.Call) if isinstance(scope, cst.Module) else index.descendants(scope, cst.Call)
    for call in calls:
        if sem.scopes.scope_of(call) is not scope or not sem.is_backward_call(call):
            continue
        target = backward_target(sem, call)
        if type(target) is cst.Name and _gradient_free(sem, call):
            found.setdefault(target.value, []).append(target)
    cache[id(scope)] = found
    return found


def holds_one_element(sem, name: cst.BaseExpression) -> bool:
    """Whether the tensor `name` holds where it is read certainly has exactly one element: every
    definition reaching it also reaches a gradient-free backward on the same name (the backward
    needs one element, or the program stops there)."""
    if type(name) is not cst.Name:
        return False
    flow = sem.values.flow
    definitions = flow.reaching(name)
    if not definitions:
        return False
    uses = _gradient_free_uses(sem, sem.scopes.scope_of(name)).get(name.value, ())
    if not uses:
        return False
    backed = set()
    for use in uses:
        for definition in flow.reaching(use) or ():
            backed.add(id(definition))
    return all(d.kind in ("assign", "augassign", "walrus") and id(d) in backed for d in definitions)


__all__ = ["holds_one_element"]
