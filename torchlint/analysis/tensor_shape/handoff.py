"""Models and loaders handed to functions: the training script passes them on
(`engine.train(model=model, train_dataloader=train_dataloader)`), and the function, in this file
or another of the project, runs the model on the loader's batches (`for X, y in dataloader:
y_pred = model(X)`), possibly through a helper it passes them to (`train_step(model, dataloader)`).

`feeds(sem, call)` names the arguments of such a call that the callee feeds to each other; the
facts then run the caller's model on the caller's loader, as if the script did it itself.
"""

from __future__ import annotations

from typing import List, Tuple

import libcst as cst

from torchlint.analysis.tensor_shape.callees import bind_call, project_function

_MAX_DEPTH = 3


def may_be_project_function(sem, func: cst.BaseExpression) -> bool:
    """A cheap first test for `project_function`: a name or a dotted name that no library owns."""
    from torchlint.analysis.project_files import _LIBRARY_ROOTS

    if isinstance(func, cst.Name):
        return sem.qualified_name(func) is None or sem.project is not None
    qualified = sem.qualified_name(func)
    return bool(qualified) and sem.project is not None and qualified.split(".")[0] not in _LIBRARY_ROOTS


def feeds(sem, call: cst.Call) -> List[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(model argument, loader argument) pairs of `call` whose callee runs the model on the first
    element of the loader's batches."""
    found = project_function(sem, call.func, loops=True)
    if found is None:
        return []
    function, function_sem = found
    feeding = _feeding(function_sem, function, 0)  # syntactic and cached: most callees feed nothing
    if not feeding:
        return []
    bound = bind_call(sem, call, function)
    if not bound:
        return []
    pairs = []
    for model, loader in feeding:
        if model in bound and loader in bound:
            pairs.append((bound[model][1], bound[loader][1]))
    return pairs


def _feeding(sem, function: cst.FunctionDef, depth: int) -> List[Tuple[str, str]]:
    """(model parameter, loader parameter) pairs of `function`: it calls the model on the first
    element of the loader's batches, itself or through a function it passes both to."""
    cache = sem.__dict__.setdefault("_shape_feeding", {})
    key = id(function)
    if key in cache:
        return cache[key]
    cache[key] = []
    from torchlint.analysis.tensor_shape.inputs import batch_origin

    params = {p.name.value for p in function.params.params}
    pairs: List[Tuple[str, str]] = []
    for call in sem.calls_under(function, follow_functions=False):
        func = call.func
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if isinstance(func, cst.Name) and func.value in params and _is_param(sem, func):
            if len(call.args) == 1 and len(positional) == 1:
                origin = batch_origin(sem, positional[0].value)
                if origin is not None and origin[1] == (0,) and isinstance(origin[0], cst.Name) \
                        and origin[0].value in params and _is_param(sem, origin[0]):
                    pairs.append((func.value, origin[0].value))
            continue
        if depth >= _MAX_DEPTH:
            continue
        found = project_function(sem, func, loops=True)
        if found is None or found[0] is function:
            continue
        callee, callee_sem = found
        bound = bind_call(sem, call, callee)
        if not bound:
            continue
        for model, loader in _feeding(callee_sem, callee, depth + 1):
            if model not in bound or loader not in bound:
                continue
            names = [bound[model][1], bound[loader][1]]
            if all(isinstance(n, cst.Name) and n.value in params and _is_param(sem, n) for n in names):
                pairs.append((names[0].value, names[1].value))
    cache[key] = pairs
    return pairs


def _is_param(sem, name: cst.Name) -> bool:
    definition = sem.reaching_definition(name)
    return definition is not None and definition.kind == "param"
