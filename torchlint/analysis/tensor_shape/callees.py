"""Functions of the project that a call names: which `def` it runs (in this file or another file
of the project) and what the call binds to its parameters. The shape facts read the loaders these
functions build (`inputs.returned_loader`) and the models they feed (`handoff`).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import libcst as cst

from torchlint.analysis.frames import _bind


def project_function(sem, func: cst.BaseExpression, loops: bool = False) -> Optional[Tuple[cst.FunctionDef, Any]]:
    """The top-level function a call names, in this file or another file of the project; with
    `loops`, None for a function of a file beside this one that has no `for` at all."""
    if isinstance(func, cst.Name):
        definition = sem.reaching_definition(func)
        if definition is not None and definition.kind == "def" and isinstance(definition.statement, cst.FunctionDef):
            function = definition.statement
            return (function, sem) if sem.class_of_method(function) is None else None
        if definition is None and sem.function_of(func) is not None:  # a module-level def read in a function
            defined = [s for s in sem.module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))
                       and s.name.value == func.value]
            if len(defined) == 1 and isinstance(defined[0], cst.FunctionDef) and \
                    len(sem.scopes.bindings_in(sem.module, func.value)) == 1:
                return defined[0], sem
    qualified = sem.qualified_name(func)
    if qualified and loops and not _may_loop(sem, qualified):
        return None
    found = project_definition(sem, qualified, "function")
    if found is None:
        return None
    other = found[1]
    name = qualified.rsplit(".", 1)[-1]
    for statement in other.module.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            return statement, other
    return None


def project_definition(sem, qualified: Optional[str], kind: str) -> Optional[Tuple[Any, Any]]:
    """(fact, semantic of its file) for a name another file of the project defines as `kind`
    ("function", "module class"); None for library names and anything else."""
    project = sem.project
    if not qualified or project is None or qualified.split(".")[0] in ("torch", "torchvision", "builtins"):
        return None
    fact = project.fact(qualified)
    if fact is None or fact.kind != kind:
        return None
    from torchlint.analysis import project as project_layer

    parsed = project_layer._read(fact.location[0])
    if parsed is None or parsed.semantic is None:
        return None
    return fact, parsed.semantic


def _may_loop(sem, qualified: str) -> bool:
    """False when the callee's module is a file of the project (beside this one, or a package
    below this file's directory or one of the two above it) without a `for` anywhere: it cannot
    feed batches, and needs no parse to say so (`log_utils.rank_log(...)`)."""
    import os

    from torchlint.analysis.project_files import _text_of

    module = qualified.rsplit(".", 1)[0]
    if not sem.path or "." not in qualified or module.startswith("."):
        return True
    parts = module.split(".")
    directory = os.path.dirname(os.path.abspath(sem.path))
    for _ in range(3):
        base = os.path.join(directory, *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            found = _text_of(candidate)
            if found is not None:
                return "for " in found[0]
        directory = os.path.dirname(directory)
    return True


def bind_call(sem, call: cst.Call, function: cst.FunctionDef) -> Optional[Dict[str, Tuple[Any, cst.BaseExpression]]]:
    """Each parameter of `function` the call passes: name -> (caller's semantic, argument); None
    where the value model's binding hides which parameter gets what, or where an argument finds no
    parameter (the call would raise TypeError)."""
    binding = _bind(function, call, skip_self=False)
    if binding is None or len(binding) != len(call.args):
        return None
    names = {id(p): p.name.value for p in (*function.params.posonly_params, *function.params.params,
                                            *function.params.kwonly_params)}
    return {names[key]: (sem, argument) for key, argument in binding.items()}
