"""Training-loop facts for TL002/TL003 (and the rules that need to know a training loop when they
see one): optimizer steps, backward passes, what clears which gradients, loss tensors.

What a value is (an optimizer and the modules it updates, a criterion, a loss tensor with a
graph) comes from the value model (`Semantic.values`); this module adds what only the shape of
the code says: which call is a step, which loop runs backward, which names a backward pass
reaches. Every answer is "no" when the code does not make it clear.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, FrozenSet, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.backward import (  # noqa: F401 (re-exported: rules ask training for these)
    backward_target, backwarded_names, is_backward, last_identifier,
)
from torchlint.analysis.calls import method_call, method_call_in
from torchlint.analysis.value import (
    CRITERION, GRAD_SCALER, INPUT, LOSS, MODULE, OPTIMIZER, PARAMETER, UNKNOWN, identity,
)

if TYPE_CHECKING:
    from torchlint.analysis.semantic import Semantic

_OPTIMIZER_NAME = re.compile(r"^(?:\w+_)?(?:opt|optim|optimizer|optimiser)(?:_\w+|\d+)?$")
_SCALER_NAME = re.compile(r"scaler", re.IGNORECASE)
# A call of anything spelled like this clears gradients as far as TL002 is concerned
# (`zero_grad`, `optimizer_zero_grad`, `zero_gradients`, `clear_grad`, `reset_grads`).
_CLEARING_NAMES = ("zero_grad", "clear_grad", "reset_grad", "zerograd", "grad_zero", "zero_all_grad")
# Methods that clear a `.grad` tensor in place: `p.grad.zero_()`, `p.grad.data.zero_()`.
_GRAD_CLEARING_METHODS = {"zero_", "detach_", "fill_", "mul_"}

Owners = Optional[FrozenSet[int]]  # modules (by construction site) whose gradients a call touches


# -- optimizers ---------------------------------------------------------------------------------
def is_optimizer(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    """An optimizer: the value model says so (`torch.optim.X(...)`, a name, attribute or
    parameter bound to one, what every caller passes), or a value of unknown kind named like one
    (`optimizer`, `opt_d`, `self.optimizer`, `optimizers[0]`) or used like one (`updater.step()`
    and `updater.zero_grad()` in the same function)."""
    value = sem.values.of(expr)
    if value.kind == OPTIMIZER or value.role == "optimizer":
        return True
    if value.kind not in (UNKNOWN, INPUT):
        return False
    if _built_by_another_framework(sem, expr):
        return False
    if isinstance(expr, cst.Subscript):  # `optimizers[0]`, `self.optimizers[i]`
        inner = last_identifier(expr.value)
        return inner is not None and inner.rstrip("s") in ("optimizer", "optimiser", "opt", "optim")
    name = last_identifier(expr)
    if name is None:
        return False
    if isinstance(expr, cst.Name):
        bindings = sem.scopes.lookup(expr.value, expr) or ()
        if any(b.kind == "import" for b in bindings):
            return False
    elif sem.qualified_name(expr) is not None:  # `torch.optim`, `O.optim` style module paths
        return False
    return bool(_OPTIMIZER_NAME.match(name)) or _used_like_an_optimizer(sem, expr)


# Deep-learning frameworks with optimizers of their own, whose clearing call is not torch's:
# `opt = paddle.optimizer.SGD(...)` is cleared with `opt.clear_grad()` (Paddle has no `zero_grad`).
_OTHER_FRAMEWORKS = ("paddle", "mindspore", "mxnet", "tensorflow", "keras", "jax", "optax", "flax")


def _built_by_another_framework(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    """A name certainly bound to the result of another framework's call (`paddle.optimizer.SGD(...)`)."""
    return sem.assigned_call_package(expr) in _OTHER_FRAMEWORKS


def _used_like_an_optimizer(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    if not isinstance(expr, cst.Name):
        return False
    function = sem.function_of(expr) or sem.module
    used = set()
    for call in sem.calls_under(function, follow_functions=False):
        if method_call(call, "step", "zero_grad") and isinstance(call.func.value, cst.Name) \
                and call.func.value.value == expr.value:
            used.add(call.func.attr.value)
    return used == {"step", "zero_grad"}


def is_grad_scaler(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    value = sem.values.of(expr)
    if value.kind == GRAD_SCALER or value.role == "scaler":
        return True
    if value.kind not in (UNKNOWN, INPUT):
        return False
    name = last_identifier(expr)
    return name is not None and bool(_SCALER_NAME.search(name))


def optimizer_owners(sem: "Semantic", optimizer: cst.BaseExpression) -> Owners:
    """The modules whose parameters `optimizer` updates, when the value model knows them:
    `torch.optim.Adam(G.parameters())` updates G."""
    value = sem.values.of(optimizer)
    if value.kind != OPTIMIZER or not isinstance(value.detail, frozenset):
        return None
    return value.detail


def step_optimizer(sem: "Semantic", call: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """For an optimizer step without a closure (`opt.step()`, `scaler.step(opt)`), the optimizer
    expression; otherwise None (closures, schedulers, environments, unknown receivers)."""
    if not method_call(call, "step"):
        return None
    receiver = call.func.value
    if is_grad_scaler(sem, receiver) and not is_optimizer(sem, receiver):
        if len(call.args) >= 1 and call.args[0].keyword is None and is_optimizer(sem, call.args[0].value):
            if len(call.args) > 1:
                return None  # scaler.step(opt, closure)
            return call.args[0].value
        return None
    if call.args:  # opt.step(closure): the closure clears and computes the gradients itself
        return None
    return receiver if is_optimizer(sem, receiver) else None


def is_closure_step(sem: "Semantic", call: cst.CSTNode) -> bool:
    return method_call(call, "step") and bool(call.args) and is_optimizer(sem, call.func.value)


# The in-place methods a hand-written update calls on a parameter (`p.data.add_(p.grad, ...)`).
MANUAL_UPDATE_METHODS = frozenset(("add_", "sub_", "copy_"))


def manual_update(sem: "Semantic", node: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """A hand-written SGD step: `p.data -= lr * p.grad`, `p -= lr * p.grad` (under no_grad),
    `p.data = p.data - lr * p.grad`, `p.data.add_(p.grad, alpha=-lr)`, `p.copy_(p - lr * p.grad)`,
    with `p` a parameter. Returns `p`."""
    if type(node) is cst.AugAssign:
        target, update = node.target, node.value
    elif type(node) is cst.Assign:
        if len(node.targets) != 1 or not (type(node.targets[0].target) is cst.Attribute
                                          and node.targets[0].target.attr.value == "data"):
            return None
        target, update = node.targets[0].target, node.value
    elif method_call_in(node, MANUAL_UPDATE_METHODS) and node.args:
        target, update = node.func.value, node
    else:
        return None
    if isinstance(target, cst.Attribute) and target.attr.value == "data":
        target = target.value
    if not isinstance(target, cst.Name) or not sem.index.mentions(update, "grad"):
        return None
    if not any(attribute.attr.value == "grad" and isinstance(attribute.value, cst.Name)
               and attribute.value.value == target.value
               for attribute in sem.index.descendants(update, cst.Attribute)):
        return None
    value = sem.values.of(target)
    if value.kind != PARAMETER and not value.is_leaf_requiring_grad:
        return None
    return target


# -- backward and gradient clearing -------------------------------------------------------------
def _is_grad_attribute(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Attribute and expr.attr.value == "grad"


def gradient_clearings(sem: "Semantic", node: cst.CSTNode) -> List[Tuple[cst.CSTNode, Owners]]:
    """Everything under `node` (following same-file calls) that clears gradients, with the
    modules whose gradients it clears when known (None: unknown, taken as all): a `zero_grad()`
    on an optimizer or a module, a call of any function whose name contains `zero_grad`,
    `p.grad = None` / `del p.grad`, `p.grad.zero_()` (also `p.grad.data.zero_()`)."""
    found: List[Tuple[cst.CSTNode, Owners]] = []
    for current in sem.calls_under(node):
        name = last_identifier(current.func)
        if name is not None and any(word in name.lower() for word in _CLEARING_NAMES):
            owners = None
            if name == "zero_grad" and isinstance(current.func, cst.Attribute):
                owners = _owners_of(sem, current.func.value)
            found.append((current, owners))
            continue
        if method_call_in(current, _GRAD_CLEARING_METHODS):
            receiver = current.func.value
            if method_call(receiver, "detach") or isinstance(receiver, cst.Attribute) \
                    and receiver.attr.value == "data":
                receiver = receiver.func.value if isinstance(receiver, cst.Call) else receiver.value
            if _is_grad_attribute(receiver):
                found.append((current, _owners_of(sem, receiver.value)))
    for root in _reachable_roots(sem, node):
        for current in sem.index.descendants(root, (cst.Assign, cst.Del)):
            if isinstance(current, cst.Assign):
                for target in current.targets:
                    if _is_grad_attribute(target.target):
                        found.append((current, _owners_of(sem, target.target.value)))
            elif _is_grad_attribute(current.target) or isinstance(current.target, cst.Tuple) and any(
                    _is_grad_attribute(e.value) for e in current.target.elements):
                found.append((current, None))
    return found


def _owners_of(sem: "Semantic", expr: cst.BaseExpression) -> Owners:
    value = sem.values.of(expr)
    if value.kind == OPTIMIZER:
        return value.detail if isinstance(value.detail, frozenset) else None
    found = identity(value)
    if found is None or isinstance(found, cst.ClassDef):
        return None
    if value.kind in (MODULE, PARAMETER) or (value.kind in (UNKNOWN, INPUT) and _owns_parameters(sem, expr)):
        return frozenset({id(found)})
    return None


def _owns_parameters(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    """`expr` is a name whose `.parameters()` this file reads: a module, whatever its class."""
    if not isinstance(expr, cst.Name):
        return False
    for use in sem.index.names_spelled(expr.value):
        attribute = sem.parent(use)
        if isinstance(attribute, cst.Attribute) and attribute.value is use \
                and attribute.attr.value in ("parameters", "named_parameters"):
            return True
    return False


def clears_gradients(sem: "Semantic", node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The first thing under `node` (following same-file calls) that clears gradients."""
    found = gradient_clearings(sem, node)
    return found[0][0] if found else None


def _reachable_roots(sem: "Semantic", node: cst.CSTNode) -> List[cst.CSTNode]:
    """`node` and the same-file functions/methods it calls, transitively."""
    roots = [node]
    seen: Set[int] = {id(node)}
    pending = [node]
    while pending:
        current = pending.pop()
        for call in sem.index.descendants(current, cst.Call):
            for target in sem.resolve_local_function(call, current):
                if id(target) not in seen:
                    seen.add(id(target))
                    roots.append(target)
                    pending.append(target)
    return roots


def backward_calls_under(sem: "Semantic", node: cst.CSTNode) -> List[cst.Call]:
    return [c for c in sem.calls_under(node) if is_backward(sem, c)]


def training_loop_of(sem: "Semantic", node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The innermost loop enclosing `node` whose body runs a backward pass."""
    for loop in sem.enclosing_loops(node):
        if backward_calls_under(sem, loop.body):
            return loop
    return None


# -- criteria and loss tensors ------------------------------------------------------------------
def is_criterion(sem: "Semantic", expr: cst.BaseExpression, classes=None) -> bool:
    """An instance of a `torch.nn.*Loss` class (of one of `classes` when given), as the value model
    knows it: `nn.CrossEntropyLoss()`, a name, attribute or parameter bound to one,
    `nn.CrossEntropyLoss().cuda()`."""
    called = sem.called_names
    if classes is not None:
        if not any(c in called for c in classes):
            return False  # nothing here builds one: no need to ask the value model
    elif not any(api.is_loss_class(c) for c in called):
        return False
    if not _may_hold_a_criterion(sem, expr):
        return False
    value = sem.values.of(expr)
    if value.kind != CRITERION:
        return False
    return classes is None or value.detail in classes


def _may_hold_a_criterion(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    """A cheap test before asking the value model: `expr` is built here (`nn.MSELoss()(...)`),
    spelled like a name some assignment binds to a loss construction (or to such a name), or a
    parameter (callers may pass one)."""
    if type(expr) is cst.Call:
        return True
    spelled = last_identifier(expr)
    if spelled is None:
        return False
    if spelled in _criterion_spellings(sem):
        return True
    return type(expr) is cst.Name and bool(sem.scopes.lookup(spelled, expr)) and any(
        b.kind == "param" for b in sem.scopes.lookup(spelled, expr))


def _criterion_spellings(sem: "Semantic") -> Set[str]:
    found = sem.__dict__.get("_criterion_spellings")
    if found is not None:
        return found
    found = set()
    assigns = sem.index.nodes(cst.Assign)
    changed = True
    while changed:
        changed = False
        for assign in assigns:
            value = assign.value
            while method_call(value, "to", "cuda", "cpu") and isinstance(value.func.value, cst.Call):
                value = value.func.value
            hit = type(value) is cst.Call and api.is_loss_class(sem.qualified_name(value.func) or "")
            if not hit and type(value) in (cst.Name, cst.Attribute):
                hit = last_identifier(value) in found
            if not hit:
                continue
            for target in assign.targets:
                spelled = last_identifier(target.target)
                if spelled is not None and spelled not in found:
                    found.add(spelled)
                    changed = True
    sem.__dict__["_criterion_spellings"] = found
    return found


def is_loss_call(sem: "Semantic", call: cst.BaseExpression) -> bool:
    """`F.cross_entropy(...)` (any `torch.nn.functional` loss) or `criterion(...)` with
    `criterion` an `nn.*Loss` instance."""
    if not isinstance(call, cst.Call):
        return False
    name = sem.qualified_name(call.func)
    if name is not None and name.startswith("torch.nn.functional.") and name.split(".")[-1] in api.FUNCTIONAL_LOSSES:
        return True
    return is_criterion(sem, call.func)


def is_loss_tensor(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    """Whether `expr` is certainly a loss tensor that carries an autograd graph: a criterion's
    output, a tensor a backward pass runs on, or arithmetic on those, made with grad on (the
    value model's LOSS kind). `.item()`, `float(t)`, `.detach()`, `.data`, and losses computed
    under `no_grad` are not."""
    value = sem.values.of(expr)
    return value.kind == LOSS and not value.has_no_graph


def _mentions(sem: "Semantic", node: cst.CSTNode, name: str) -> bool:
    if type(node) is cst.Name:
        return node.value == name
    return sem.index.mentions(node, name)


def _root_name(expr: cst.BaseExpression) -> Optional[cst.Name]:
    while isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    return expr if isinstance(expr, cst.Name) else None


def derived_names(sem: "Semantic", scope: cst.CSTNode, names: Set[str]) -> Set[str]:
    """`names` and the names built from them in `scope` (`loss = total / n`, `logs["loss"] =
    total`, `score += sl.loss`), a few assignments deep."""
    found = set(names)
    if isinstance(scope, cst.Module):
        assigns = [a for a in sem.index.nodes(cst.Assign) if sem.scopes.scope_of(a) is scope]
        augmented = [a for a in sem.index.nodes(cst.AugAssign) if sem.scopes.scope_of(a) is scope]
    else:
        assigns = [a for a in sem.index.descendants(scope, cst.Assign) if sem.scopes.scope_of(a) is scope]
        augmented = [a for a in sem.index.descendants(scope, cst.AugAssign) if sem.scopes.scope_of(a) is scope]
    for _ in range(3):
        grown = False
        for statement in assigns + augmented:
            if not any(_mentions(sem, statement.value, n) for n in found):
                continue
            targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
            for target in targets:
                root = target if isinstance(target, cst.Name) else _root_name(target)
                if root is not None and root.value != "self" and root.value not in found:
                    found.add(root.value)
                    grown = True
        if not grown:
            break
    return found


_COMPREHENSIONS = (cst.GeneratorExp, cst.ListComp, cst.SetComp, cst.DictComp)


def flows_into_backward(sem: "Semantic", expr: cst.CSTNode, after: bool = False) -> bool:
    """Whether the value of `expr` reaches a backward pass in its own function: a backward target
    contains it, or contains a name built from it there (`style_score += sl.loss; loss =
    style_score + content_score; loss.backward()`, also `score = sum(sl.loss for sl in
    losses)`: a comprehension's value belongs to the function around it). `after`: only a
    backward written after `expr` counts (the same step's backward, not the one of a step that
    ran before the value was read). Kept per node: TL006 asks it several times for each read."""
    cache = sem.__dict__.setdefault("_flows_into_backward", {})
    key = (id(expr), after)
    found = cache.get(key)
    if found is None:
        found = cache[key] = _flows_into_backward(sem, expr, after)
    return found


def _flows_into_backward(sem: "Semantic", expr: cst.CSTNode, after: bool) -> bool:
    scope = sem.scopes.scope_of(expr)
    while isinstance(scope, _COMPREHENSIONS):
        scope = sem.scopes.scope_of(scope)
    statement = sem.statement_of(expr)
    names: Set[str] = set()
    if isinstance(statement, (cst.Assign, cst.AugAssign)):
        targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
        for target in targets:
            root = target if isinstance(target, cst.Name) else _root_name(target)
            if root is not None and root.value != "self":
                names.add(root.value)
    derived = derived_names(sem, scope, names) if names else set()
    calls = sem.index.descendants(scope, cst.Call) if not isinstance(scope, cst.Module) else sem.index.nodes(cst.Call)
    here = sem.index.order[expr]
    for call in calls:
        if after and sem.index.order[call] < here:
            continue
        target = backward_target(sem, call)
        if target is None:
            continue
        if sem.index.contains(target, expr) or any(_mentions(sem, target, n) for n in derived):
            return True
    return not after and bool(derived & backwarded_names(sem, scope))
