"""TL125: an optimizer with state (Adam, momentum SGD, ...) built anew for every step: inside
the loop that steps it, or by a `@property` read at each step."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, InsertBefore, RemoveLines, Rule, RuleContext

# Measured on torch 2.13: after one step these keep per-parameter state (Adam: step, exp_avg,
# exp_avg_sq; SGD with momentum: momentum_buffer); plain SGD keeps none, so rebuilding it loses
# nothing and is not flagged.
_STATEFUL = frozenset("Adam AdamW Adamax NAdam RAdam RMSprop Adagrad Adadelta ASGD Rprop SparseAdam LBFGS".split())
_LOOPS = (cst.For, cst.While)


class OptimizerRebuiltEachStep(Rule):
    code = "TL125"
    name = "optimizer-rebuilt-each-step"
    summary = "An optimizer with state (Adam, momentum SGD) built anew for every step: its moments reset, every step is a first step"
    fix_availability = "sometimes"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: the optimizer's state (Adam's moment estimates, the momentum buffer) starts from
zero at every step, so each update is a first step: Adam's bias-corrected first step moves every
weight by about `lr` in the sign of its gradient, whatever the gradient's size.
"""
    triggers = ("optim",)
    node_types = (cst.Call,)
    confirmation_module = "tl125"
    docs = """
## What it does
Flags the construction of a `torch.optim` optimizer that keeps state between steps (`Adam`,
`AdamW`, `RMSprop`, `Adagrad`, `SGD(..., momentum=...)`, ...) when

- it is built inside a loop and its `.step()` is called in the same loop, at the same depth (the
  batch loop builds a new optimizer for each batch), or
- it is what a `@property` returns, and the program calls `.step()` on that property
  (`self.optimizer.step()` builds a new optimizer at each access), or
- it is what a function returns, and a loop calls that function and steps its result in the
  same loop (`opt = make_optimizer(model)` then `opt.step()`; the call is reported).

Not flagged: plain `SGD` without momentum (it keeps no state), an optimizer rebuilt once per
epoch around an inner batch loop (a deliberate reset some schedules use), `functools.cached_property`,
and factories whose result is stored once.

## Why is this bad?
An optimizer's state lives in the optimizer object. A new one starts with empty state: measured
on torch 2.13, an Adam built inside the batch loop has `state[p]['step'] == 1` after 5 batches
(5 with the optimizer built once), and its updates are all first updates, which have size about
`lr` whatever the gradient (sign-SGD). Momentum SGD loses its momentum buffer. Training is slower,
noisier or diverges, with no error.

## Example
```python
for x, y in loader:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    optimizer.zero_grad()
    loss_fn(model(x), y).backward()
    optimizer.step()
```

Use instead:
```python
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for x, y in loader:
    optimizer.zero_grad()
    loss_fn(model(x), y).backward()
    optimizer.step()
```

## Fix safety
For an optimizer built (or a factory called) by a statement of its own directly in the loop's
body, the unsafe fix moves that statement to just before the loop, when nothing it reads is
bound or changed in the loop (no loop variable, no name assigned there, no attribute or item of
those names assigned, no `append`/`add_module`/... on them) and nothing else in the loop assigns
the optimizer's name. It is unsafe because it changes what the program does, as intended: the
optimizer now keeps its state across steps, a learning rate the loop would have re-read each
iteration is read once, and the optimizer is built even when the loop runs no iteration. No fix
when the construction sits in a branch of the loop or reads anything the loop changes, and none
for the property (storing its optimizer in `__init__` is the author's edit).

## References
- https://pytorch.org/docs/stable/optim.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        name = sem.qualified_name(node.func)
        if name is None or not api.is_optimizer_class(name) or not _stateful(name, node):
            return
        member = name.rsplit(".", 1)[-1]
        statement = sem.statement_of(node)
        function = sem.function_of(node)
        if function is not None and _is_property(function) and isinstance(statement, cst.Return) \
                and statement.value is node:
            uses = _property_steps(sem, function.name.value)
            if uses:
                ctx.report(node, f"the property `{function.name.value}` builds a new {member} at every access, and "
                                 f"`{ctx.short(uses[0], 40)}` steps a fresh one: its state starts empty at every step, "
                                 f"so each update is a first step; build the optimizer once (in `__init__`) and "
                                 f"return it", severity=Severity.ERROR)
            return
        if function is not None and isinstance(statement, cst.Return) and statement.value is node \
                and sem.class_of_method(function) is None:
            self._factory(function, member, ctx)
            return
        loop = _innermost_loop(sem, node)
        if loop is None or not isinstance(statement, cst.Assign) or statement.value is not node \
                or len(statement.targets) != 1:
            return
        target = ctx.code(statement.targets[0].target)
        for call in sem.index.descendants(loop.body, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "step" and ctx.code(func.value) == target \
                    and _innermost_loop(sem, call) is loop:
                ctx.report(node, f"`{target} = {ctx.short(node, 40)}` builds a new {member} in every iteration of "
                                 f"the loop that calls `{target}.step()`: its state (moment estimates, momentum) "
                                 f"starts empty at every step, so each update is a first step; build it once "
                                 f"before the loop", _hoist(sem, statement, loop, ctx), severity=Severity.ERROR)
                return


    def _factory(self, function: cst.FunctionDef, member: str, ctx: RuleContext) -> None:
        """`def make_optimizer(m): return torch.optim.Adam(...)` called in the loop that steps what
        it returns (`opt = make_optimizer(model)` then `opt.step()`, or `make_optimizer(model).step()`)."""
        sem = ctx.semantic
        name = function.name.value
        for call in sem.index.nodes(cst.Call):
            if not (isinstance(call.func, cst.Name) and call.func.value == name):
                continue
            parent = sem.parent(call)
            if isinstance(parent, cst.Attribute) and parent.value is call and parent.attr.value == "step" \
                    and _innermost_loop(sem, call) is not None:
                ctx.report(call, f"`{ctx.short(sem.parent(parent), 40)}` steps a new {member} that `{name}` builds at "
                                 f"every call, inside a loop: its state starts empty at every step, so each update is "
                                 f"a first step; build the optimizer once before the loop", severity=Severity.ERROR)
                continue
            statement = sem.statement_of(call)
            loop = _innermost_loop(sem, call)
            if loop is None or not isinstance(statement, cst.Assign) or statement.value is not call \
                    or len(statement.targets) != 1:
                continue
            target = ctx.code(statement.targets[0].target)
            for step in sem.index.descendants(loop.body, cst.Call):
                func = step.func
                if isinstance(func, cst.Attribute) and func.attr.value == "step" and ctx.code(func.value) == target \
                        and _innermost_loop(sem, step) is loop:
                    ctx.report(call, f"`{target} = {ctx.short(call, 40)}` gets a new {member} from `{name}` in every "
                                     f"iteration of the loop that calls `{target}.step()`: its state starts empty at "
                                     f"every step, so each update is a first step; build it once before the loop",
                               _hoist(sem, statement, loop, ctx), severity=Severity.ERROR)
                    break


# Methods that change the object they are called on (a list of parameter groups, a module).
_MUTATING = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "add_module",
                       "register_module", "register_parameter", "add_param_group", "setdefault", "__setitem__"})


def _hoist(sem, statement: cst.Assign, loop: cst.CSTNode, ctx: RuleContext) -> Optional[FixSpec]:
    """Move `opt = torch.optim.Adam(...)` from the top level of the loop's body to just before
    the loop, when what it reads is the same in every iteration (see the docs' Fix safety)."""
    line = sem.parent(statement)
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or sem.parent(line) is not loop.body \
            or not isinstance(loop.body, cst.IndentedBlock) or len(loop.body.body) < 2:
        return None
    if isinstance(loop, cst.While) or getattr(loop, "asynchronous", None) is not None:
        return None  # a while loop's test may be what changes the arguments
    target = statement.targets[0].target
    root = target
    while isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name) or (target is not root and _bound_outside(sem, loop, root.value, statement)):
        return None
    if _bound_outside(sem, loop, _spelled(ctx, target), statement, spelled_target=True):
        return None
    index = sem.index
    value = statement.value
    read = {n.value for n in index.descendants(value, cst.Name)}
    for name in read:
        if _bound_outside(sem, loop, name, value):
            return None
    for node in index.descendants(loop, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.Call)):
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _MUTATING and _root_name(func.value) in read:
                return None
            continue
        changed = node.target
        if isinstance(changed, (cst.Attribute, cst.Subscript)) and _root_name(changed) in read:
            return None
    code = ctx.code(statement)
    comment = line.trailing_whitespace.comment
    if comment is not None:
        code += "  " + comment.value
    return FixSpec("Move the optimizer's construction before the loop",
                   (RemoveLines(line), InsertBefore(loop, code)), Applicability.UNSAFE)


def _spelled(ctx: RuleContext, target: cst.BaseExpression) -> str:
    return ctx.code(target)


def _root_name(expr: cst.BaseExpression) -> Optional[str]:
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _bound_outside(sem, loop: cst.CSTNode, name: str, inside: cst.CSTNode, spelled_target: bool = False) -> bool:
    """Whether something in `loop` (its target included), other than what lies in `inside`, binds
    `name` (or, with `spelled_target`, assigns the target spelled `name`, `self.opt`)."""
    index = sem.index
    if spelled_target:
        for node in index.descendants(loop, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
            if index.contains(inside, node):
                continue
            if sem.source(node.target) == name:
                return True
        if "." in name:
            return False
    for each in index.names_under(loop, name):
        if index.contains(inside, each):
            continue
        if sem.values.flow.definition_of_store(each) is not None:
            return True
        parent = index.parent.get(each)
        if type(parent) in (cst.FunctionDef, cst.ClassDef) and parent.name is each:
            return True
        if type(parent) in (cst.ImportAlias, cst.AsName, cst.NameItem):
            return True
    return False


def _stateful(name: str, call: cst.Call) -> bool:
    member = name.rsplit(".", 1)[-1]
    if member in _STATEFUL:
        return True
    if member != "SGD":
        return False
    momentum = None
    for argument in call.args:
        if argument.keyword is not None and argument.keyword.value == "momentum":
            momentum = argument.value
    positional = [a for a in call.args if a.keyword is None]
    if momentum is None and len(positional) >= 3 and not any(a.star for a in positional[:3]):
        momentum = positional[2].value
    if momentum is None:
        return False
    if isinstance(momentum, (cst.Integer, cst.Float)):
        return float(momentum.value) != 0.0
    return False  # a variable: maybe 0


def _innermost_loop(sem, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
        if isinstance(ancestor, _LOOPS) and sem.index.contains(ancestor.body, node):
            return ancestor
    return None


def _is_property(function: cst.FunctionDef) -> bool:
    for decorator in function.decorators:
        expr = decorator.decorator
        if isinstance(expr, cst.Name) and expr.value == "property":
            return True
    return False


def _property_steps(sem, name: str) -> list:
    """The calls `<x>.<name>.step()` in the file."""
    found = []
    for attribute in sem.index.attributes_named(("step",)):
        receiver = attribute.value
        call = sem.parent(attribute)
        if isinstance(receiver, cst.Attribute) and receiver.attr.value == name and isinstance(call, cst.Call) \
                and call.func is attribute:
            found.append(call)
    return found


__all__ = ["OptimizerRebuiltEachStep"]
