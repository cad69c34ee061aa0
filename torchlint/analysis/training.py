"""Training-loop facts for TL002/TL003: optimizer steps, gradient clearing, loss tensors.

Each function takes the module's `Semantic` object and answers conservatively: when the code does
not make it clear that a call is an optimizer step or that a value is a loss tensor with a graph,
the answer is "no".
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, List, Optional, Set

import libcst as cst

from torchlint.analysis.semantic import method_call

if TYPE_CHECKING:
    from torchlint.analysis.semantic import Semantic

# torch.nn.functional losses (all return a tensor that carries the graph of their inputs).
FUNCTIONAL_LOSSES = {
    "cross_entropy", "mse_loss", "nll_loss", "l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "smooth_l1_loss", "huber_loss", "kl_div", "ctc_loss",
    "cosine_embedding_loss", "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
    "multilabel_soft_margin_loss", "multilabel_margin_loss", "multi_margin_loss",
    "triplet_margin_loss", "triplet_margin_with_distance_loss", "poisson_nll_loss",
    "gaussian_nll_loss",
}
# Tensor methods whose result still carries the receiver's graph (`.cpu()` does not detach).
GRAPH_PRESERVING_METHODS = {
    "mean", "sum", "cpu", "cuda", "to", "clone", "float", "double", "half", "bfloat16", "squeeze",
    "unsqueeze", "view", "reshape", "flatten", "abs", "sqrt", "exp", "log", "mul", "div", "add",
    "sub", "neg", "contiguous", "nansum", "nanmean",
}
_OPTIMIZER_NAME = re.compile(r"^(?:\w+_)?(?:opt|optim|optimizer|optimiser)(?:_\w+|\d+)?$")
_SCALER_NAME = re.compile(r"scaler", re.IGNORECASE)
GRAD_SCALERS = {
    "torch.amp.GradScaler", "torch.cuda.amp.GradScaler", "torch.GradScaler",
    "torch.amp.grad_scaler.GradScaler", "torch.cpu.amp.GradScaler",
}
# A call of anything spelled like this clears gradients as far as TL002 is concerned
# (`zero_grad`, `optimizer_zero_grad`, `zero_gradients`, `clear_grad`, `reset_grads`).
_CLEARING_NAMES = ("zero_grad", "clear_grad", "reset_grad", "zerograd", "grad_zero", "zero_all_grad")
# Methods that clear a `.grad` tensor in place: `p.grad.zero_()`, `p.grad.data.zero_()`.
_GRAD_CLEARING_METHODS = {"zero_", "detach_", "fill_", "mul_"}
# Objects whose `.backward(loss)` runs backward on the argument (accelerate, Fabric, DeepSpeed).
_BACKWARD_OWNERS = ("accelerator", "fabric", "engine", "deepspeed", "trainer", "strategy")


def last_identifier(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


# -- optimizers ---------------------------------------------------------------------------------
def is_optimizer(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    """`torch.optim.X(...)`, a name or `self.attr` bound to one, or a name/attribute spelled like
    an optimizer (`optimizer`, `opt`, `self.optimizer`, `g_optim`, `opt_d`) that does not refer to
    an imported module (`import torch.optim as optim` makes `optim` the module)."""
    if sem.is_optimizer_expr(expr):
        return True
    if isinstance(expr, cst.Subscript):  # `optimizers[0]`, `self.optimizers[i]`
        inner = last_identifier(expr.value)
        return inner is not None and inner.rstrip("s") in ("optimizer", "optimiser", "opt", "optim")
    name = last_identifier(expr)
    if name is None or not _OPTIMIZER_NAME.match(name):
        return False
    if isinstance(expr, cst.Name):
        bindings = sem.scopes.lookup(expr.value, expr) or ()
        if any(b.kind == "import" for b in bindings):
            return False
    elif sem.qualified_name(expr) is not None:  # `torch.optim`, `O.optim` style module paths
        return False
    return True


def is_grad_scaler(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Call):
        return sem.is_torch(expr, *GRAD_SCALERS)
    if isinstance(expr, cst.Name):
        value = sem.reaching_value(expr)
        if isinstance(value, cst.Call) and sem.is_torch(value, *GRAD_SCALERS):
            return True
    name = last_identifier(expr)
    return name is not None and bool(_SCALER_NAME.search(name))


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


def optimized_modules(sem: "Semantic", optimizer: cst.BaseExpression, code) -> Set[str]:
    """Source texts of the modules whose parameters `optimizer` was built from:
    `opt = torch.optim.SGD(model.parameters())` gives {"model"}."""
    values: List[cst.BaseExpression] = []
    if isinstance(optimizer, cst.Name):
        value = sem.reaching_value(optimizer)
        if value is not None and value is not optimizer:
            values.append(value)
    elif isinstance(optimizer, cst.Attribute) and isinstance(optimizer.value, cst.Name) \
            and optimizer.value.value == "self":
        values.extend(sem.self_attribute_assignments(optimizer))
    found: Set[str] = set()
    for value in values:
        if sem.is_optimizer_construction(value) and value.args:
            params = value.args[0].value
            if method_call(params, "parameters", "named_parameters"):
                found.add(code(params.func.value))
    return found


def is_closure_step(sem: "Semantic", call: cst.CSTNode) -> bool:
    return (
        method_call(call, "step") and bool(call.args)
        and is_optimizer(sem, call.func.value)
    )


# -- backward and gradient clearing -------------------------------------------------------------
def is_backward(sem: "Semantic", call: cst.CSTNode) -> bool:
    """`loss.backward()`, `scaler.scale(loss).backward()`, `torch.autograd.backward(...)`,
    `accelerator.backward(loss)`, `self.manual_backward(loss)`."""
    if not isinstance(call, cst.Call):
        return False
    if sem.is_backward_call(call):
        return True
    return method_call(call, "manual_backward")


def backward_target(sem: "Semantic", call: cst.Call) -> Optional[cst.BaseExpression]:
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


def _reachable_roots(sem: "Semantic", node: cst.CSTNode) -> List[cst.CSTNode]:
    """`node` and the same-file functions/methods it calls, transitively."""
    roots = [node]
    seen: Set[cst.CSTNode] = {node}
    pending = [node]
    while pending:
        current = pending.pop()
        for call in sem.index.descendants(current, cst.Call):
            for target in sem.resolve_local_function(call, current):
                if target not in seen:
                    seen.add(target)
                    roots.append(target)
                    pending.append(target)
    return roots


def _is_grad_attribute(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and expr.attr.value == "grad"


def clears_gradients(sem: "Semantic", node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The first thing under `node` (following same-file calls) that clears gradients:
    a `zero_grad(...)` call on anything, a call of any function whose name contains `zero_grad`,
    `p.grad = None` / `del p.grad`, `p.grad.zero_()` (also `p.grad.data.zero_()`)."""
    for root in _reachable_roots(sem, node):
        for current in sem.index.descendants(root):
            if isinstance(current, cst.Call):
                name = last_identifier(current.func)
                if name is not None and any(word in name.lower() for word in _CLEARING_NAMES):
                    return current
                if method_call(current, *_GRAD_CLEARING_METHODS):
                    receiver = current.func.value
                    if method_call(receiver, "detach") or isinstance(receiver, cst.Attribute) \
                            and receiver.attr.value == "data":
                        receiver = receiver.func.value if isinstance(receiver, cst.Call) else receiver.value
                    if _is_grad_attribute(receiver):
                        return current
            elif isinstance(current, cst.Assign):
                if any(_is_grad_attribute(t.target) for t in current.targets):
                    return current
            elif isinstance(current, cst.Del):
                if _is_grad_attribute(current.target) or isinstance(current.target, cst.Tuple) and any(
                    _is_grad_attribute(e.value) for e in current.target.elements
                ):
                    return current
    return None


def backward_calls_under(sem: "Semantic", node: cst.CSTNode) -> List[cst.Call]:
    return [c for c in sem.calls_under(node) if is_backward(sem, c)]


def training_loop_of(sem: "Semantic", node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The innermost loop enclosing `node` whose body runs a backward pass."""
    for loop in sem.enclosing_loops(node):
        if backward_calls_under(sem, loop.body):
            return loop
    return None


# -- loss tensors -------------------------------------------------------------------------------
def is_loss_class(sem: "Semantic", func: cst.BaseExpression) -> bool:
    name = sem.qualified_name(func)
    if name is None:
        return False
    parts = name.split(".")
    return parts[:2] == ["torch", "nn"] and parts[-1].endswith("Loss") and parts[-1][:1].isupper() \
        and len(parts) in (3, 5)  # torch.nn.MSELoss, torch.nn.modules.loss.MSELoss


def is_criterion(sem: "Semantic", expr: cst.BaseExpression, depth: int = 3) -> bool:
    """An instance of a `torch.nn.*Loss` class (`nn.CrossEntropyLoss()`, a name or `self.attr`
    bound to one)."""
    if depth <= 0:
        return False
    if isinstance(expr, cst.Call):
        return is_loss_class(sem, expr.func)
    return sem.bound_value_is(expr, lambda v: is_criterion(sem, v, depth - 1))


def is_loss_call(sem: "Semantic", call: cst.BaseExpression) -> bool:
    """`F.cross_entropy(...)` (any `torch.nn.functional` loss) or `criterion(...)` with
    `criterion` an `nn.*Loss` instance."""
    if not isinstance(call, cst.Call):
        return False
    name = sem.qualified_name(call.func)
    if name is not None and name.startswith("torch.nn.functional.") and name.split(".")[-1] in FUNCTIONAL_LOSSES:
        return True
    return is_criterion(sem, call.func)


_DETACHING_VALUE_METHODS = {"item", "detach", "tolist", "numpy", "detach_"}


def _is_detached_value(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Call):
        if method_call(expr, *_DETACHING_VALUE_METHODS):
            return True
        if isinstance(expr.func, cst.Name) and expr.func.value in ("float", "int"):
            return True
        if method_call(expr):
            return _is_detached_value(expr.func.value)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        return True
    return False


def backwarded_names(sem: "Semantic", scope: cst.CSTNode) -> Set[str]:
    """Names `n` in `scope` (a function or the module) on which a backward pass runs."""
    cache = sem.__dict__.setdefault("_training_backwarded", {})
    found = cache.get(scope)
    if found is None:
        found = set()
        for call in sem.index.descendants(scope, cst.Call) if not isinstance(scope, cst.Module) \
                else sem.index.nodes(cst.Call):
            if sem.scopes.scope_of(call) is not scope:
                continue
            target = backward_target(sem, call)
            while method_call(target, *GRAPH_PRESERVING_METHODS):
                target = target.func.value
            if isinstance(target, cst.Name):
                found.add(target.value)
        cache[scope] = found
    return found


def _returns_loss(sem: "Semantic", call: cst.Call, depth: int) -> bool:
    """`call` runs the one same-file function of that name, and each of its returns is a loss
    tensor (`def loss_function(...): ...; return BCE + KLD`)."""
    functions = sem.resolve_local_function(call, call)
    if len(functions) != 1:
        return False
    function = functions[0]
    returns = [r for r in sem.index.descendants(function.body, cst.Return) if sem.function_of(r) is function]
    return bool(returns) and all(r.value is not None and is_loss_tensor(sem, r.value, depth) for r in returns)


def is_loss_tensor(sem: "Semantic", expr: cst.BaseExpression, depth: int = 4) -> bool:
    """Whether `expr` is certainly a loss tensor that carries an autograd graph: a loss criterion
    call, a name bound to one, a name on which `.backward()` is called in the same scope (and
    never bound to a detached value there), or arithmetic / graph-preserving methods on those.
    `.item()`, `float(t)`, `.detach()`, `.tolist()`, `.data` are not."""
    if depth <= 0:
        return False
    if isinstance(expr, cst.Call):
        if is_loss_call(sem, expr):
            return True
        if method_call(expr, *GRAPH_PRESERVING_METHODS):
            return is_loss_tensor(sem, expr.func.value, depth - 1)
        return _returns_loss(sem, expr, depth - 1)
    if isinstance(expr, cst.BinaryOperation):
        return is_loss_tensor(sem, expr.left, depth - 1) or is_loss_tensor(sem, expr.right, depth - 1)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return is_loss_tensor(sem, expr.expression, depth - 1)
    if isinstance(expr, cst.Name):
        value = sem.reaching_value(expr, depth=1)
        if value is not None and value is not expr:
            if _is_detached_value(value):
                return False
            if is_loss_tensor(sem, value, depth - 1):
                return True
        scope = sem.scopes.scope_of(expr)
        if expr.value not in backwarded_names(sem, scope):
            return False
        for binding in sem.scopes.bindings_in(scope, expr.value):
            if binding.kind in ("import", "def", "class"):
                return False
            if binding.value is not None and _is_detached_value(binding.value):
                return False
        return True
    return False
