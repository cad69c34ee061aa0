"""TL101: submodules (or parameters) kept in a plain list or dict are not registered."""

from __future__ import annotations

from typing import Iterable, Optional, Tuple, Union

import libcst as cst

from torchlint.analysis import devices
from torchlint.analysis import project_uses
from torchlint.analysis import torch_api as api
from torchlint.analysis.scopes import dotted_name
from torchlint.analysis.semantic import MODULE_SELF_METHODS, Semantic, method_call, method_call_in
from torchlint.finding import Applicability, Severity
from torchlint.analysis.value import MODULE, PARAMETER
from torchlint.rules.base import FixSpec, Rebracket, Replace, Rule, RuleContext

PARAMETER_CLASSES = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
REGISTERING = {"ModuleList", "ModuleDict", "Sequential", "ParameterList", "ParameterDict"}
REGISTERING_METHODS = {"add_module", "register_module", "register_parameter"}


class UnregisteredSubmodules(Rule):
    code = "TL101"
    name = "unregistered-submodules"
    summary = "Submodules or parameters in a plain list/dict are not registered with the module"
    fix_availability = "sometimes"
    triggers = ("__init__",)
    node_types = (cst.Assign,)
    confirmation_module = "tl101"
    severity_docs = """
An **error** when the file builds an optimizer over the parameters of an instance of the class
(`torch.optim.Adam(model.parameters())` with `model = Net()`): the listed submodules are never
trained, so the model trains wrongly; the same when another file of the project directories does
that with the class imported from this one (the message names that file and line). An **error** too when a method
calls the list itself like a module (`self.layers(x)`): it raises `TypeError: 'list' object is
not callable`. A **warning**
otherwise: the harm (not moved by `.to()`, not
saved by `state_dict()`, not trained by an optimizer over `parameters()`) depends on how the
module is used; a network whose layers each keep their own optimizer still trains.
"""
    docs = """
## What it does
Flags, in an `nn.Module.__init__`, a plain Python container of submodules or parameters stored
on `self`: `self.layers = [nn.Linear(...) for _ in range(n)]`, `self.heads = {"a": nn.Linear(...)}`,
`self.blocks = []` filled with `self.blocks.append(Block(...))`, `self.blocks += [...]` or
`self.blocks = self.blocks + [Block(...).to(device)]`, or `self.scales = [nn.Parameter(...)]`.

## Why is this bad?
`nn.Module` registers a submodule only when it is assigned to an attribute directly or held by
`nn.ModuleList` / `nn.ModuleDict` / `nn.Sequential` (parameters: `nn.ParameterList` /
`nn.ParameterDict`). Modules inside a plain list or dict are invisible: `model.parameters()` skips
them, so the optimizer never trains them; `model.to(device)`, `.half()`, `.eval()` do not reach
them; `state_dict()` does not save them. Measured on torch 2.13 by the confirmation case: a model
of three `nn.Linear` layers, two of them in a plain list, reports 2 parameter tensors instead of 6
(and 2 `state_dict()` entries instead of 6).

## Example
```python
class MLP(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.layers = [nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]
```

Use instead:
```python
class MLP(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])
```

## Fix safety
The fix wraps the container in `nn.ModuleList` / `nn.ModuleDict` / `nn.ParameterList` (spelled
with the file's own import of `torch.nn`; `self.blocks = []` becomes `nn.ModuleList()`, a tuple
becomes `nn.ModuleList([...])`; a multi-line container keeps its layout and comments). It is
unsafe: the model gains parameters, so optimizers, checkpoints (`state_dict` keys) and parameter
counts change, and `ModuleDict` keys must be strings. No fix is offered when the file does not
import `torch.nn` or `torch`. Not flagged: lists of numbers, strings or stateless activations
(`[nn.ReLU(), nn.GELU()]`), containers that are later registered (`nn.ModuleList(self.layers)`,
`nn.Sequential(*self.layers)`, `add_module`), and containers of modules passed in from outside
(a plain list is a known way to keep a teacher model out of `parameters()`).

## References
- https://pytorch.org/docs/stable/generated/torch.nn.ModuleList.html
- https://pytorch.org/docs/stable/generated/torch.nn.ModuleDict.html
- https://pytorch.org/docs/stable/generated/torch.nn.ParameterList.html
"""

    def check(self, node: cst.Assign, ctx: RuleContext) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        if not (type(target) is cst.Attribute and type(target.value) is cst.Name
                and target.value.value == "self"):
            return
        value = node.value
        if type(value) not in (cst.List, cst.ListComp, cst.Tuple, cst.Dict, cst.DictComp):
            return
        sem = ctx.semantic
        if not sem.is_module_method(node, "__init__"):
            return
        if _only_own_attributes(value):
            return  # `[self.b1, self.b2]`: each is registered already as an attribute of its own
        attr = target.attr.value
        klass = sem.class_of_method(sem.method_of(node))
        kind, how = _contents(value, attr, klass, sem)
        if kind is None or _registered_elsewhere(attr, node, klass, sem):
            return
        container = "dict" if isinstance(value, (cst.Dict, cst.DictComp)) else "list"
        if kind == "parameter":
            wrapper = "ParameterDict" if container == "dict" else "ParameterList"
            what = "parameters"
        else:
            wrapper = "ModuleDict" if container == "dict" else "ModuleList"
            what = "submodules"
        spelled = devices.torch_nn_spelling(sem, wrapper)
        shown = spelled or f"nn.{wrapper}"
        fix = None
        if spelled is not None:
            fix = FixSpec(f"Wrap in `{shown}`", (_wrap(value, spelled, ctx),), Applicability.UNSAFE)
        optimized = _optimized_instance(sem, klass)
        where = ""
        if optimized is None:
            found = _optimized_in_project(sem, klass)
            if found is not None:
                optimized, where = found
        called = _called_container(sem, klass, attr) if container == "list" and kind != "parameter" else None
        if called is not None:
            ctx.report(
                value,
                f"`self.{attr}` holds {what} in a plain {container}{how}, and `{ctx.short(called, 40)}` calls the "
                f"{container} itself: it raises `TypeError: '{type_name(value)}' object is not callable` — use "
                f"`{devices.torch_nn_spelling(sem, 'Sequential') or 'nn.Sequential'}(...)` (or `{shown}` and a loop "
                f"over it)",
                None,  # ModuleList is not callable either: no fix
                severity=Severity.ERROR,
            )
            return
        trained = ""
        if optimized is not None:
            shown_call = project_uses.quoted(optimized) if where else ctx.short(optimized, 40)
            trained = f" (`{shown_call}`{' at ' + where if where else ''} never trains them)"
        ctx.report(
            value,
            f"`self.{attr}` holds {what} in a plain {container}{how}: they are not registered, so "
            f"`parameters()`, `.to()` and `state_dict()` miss them{trained}"
            f" — use `{shown}`",
            fix,
            # An optimizer over the model's parameters leaves them untrained: it trains wrongly.
            # Otherwise the harm depends on use (moved, saved, or trained through their own optimizer).
            severity=Severity.ERROR if optimized is not None else Severity.WARNING,
        )


def type_name(value: cst.BaseExpression) -> str:
    return "tuple" if isinstance(value, cst.Tuple) else "list"


def _called_container(sem, klass: Optional[cst.ClassDef], attr: str) -> Optional[cst.Call]:
    """A call `self.<attr>(...)` in a method of `klass`: the plain list itself called like a module."""
    if klass is None:
        return None
    for call in sem.index.descendants(klass.body, cst.Call):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == attr and isinstance(func.value, cst.Name) \
                and func.value.value == "self":
            return call
    return None


def _only_own_attributes(value: cst.BaseExpression) -> bool:
    if not isinstance(value, (cst.List, cst.Tuple)) or not value.elements:
        return False
    return all(isinstance(e, cst.Element) and isinstance(e.value, cst.Attribute)
               and isinstance(e.value.value, cst.Name) and e.value.value.value == "self"
               for e in value.elements)


def _is_empty(value: cst.BaseExpression) -> bool:
    return isinstance(value, (cst.List, cst.Dict)) and not value.elements


def _wrap(value: cst.BaseExpression, spelled: str, ctx: RuleContext) -> Union[Replace, Rebracket]:
    """The edit that puts the container in `spelled(...)`, keeping its layout and comments; a
    tuple becomes a list (`nn.ModuleList((a, b))` would work too, but reads oddly)."""
    if _is_empty(value):
        return Replace(value, f"{spelled}()")
    if not isinstance(value, cst.Tuple):
        return Replace(value, f"{spelled}({ctx.code(value)})")
    if value.lpar:  # the tuple's own parentheses are the innermost pair
        return Rebracket(value.lpar[-1], value.rpar[0], f"{spelled}([", "])")
    return Replace(value, f"{spelled}([{ctx.code(value)}])")


def _kind(expr: cst.BaseExpression, sem: Semantic) -> Optional[str]:
    """"module" for a stateful module built for this container, "parameter" for an
    `nn.Parameter(...)` built for it, else None (modules registered elsewhere, such as
    `self.fc`, are fine in a plain list)."""
    value = sem.values.of(expr)
    site = value.site
    if type(site) is not cst.Call or _registered_as_attribute(site, sem):
        return None
    if value.kind == PARAMETER and sem.is_torch(site, *PARAMETER_CLASSES):
        return "parameter"
    if value.kind == MODULE and value.module is not None and not value.module.stateless:
        return "module"
    return None


def _registered_as_attribute(site: cst.Call, sem: Semantic) -> bool:
    """`site` is assigned to a module attribute as it is built (`self.fc = nn.Linear(...)`)."""
    node = site
    parent = sem.parent(node)
    while method_call_in(parent, MODULE_SELF_METHODS) or (isinstance(parent, cst.Attribute) and parent.value is node):
        node, parent = parent, sem.parent(parent)
    if isinstance(parent, cst.Assign):
        return any(isinstance(t.target, cst.Attribute) for t in parent.targets)
    return False


def _elements(value: cst.BaseExpression) -> Iterable[cst.BaseExpression]:
    if isinstance(value, (cst.List, cst.Tuple)):
        for element in value.elements:
            if isinstance(element, cst.Element):
                yield element.value
    elif isinstance(value, cst.ListComp):
        yield value.elt
    elif isinstance(value, cst.Dict):
        for element in value.elements:
            if isinstance(element, cst.DictElement):
                yield element.value
    elif isinstance(value, cst.DictComp):
        yield value.value


def _contents(value: cst.BaseExpression, attr: str, klass: Optional[cst.ClassDef],
              sem: Semantic) -> Tuple[Optional[str], str]:
    kinds = {_kind(e, sem) for e in _elements(value)}
    for kind in ("module", "parameter"):
        if kind in kinds:
            return kind, ""
    if not _is_empty(value) or klass is None:
        return None, ""
    # `self.blocks = []` filled later in __init__: append/extend/insert/item assignment
    method = sem.method_of(value)
    for call in sem.index.descendants(method, cst.Call):
        if not method_call(call, "append", "insert", "extend") or dotted_name(call.func.value) != f"self.{attr}":
            continue
        if not call.args:
            continue
        added = call.args[-1].value
        items = list(_elements(added)) if call.func.attr.value == "extend" else [added]
        kind = _first_kind(items, sem)
        if kind is not None:
            return kind, f" (filled by `self.{attr}.{call.func.attr.value}(...)`)"
    for assign in sem.index.descendants(method, cst.Assign):
        for t in assign.targets:
            if isinstance(t.target, cst.Subscript) and dotted_name(t.target.value) == f"self.{attr}":
                kind = _kind(assign.value, sem)
                if kind is not None:
                    return kind, f" (filled by `self.{attr}[...] = ...`)"
            if dotted_name(t.target) == f"self.{attr}" and _is_concatenation(assign.value, attr):
                kind = _first_kind(_elements(assign.value.right), sem)
                if kind is not None:
                    return kind, f" (filled by `self.{attr} = self.{attr} + [...]`)"
    for augmented in sem.index.descendants(method, cst.AugAssign):
        if dotted_name(augmented.target) == f"self.{attr}" and isinstance(augmented.operator, cst.AddAssign):
            kind = _first_kind(_elements(augmented.value), sem)
            if kind is not None:
                return kind, f" (filled by `self.{attr} += [...]`)"
    return None, ""


def _first_kind(items: Iterable[cst.BaseExpression], sem: Semantic) -> Optional[str]:
    """The kind (`_kind`) of the first item that is a module or a parameter."""
    for item in items:
        kind = _kind(item, sem)
        if kind is not None:
            return kind
    return None


def _is_concatenation(value: cst.BaseExpression, attr: str) -> bool:
    """`self.<attr> + [...]`: the same plain list, grown."""
    return isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add) \
        and dotted_name(value.left) == f"self.{attr}" and isinstance(value.right, (cst.List, cst.ListComp))


def _registered_elsewhere(attr: str, node: cst.Assign, klass: Optional[cst.ClassDef], sem: Semantic) -> bool:
    """The class registers the container's content another way: another assignment of
    `self.<attr>` that is not a plain container, `nn.ModuleList(self.<attr>)`,
    `nn.Sequential(*self.<attr>)`, or any `add_module`/`register_module` call."""
    if klass is None:
        return True
    spelled = f"self.{attr}"
    for assign in sem.index.descendants(klass, cst.Assign):
        if assign is node:
            continue
        for t in assign.targets:
            if dotted_name(t.target) == spelled and not isinstance(
                    assign.value, (cst.List, cst.ListComp, cst.Tuple, cst.Dict, cst.DictComp)) \
                    and not _is_concatenation(assign.value, attr):
                return True
    for call in sem.index.descendants(klass, cst.Call):
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if name in REGISTERING_METHODS:
            return True
        if name == "setattr" and call.args and dotted_name(call.args[0].value) == "self":
            return True  # `setattr(self, f"layer{i}", layer)` registers the list's modules
        if name in REGISTERING:
            for arg in call.args:
                if dotted_name(arg.value) == spelled:
                    return True
    return False


__all__ = ["UnregisteredSubmodules"]


def _optimized_in_project(sem: Semantic, klass) -> Optional[tuple]:
    """(the optimizer call, "train.py:12") for an optimizer of another project file built over the
    parameters of an instance of `klass` (`torch.optim.Adam(net.parameters())`, `net = Net()`)."""
    def match(other, call, is_instance) -> bool:
        qualified = other.qualified_name(call.func)
        if qualified is None or not api.is_optimizer_class(qualified):
            return False
        return any(method_call(inner, "parameters", "named_parameters") and is_instance(inner.func.value)
                   for inner in other.index.descendants(call, cst.Call))
    return project_uses.instance_call(sem, klass, ("optim", "parameters"), match)


def _optimized_instance(sem: Semantic, klass) -> Optional[cst.Call]:
    """An optimizer of this file built over the parameters of an instance of `klass`
    (`torch.optim.Adam(model.parameters())` where `model = Net()`), or None."""
    if klass is None:
        return None
    for call in sem.index.nodes(cst.Call):
        name = sem.qualified_name(call.func)
        if name is None or not api.is_optimizer_class(name):
            continue
        for inner in sem.index.descendants(call, cst.Call):
            if method_call(inner, "parameters", "named_parameters"):
                owner = sem.values.of(inner.func.value)
                if owner.kind == MODULE and owner.module is not None and owner.module.klass is klass:
                    return call
    return None
