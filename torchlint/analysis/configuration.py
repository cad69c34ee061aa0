"""Branches the program's default configuration never takes: the body of `if args.amp:` where
`--amp` is a `store_true` option, of `if self.use_checkpoint:` where the class only ever stores a
constructor parameter that defaults to False, of `if use_ema:` for a parameter defaulting to False
or a module constant `USE_EMA = False`. A finding there hurts only a run that switches the option
on, so its severity is one step lower (`lower_off_branches`)."""

from __future__ import annotations

from dataclasses import replace
from typing import List, Optional, Sequence

import libcst as cst

from torchlint.finding import Severity

_LOWER = {Severity.ERROR: Severity.WARNING, Severity.WARNING: Severity.NOTE, Severity.NOTE: Severity.NOTE}
_OWNERS = frozenset({"args", "opt", "opts", "cfg", "config", "conf", "hparams", "hp", "FLAGS", "flags",
                     "options", "params"})


# Not lowered: a load under `if args.resume:` is how the program resumes; the judgement
# counts every such load of a checkpoint that certainly fails as an error.
_KEPT = frozenset({"TL211"})


def lower_off_branches(sem, reports: Sequence) -> List:
    out = []
    for report in reports:
        condition = None if report.rule.code in _KEPT else off_by_default(sem, report.node)
        if condition is None:
            out.append(report)
            continue
        severity = report.severity if report.severity is not None else report.rule.default_severity
        lowered = _LOWER[severity]
        if lowered is severity:
            out.append(report)
            continue
        out.append(replace(report, severity=lowered, message=(
            f"{report.message} (only when `{condition}` is switched on: off by default)")))
    return out


def off_by_default(sem, node: cst.CSTNode) -> Optional[str]:
    """The condition text of an enclosing `if` whose body holds `node` and whose test is a flag
    that is False in the default configuration, else None."""
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, cst.If) and child is ancestor.body and _flag_off(sem, ancestor.test):
            return " ".join(sem.source(ancestor.test).split())
        if isinstance(ancestor, cst.IfExp) and child is ancestor.body and _flag_off(sem, ancestor.test):
            return " ".join(sem.source(ancestor.test).split())
        child = ancestor
    return None


def _flag_off(sem, test: cst.BaseExpression) -> bool:
    while isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        if _flag_off(sem, test.left):
            return True
        test = test.right
    if isinstance(test, cst.Attribute) and isinstance(test.value, cst.Name):
        owner, attr = test.value.value, test.attr.value
        if owner in _OWNERS:
            return _option_off(sem, attr)
        if owner == "self":
            return _attribute_off(sem, test)
        return False
    if isinstance(test, cst.Name):
        return _name_off(sem, test)
    return False


def _option_off(sem, dest: str) -> bool:
    """`--dest` (or `--dest-name`) is an argparse option of the file that is False by default: a
    `store_true` without `default=`, or `default=False` / `0` / `None`."""
    found = False
    for call in sem.index.nodes(cst.Call):
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument") or not call.args:
            continue
        flags = [a.value for a in call.args if a.keyword is None]
        names = {_string(f).lstrip("-").replace("-", "_") for f in flags if _string(f)}
        explicit = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "dest"), None)
        if explicit is not None and _string(explicit):
            names = {_string(explicit)}
        if dest not in names:
            continue
        default = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "default"), None)
        action = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "action"), None)
        if default is not None:
            if not _false_literal(default):
                return False
        elif not (action is not None and _string(action) == "store_true"):
            return False
        found = True
    return found


def _attribute_off(sem, attribute: cst.Attribute) -> bool:
    """`self.flag` where every store of `self.flag` in the class is False or a constructor
    parameter that defaults to False."""
    klass = next((a for a in sem.ancestors(attribute) if isinstance(a, cst.ClassDef)), None)
    if klass is None:
        return False
    name = attribute.attr.value
    stores = []
    for assign in sem.index.descendants(klass, cst.Assign):
        for target in assign.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self" \
                    and t.attr.value == name:
                stores.append(assign)
            elif not isinstance(t, (cst.Name, cst.Attribute, cst.Subscript)):
                return False  # tuple targets: cannot tell
    for assign in sem.index.descendants(klass, cst.AugAssign):
        if isinstance(assign.target, cst.Attribute) and assign.target.attr.value == name:
            return False
    if not stores:
        return False
    for assign in stores:
        value = assign.value
        if _false_literal(value):
            continue
        if isinstance(value, cst.Name):
            function = sem.function_of(assign)
            param = _param(function, value.value) if function is not None else None
            if param is not None and param.default is not None and _false_literal(param.default) \
                    and not _passed_by_a_caller(sem, klass.name.value, function, param):
                continue
        return False
    # Written from outside (`model.use_checkpoint = True`)?
    return not any(isinstance(a, cst.Attribute) and a.attr.value == name and not _is_self(a)
                   and isinstance(sem.parent(a), cst.AssignTarget) for a in sem.index.nodes(cst.Attribute))


def _name_off(sem, name: cst.Name) -> bool:
    """A parameter of the enclosing function that defaults to False, never rebound in it; or a
    module-level constant assigned only False."""
    function = sem.function_of(name)
    if function is not None:
        param = _param(function, name.value)
        if param is not None:
            rebound = any(isinstance(t.target, cst.Name) and t.target.value == name.value
                          for assign in sem.index.descendants(function, cst.Assign) for t in assign.targets)
            return param.default is not None and _false_literal(param.default) and not rebound \
                and not _passed_by_a_caller(sem, function.name.value, function, param)
    values = [assign.value for assign in sem.index.nodes(cst.Assign)
              if any(isinstance(t.target, cst.Name) and t.target.value == name.value for t in assign.targets)]
    if not values or not all(_false_literal(v) for v in values):
        return False
    # only module-level bindings, and no `global` rebinding elsewhere
    return not any(name.value in [n.name.value for n in g.names if isinstance(n.name, cst.Name)]
                   for g in sem.index.nodes(cst.Global))


def _passed_by_a_caller(sem, callee: str, function: cst.FunctionDef, param: cst.Param,
                        depth: int = 0) -> bool:
    """Whether some call of the file spelled `callee(...)` / `x.callee(...)` may pass `param` a
    value other than False (`Tower(8, remat=True)`, `train(model, True)`, `**options`). A value
    that is itself off by default passes False (`memory_efficient=memory_efficient` in a function
    whose own parameter defaults to False and no caller sets)."""
    if depth > 4:
        return True
    positional = [p.name.value for p in list(function.params.posonly_params) + list(function.params.params)]
    if positional and positional[0] in ("self", "cls"):
        positional = positional[1:]
    index = positional.index(param.name.value) if param.name.value in positional else None
    for call in sem.index.nodes(cst.Call):
        func = call.func
        spelled = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) \
            else None
        if spelled != callee:
            continue
        plain = [a for a in call.args if a.keyword is None and not a.star]
        for arg in call.args:
            if arg.star:
                return True  # `*args` / `**options`: cannot tell
            if arg.keyword is not None and arg.keyword.value == param.name.value \
                    and not _value_off(sem, arg.value, depth):
                return True
        if index is not None and len(plain) > index and not _value_off(sem, plain[index].value, depth):
            return True
    return False


def _value_off(sem, expr: cst.BaseExpression, depth: int) -> bool:
    """False, None, 0, or a parameter of the enclosing function (a `self.` attribute of its class)
    that is off by default."""
    if _false_literal(expr):
        return True
    if isinstance(expr, cst.Name):
        function = sem.function_of(expr)
        param = _param(function, expr.value) if function is not None else None
        if param is None or param.default is None or not _false_literal(param.default):
            return False
        owner = function.name.value
        if owner == "__init__":
            klass = next((a for a in sem.ancestors(function) if isinstance(a, cst.ClassDef)), None)
            if klass is None:
                return False
            owner = klass.name.value
        return not _passed_by_a_caller(sem, owner, function, param, depth + 1)
    if isinstance(expr, cst.Attribute) and _is_self(expr):
        return _attribute_off(sem, expr)
    return False


def _param(function: cst.FunctionDef, name: str) -> Optional[cst.Param]:
    params = function.params
    for param in list(params.posonly_params) + list(params.params) + list(params.kwonly_params):
        if param.name.value == name:
            return param
    return None


def _is_self(attribute: cst.Attribute) -> bool:
    return isinstance(attribute.value, cst.Name) and attribute.value.value == "self"


def _false_literal(expr: cst.BaseExpression) -> bool:
    return (isinstance(expr, cst.Name) and expr.value in ("False", "None")) or \
        (isinstance(expr, cst.Integer) and expr.value == "0")


def _string(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


__all__ = ["lower_off_branches", "off_by_default"]
