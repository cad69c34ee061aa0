"""Which tensors a backward pass runs on, judged from the syntax and the names the file imports:
`loss.backward()`, `scaler.scale(loss).backward()`, `accelerator.backward(loss)`,
`torch.autograd.backward(loss)`. The value model asks it (a value `.backward()` runs on has a
graph); it needs only the semantic model's names, scopes and index, so it imports none of the
analysis that asks it."""

from __future__ import annotations

from typing import Dict, List, Optional, Set

import libcst as cst

from torchlint.analysis.calls import method_call, method_call_in

# Objects whose `.backward(loss)` runs backward on the argument (accelerate, Fabric, DeepSpeed).
_BACKWARD_OWNERS = ("accelerator", "fabric", "engine", "deepspeed", "trainer", "strategy")
# Tensor methods whose result still carries the receiver's graph: a backward on `loss.mean()`
# reaches `loss`.
_GRAPH_KEEPING = {
    "mean", "sum", "cpu", "cuda", "to", "clone", "float", "double", "half", "bfloat16", "squeeze",
    "unsqueeze", "view", "reshape", "flatten", "abs", "sqrt", "exp", "log", "mul", "div", "add",
    "sub", "neg", "contiguous", "nansum", "nanmean",
}


def last_identifier(expr: cst.BaseExpression) -> Optional[str]:
    if type(expr) is cst.Name:
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def is_backward(sem, call: cst.CSTNode) -> bool:
    """`loss.backward()`, `scaler.scale(loss).backward()`, `torch.autograd.backward(...)`,
    `accelerator.backward(loss)`, `self.manual_backward(loss)`."""
    if not isinstance(call, cst.Call):
        return False
    if sem.is_backward_call(call):
        return True
    return method_call(call, "manual_backward")


def backward_target(sem, call: cst.Call) -> Optional[cst.BaseExpression]:
    """The tensor a backward call differentiates: `t` in `t.backward()`,
    `scaler.scale(t).backward()`, `accelerator.backward(t)`, `self.manual_backward(t)`,
    `torch.autograd.backward(t)`."""
    if not is_backward(sem, call):
        return None
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "backward" and not sem.is_torch(call, "torch.*"):
        receiver = func.value
        owner = last_identifier(receiver) or ""
        if positional and any(k in owner.lower() for k in _BACKWARD_OWNERS):
            return positional[0]
        if method_call(receiver, "scale") and len(receiver.args) == 1:
            return receiver.args[0].value
        return receiver
    return positional[0] if positional else None


def backwarded_names(sem, scope: cst.CSTNode) -> Set[str]:
    """Names `n` in `scope` (a function or the module) on which a backward pass runs."""
    return set(backwarded_uses(sem, scope))


def backwarded_uses(sem, scope: cst.CSTNode) -> Dict[str, List[cst.Name]]:
    """For each name in `scope` on which a backward pass runs, the Name nodes it runs on (`loss`
    in `loss.backward()`, `scaler.scale(loss).backward()`): the definitions reaching them are the
    values that are backpropagated, not every value the name ever holds."""
    cache = sem.__dict__.setdefault("_training_backwarded", {})
    found = cache.get(id(scope))
    if found is None:
        found = {}
        for call in sem.index.descendants(scope, cst.Call) if not isinstance(scope, cst.Module) \
                else sem.index.nodes(cst.Call):
            if sem.scopes.scope_of(call) is not scope:
                continue
            target = backward_target(sem, call)
            while method_call_in(target, _GRAPH_KEEPING):
                target = target.func.value
            if type(target) is cst.Name:
                found.setdefault(target.value, []).append(target)
        cache[id(scope)] = found
    return found


def feeds_backward(sem, node: cst.CSTNode) -> bool:
    """Whether the value of `node` flows into a backward pass of its own scope: it sits in a
    backward's target (`(a + torch.tensor(b)).backward()`), or in the value of an assignment to a
    name that a later backward runs on, directly or through other names
    (`extra = torch.Tensor([p]); loss = mse + extra; loss.backward()`). Flow-insensitive over
    names, but the assignment must come before the backward in the file."""
    scope = sem.scopes.scope_of(node)
    if scope is None:
        return False
    chains = _backward_chains(sem, scope)
    if not chains:
        return False
    index = sem.index
    position = index.number(node)
    for target, last in chains.get(None, ()):
        if index.contains(target, node):
            return True
    statement = sem.statement_of(node)
    targets: List[str] = []
    if isinstance(statement, cst.Assign):
        for assign_target in statement.targets:
            if type(assign_target.target) is cst.Name:
                targets.append(assign_target.target.value)
    elif isinstance(statement, (cst.AugAssign, cst.AnnAssign)) and type(statement.target) is cst.Name:
        targets.append(statement.target.value)
    for name in targets:
        last = chains.get(name)
        if last is not None and position is not None and position < last:
            return True
    return False


def _backward_chains(sem, scope: cst.CSTNode) -> Dict:
    """{name: the position of the last backward its value reaches} for the names in `scope`
    whose values flow into a backward pass; under the key None, (target expression, position)
    of each backward."""
    cache = sem.__dict__.setdefault("_backward_chains", {})
    found = cache.get(id(scope))
    if found is not None:
        return found
    index = sem.index
    found = {}
    direct = []
    calls = index.descendants(scope, cst.Call) if not isinstance(scope, cst.Module) else index.nodes(cst.Call)
    for call in calls:
        if sem.scopes.scope_of(call) is not scope:
            continue
        target = backward_target(sem, call)
        if target is None:
            continue
        position = index.number(call)
        direct.append((target, position))
        names = [target] if type(target) is cst.Name else list(index.descendants(target, cst.Name))
        for name in names:
            found[name.value] = max(found.get(name.value, -1), position)
    if not direct:
        cache[id(scope)] = {}
        return {}
    assignments = []
    statements = index.descendants(scope, (cst.Assign, cst.AugAssign)) if not isinstance(scope, cst.Module) \
        else [*index.nodes(cst.Assign), *index.nodes(cst.AugAssign)]
    for statement in statements:
        if sem.scopes.scope_of(statement) is not scope:
            continue
        if isinstance(statement, cst.Assign):
            names = [t.target.value for t in statement.targets if type(t.target) is cst.Name]
        else:
            names = [statement.target.value] if type(statement.target) is cst.Name else []
        if names:
            read = {n.value for n in index.descendants(statement.value, cst.Name)}
            if type(statement.value) is cst.Name:
                read.add(statement.value.value)
            assignments.append((names, read, index.number(statement)))
    changed = True
    while changed:
        changed = False
        for names, read, position in assignments:
            reach = max((found[n] for n in names if n in found and position < found[n]), default=-1)
            if reach < 0:
                continue
            for other in read:
                if found.get(other, -1) < reach:
                    found[other] = reach
                    changed = True
    found[None] = direct
    cache[id(scope)] = found
    return found
