"""Evidence from use: what a function's parameter is, read from how the function uses it, for a
parameter that nothing else explains (no caller in the file, no annotation, no default).

Three facts, each certain only where the use allows nothing else:

- a parameter called as `model(x)` whose output is the *prediction* of a loss that the function
  backpropagates (the first argument of the call that computes the loss: `crit(model(x), y)`,
  `F.cross_entropy(out.view(-1, C), y)` with `out = model(x)`) is a module with parameters;
  a callable whose own result is the loss (`loss = step_fn(batch)`), a callable applied to the
  target (`crit(model(x), encode(y))`) and a callable applied to another callable's output
  (`model(transform(x))`: `transform`) are not;
- a parameter iterated as `for x, y in loader` (or `enumerate(loader)`) whose items are fed to
  such a module is a loader: its items are tensors;
- a parameter with `.zero_grad()` and `.step()` in a function that runs `.backward()` before that
  `.step()` is an optimizer.

Purely syntactic: no values, so the interpreter can ask it while computing a parameter's value.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set

import libcst as cst

MODULE_EVIDENCE = "module"
LOADER_EVIDENCE = "loader"
OPTIMIZER_EVIDENCE = "optimizer"

_ITERATION_WRAPPERS = frozenset({"enumerate", "tqdm", "iter"})


def _own_nodes(function: cst.FunctionDef, index, node_type) -> List[cst.CSTNode]:
    """The nodes of `node_type` in `function`'s body that are not inside a nested def, class or
    lambda."""
    found = []
    for node in index.descendants(function.body, node_type):
        owner = None
        for ancestor in index.ancestors(node):
            if type(ancestor) in (cst.FunctionDef, cst.Lambda, cst.ClassDef):
                owner = ancestor
                break
        if owner is function:
            found.append(node)
    return found


def _target_names(target: cst.BaseExpression) -> List[str]:
    if type(target) is cst.Name:
        return [target.value]
    if type(target) in (cst.Tuple, cst.List):
        names = []
        for element in target.elements:
            names.extend(_target_names(element.value))
        return names
    if type(target) is cst.StarredElement:
        return _target_names(target.value)
    return []


def _plain_params(function: cst.FunctionDef) -> List[str]:
    params = function.params
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)
             if p.default is None and p.annotation is None]
    return names


def evidence_of_use(function: cst.FunctionDef, index) -> Dict[str, str]:
    """{parameter name: MODULE_EVIDENCE, LOADER_EVIDENCE or OPTIMIZER_EVIDENCE} for `function`'s
    unannotated parameters without defaults that its body shows to be one."""
    candidates = set(_plain_params(function))
    if not candidates:
        return {}
    calls = _own_nodes(function, index, cst.Call)
    backwards = [c for c in calls if type(c.func) is cst.Attribute and c.func.attr.value == "backward"]
    if not backwards:
        return {}
    assigned: Dict[str, List[cst.BaseExpression]] = {}
    rebound: Set[str] = set()
    for statement in _own_nodes(function, index, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
        if type(statement) is cst.Assign:
            targets = [t.target for t in statement.targets]
        else:
            targets = [statement.target]
        for target in targets:
            for name in _target_names(target):
                assigned.setdefault(name, []).append(statement.value)
                rebound.add(name)
    loops: Dict[str, List[cst.BaseExpression]] = {}
    for loop in _own_nodes(function, index, (cst.For, cst.CompFor)):
        for name in _target_names(loop.target):
            loops.setdefault(name, []).append(loop.iter)
            rebound.add(name)
    params = candidates - rebound
    if not params:
        return {}
    found: Dict[str, str] = {}

    # -- modules: the first call of a parameter on the prediction side of a backpropagated loss --
    roots: List[cst.BaseExpression] = []
    for call in backwards:
        receiver = call.func.value
        if type(receiver) is cst.Call and type(receiver.func) is cst.Attribute \
                and receiver.func.attr.value == "scale" and receiver.args:
            receiver = receiver.args[0].value  # `scaler.scale(loss).backward()`
        roots.append(receiver)
    seen: Set[int] = set()
    predictions: List[cst.BaseExpression] = []
    while roots:
        root = roots.pop()
        if id(root) in seen:
            continue
        seen.add(id(root))
        kind = type(root)
        if kind is cst.Name:
            roots.extend(assigned.get(root.value, ()))
        elif kind is cst.BinaryOperation:
            roots.extend((root.left, root.right))
        elif kind is cst.UnaryOperation:
            roots.append(root.expression)
        elif kind is cst.Call:
            func = root.func
            if type(func) is cst.Attribute:
                roots.append(func.value)  # `crit(out, y).mean()`: the receiver is the loss too
            elif type(func) is cst.Name and func.value in params:
                pass  # `loss = step_fn(batch)`: a callable that returns the loss
            positional = [a for a in root.args if a.keyword is None and not a.star]
            if type(func) is not cst.Attribute and positional:
                predictions.append(positional[0].value)
            elif type(func) is cst.Attribute and func.attr.value not in _REDUCTIONS and positional:
                predictions.append(positional[0].value)  # `self.criterion(out, y)`, `nn.functional.mse_loss`
    modules = set()
    seen = set()
    while predictions:
        expr = predictions.pop()
        if id(expr) in seen:
            continue
        seen.add(id(expr))
        kind = type(expr)
        if kind is cst.Name:
            predictions.extend(assigned.get(expr.value, ()))
        elif kind is cst.Call:
            func = expr.func
            if type(func) is cst.Name and func.value in params:
                modules.add(func.value)
                continue
            if type(func) is cst.Attribute:
                predictions.append(func.value)  # `out.view(-1, C)`
            positional = [a for a in expr.args if a.keyword is None and not a.star]
            if positional:
                predictions.append(positional[0].value)  # `F.log_softmax(model(x), 1)`
        elif kind is cst.Subscript:
            predictions.append(expr.value)
        elif kind is cst.Attribute:
            predictions.append(expr.value)  # `model(x).logits`
        elif kind is cst.BinaryOperation:
            predictions.extend((expr.left, expr.right))
        elif kind is cst.UnaryOperation:
            predictions.append(expr.expression)
    for name in modules:
        found[name] = MODULE_EVIDENCE

    # -- loaders: iterated, with an item fed to such a module ---------------------------------
    if modules:
        fed: Set[str] = set()
        for call in calls:
            if type(call.func) is cst.Name and call.func.value in modules:
                for argument in call.args:
                    fed.update(_names_in(argument.value, index))
        fed = _closure_back(fed, assigned, index)
        for name in fed:
            for iterable in loops.get(name, ()):
                loader = _iterated_param(iterable, params)
                if loader is not None and loader not in modules:
                    found[loader] = LOADER_EVIDENCE

    # -- optimizers: `.zero_grad()` and a `.step()` after a backward ------------------------------
    first_backward = min(index.number(c) for c in backwards)
    methods: Dict[str, Set[str]] = {}
    for call in calls:
        func = call.func
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value in params \
                and func.attr.value in ("zero_grad", "step") and not call.args:
            if func.attr.value == "step" and index.number(call) < first_backward:
                continue
            methods.setdefault(func.value.value, set()).add(func.attr.value)
    for name, spelled in methods.items():
        if spelled == {"zero_grad", "step"} and name not in found:
            found[name] = OPTIMIZER_EVIDENCE
    return found


_REDUCTIONS = frozenset({"mean", "sum", "backward", "item", "squeeze", "view", "reshape", "float", "double",
                         "to", "cuda", "cpu"})


def _names_in(expr: cst.CSTNode, index) -> Set[str]:
    names = {expr.value} if type(expr) is cst.Name else set()
    for node in index.descendants(expr, cst.Name):
        names.add(node.value)
    return names


def _closure_back(names: Set[str], assigned: Dict[str, List[cst.BaseExpression]], index) -> Set[str]:
    """`names` and every name their assigned values read (`x = x.to(device)`: `x`)."""
    found = set(names)
    work = list(names)
    while work:
        name = work.pop()
        for value in assigned.get(name, ()):
            for other in _names_in(value, index):
                if other not in found:
                    found.add(other)
                    work.append(other)
    return found


def _iterated_param(iterable: cst.BaseExpression, params: Set[str]) -> Optional[str]:
    """The parameter a loop iterates: `loader`, `enumerate(loader)`, `tqdm(loader)`."""
    while type(iterable) is cst.Call and type(iterable.func) is cst.Name \
            and iterable.func.value in _ITERATION_WRAPPERS and iterable.args:
        iterable = iterable.args[0].value
    if type(iterable) is cst.Name and iterable.value in params:
        return iterable.value
    return None
