"""TL128: an nn.Module subclass without a `forward` method that is called (or whose `forward` is
nested inside another method): calling it raises NotImplementedError."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext

_TORCH_MODULE = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})


class ModuleWithoutForward(Rule):
    code = "TL128"
    name = "module-without-forward"
    summary = "An `nn.Module` subclass without `forward` (or with `forward` nested inside another method) is called: NotImplementedError"
    fix_availability = "none"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: calling the module raises `NotImplementedError: Module [Net] is missing the
required "forward" function`.
"""
    triggers = ("Module",)
    node_types = (cst.ClassDef,)
    confirmation_module = "tl128"
    docs = """
## What it does
Flags a class that subclasses `nn.Module` directly (or through classes of the same file that do
not define `forward` either) and defines no `forward` method of its own, when

- a `def forward` is nested inside another of its methods (an indentation slip puts it inside
  `__init__`): the nested function is reported;
- or the file calls an instance of it (`net = Net(); net(x)`, `self.block = Block()` then
  `self.block(x)`, `Net()(x)`): the class is reported.

Not flagged: classes with a base the analysis cannot see (a library class may define
`forward`), classes that define `__call__`, classes that assign `self.forward = ...`, and base
classes that are never called themselves.

## Why is this bad?
`nn.Module.__call__` runs `self.forward`, and `nn.Module`'s own `forward` raises. Measured on
torch 2.13: calling such a module raises `NotImplementedError: Module [Net] is missing the
required "forward" function`. A `forward` nested inside `__init__` is only a local function of
`__init__`, never a method.

## Example
```python
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x)
```

Use instead:
```python
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
```

## Fix safety
No fix: where the method belongs is the author's choice.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.forward
"""

    def check(self, node: cst.ClassDef, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if not sem.is_module_class(node) or not _certainly_without_forward(sem, node, set()):
            return
        nested = _nested_forward(sem, node)
        if nested is not None:
            method = sem.function_of(nested)
            ctx.report(nested, f"`forward` is defined inside `{method.name.value}`, not in the class body: "
                               f"`{node.name.value}` has no `forward` method, so calling it raises "
                               f"`NotImplementedError`; dedent it to the class level", severity=Severity.ERROR)
            return
        call = _called_instance(sem, node)
        if call is not None:
            ctx.report(node.name, f"`{node.name.value}` defines no `forward`, and `{ctx.short(call, 40)}` calls an "
                                  f"instance: `nn.Module.__call__` raises `NotImplementedError: Module "
                                  f"[{node.name.value}] is missing the required \"forward\" function`; define "
                                  f"`forward(self, ...)`", severity=Severity.ERROR)


def _certainly_without_forward(sem, klass: cst.ClassDef, seen: set) -> bool:
    if id(klass) in seen:
        return False
    seen.add(id(klass))
    for statement in klass.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value in ("forward", "__call__", "__getattr__"):
            return False
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)):
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    if any(isinstance(t, cst.Name) and t.value in ("forward", "__call__") for t in targets):
                        return False
    if klass.decorators:
        return False
    for base in klass.bases:
        if base.keyword is not None:
            return False  # a metaclass
        qualified = sem.qualified_name(base.value)
        if qualified in _TORCH_MODULE:
            continue
        local = _local_class(sem, base.value)
        if local is None or not _certainly_without_forward(sem, local, seen):
            return False
    # `self.forward = ...` anywhere in the class
    for attribute in sem.index.descendants(klass.body, cst.Attribute):
        if attribute.attr.value == "forward" and isinstance(sem.parent(attribute), cst.AssignTarget):
            return False
    return bool(klass.bases)


def _local_class(sem, expr: cst.BaseExpression) -> Optional[cst.ClassDef]:
    if not isinstance(expr, cst.Name):
        return None
    found = [c for c in sem.index.nodes(cst.ClassDef) if c.name.value == expr.value]
    return found[0] if len(found) == 1 else None


def _nested_forward(sem, klass: cst.ClassDef) -> Optional[cst.FunctionDef]:
    for statement in klass.body.body:
        if not isinstance(statement, cst.FunctionDef):
            continue
        for inner in sem.index.descendants(statement.body, cst.FunctionDef):
            if inner.name.value == "forward" and sem.function_of(inner) is statement:
                return inner
    return None


def _called_instance(sem, klass: cst.ClassDef) -> Optional[cst.Call]:
    """A call of an instance of `klass`: `Net()(x)`, `net = Net()` then `net(x)` (same scope),
    `self.block = Block()` then `self.block(x)` (same class)."""
    name = klass.name.value
    for construction in sem.index.nodes(cst.Call):
        if not (isinstance(construction.func, cst.Name) and construction.func.value == name
                and _local_class(sem, construction.func) is klass):
            continue
        parent = sem.parent(construction)
        if isinstance(parent, cst.Call) and parent.func is construction:
            return parent
        statement = sem.statement_of(construction)
        if not (isinstance(statement, cst.Assign) and statement.value is construction and len(statement.targets) == 1):
            continue
        target = statement.targets[0].target
        spelled = sem.source(target)
        if isinstance(target, cst.Name):
            scope = sem.scopes.scope_of(construction)
            candidates: List[cst.Call] = [c for c in (sem.index.descendants(scope, cst.Call)
                                                      if not isinstance(scope, cst.Module) else sem.index.nodes(cst.Call))
                                          if isinstance(c.func, cst.Name) and c.func.value == target.value
                                          and sem.scopes.scope_of(c) is scope]
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            owner = sem.module_class_of(construction)
            if owner is None:
                continue
            candidates = [c for c in sem.index.descendants(owner, cst.Call)
                          if isinstance(c.func, cst.Attribute) and sem.source(c.func) == spelled]
        else:
            continue
        if candidates and _single_assignment(sem, spelled, construction):
            return candidates[0]
    return None


def _single_assignment(sem, spelled: str, construction: cst.Call) -> bool:
    """No other assignment to the same spelling in the file (`net = Net()` then `net = Other()`)."""
    count = 0
    for assign in sem.index.nodes(cst.Assign):
        for target in assign.targets:
            if sem.source(target.target) == spelled:
                count += 1
    return count == 1


__all__ = ["ModuleWithoutForward"]
