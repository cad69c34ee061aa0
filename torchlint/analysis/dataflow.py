"""Local dataflow: which assignment reaches a use of a name inside one function.

Only definitions that certainly reach are returned: a straight-line assignment earlier in the same
block or in an enclosing block (a later one kills it). An assignment hidden in a branch, a loop
body that may run again, or a try makes the answer unknown (None): rules stay silent then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis.index import Index, iter_children

_FUNCTION_LIKE = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


@dataclass(frozen=True)
class Definition:
    kind: str  # "assign" (value set), "param", "for", "with", "augassign", "other"
    statement: cst.CSTNode
    value: Optional[cst.BaseExpression] = None  # the assigned expression for "assign"
    target: Optional[cst.CSTNode] = None  # the bound node (Param, For, WithItem)


def statement_of(index: Index, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The statement (small statement or compound statement) that contains `node`."""
    current: Optional[cst.CSTNode] = node
    while current is not None:
        if isinstance(current, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return current
        current = index.parent.get(current)
    return None


def block_position(index: Index, statement: cst.CSTNode) -> Optional[Tuple[Sequence[cst.CSTNode], int]]:
    """The statement list holding `statement` (small statements count with their line) and its
    position in it. Small statements on one line share the line's slot, ordered within it."""
    line = index.parent.get(statement) if isinstance(statement, cst.BaseSmallStatement) else None
    holder = line if isinstance(line, cst.SimpleStatementLine) else statement
    block = index.parent.get(holder)
    if block is None or not hasattr(block, "body") or not isinstance(block.body, (list, tuple)):
        return None
    for position, item in enumerate(block.body):
        if item is holder:
            return block.body, position
    return None


def _names_in_target(target: cst.CSTNode):
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _names_in_target(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _names_in_target(target.value)


def _small_defines(small: cst.CSTNode, name: str) -> Optional[Definition]:
    """The definition `small` makes of `name`, if it is a direct binding statement."""
    if isinstance(small, cst.Assign):
        for target in small.targets:
            if name in _names_in_target(target.target):
                single = isinstance(target.target, cst.Name)
                return Definition("assign" if single else "other", small, small.value if single else None)
        return None
    if isinstance(small, cst.AnnAssign):
        if isinstance(small.target, cst.Name) and small.target.value == name:
            if small.value is None:
                return None  # a bare annotation binds nothing
            return Definition("assign", small, small.value)
        return None
    if isinstance(small, cst.AugAssign):
        if isinstance(small.target, cst.Name) and small.target.value == name:
            return Definition("augassign", small)
        return None
    if isinstance(small, (cst.Import, cst.ImportFrom, cst.Del, cst.Global, cst.Nonlocal)):
        if name in _bound_anywhere(small, name):
            return Definition("other", small)
    return None


def _bound_anywhere(node: cst.CSTNode, name: str) -> set:
    """Names bound anywhere inside `node` that equal `name` (empty set if none)."""
    found = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name) and current.value == name:
            found.add(name)
            break
        if isinstance(current, _FUNCTION_LIKE) and current is not node:
            if current.name.value == name:
                found.add(name)
                break
            continue  # a nested scope binds its own names
        stack.extend(iter_children(current))
    return found


def _mentions_binding(statement: cst.CSTNode, name: str, index: Optional[Index] = None) -> bool:
    """Whether `statement` might rebind `name` (conservative: any Name of that spelling in a store
    position counts, and any nested def/class of that name)."""
    if index is not None and not index.mentions(statement, name):
        return False  # every binding form spells the name as a Name node
    stack = [statement]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.FunctionDef, cst.ClassDef)):
            if current.name.value == name:
                return True
            if current is not statement:
                continue
        if isinstance(current, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = (
                [t.target for t in current.targets] if isinstance(current, cst.Assign) else [current.target]
            )
            if any(name in _names_in_target(t) for t in targets):
                return True
        elif isinstance(current, (cst.For, cst.CompFor)):
            if name in _names_in_target(current.target):
                return True
        elif isinstance(current, cst.AsName):
            if isinstance(current.name, cst.Name) and current.name.value == name:
                return True
            if name in _names_in_target(current.name):
                return True
        elif isinstance(current, cst.NamedExpr):
            if isinstance(current.target, cst.Name) and current.target.value == name:
                return True
        elif isinstance(current, (cst.Import, cst.ImportFrom, cst.Del, cst.Global, cst.Nonlocal)):
            if _bound_anywhere(current, name):
                return True
        stack.extend(iter_children(current))
    return False


def _last_definition_in(statement: cst.CSTNode, name: str, index: Optional[Index] = None):
    """For a statement before the use: its definition of `name`, "unknown" when it may rebind
    the name in a way we cannot follow, or None when it does not touch the name."""
    if index is not None and not index.mentions(statement, name):
        return None
    if isinstance(statement, cst.SimpleStatementLine):
        result = None
        for small in statement.body:
            found = _small_defines(small, name)
            if found is not None:
                result = found
            elif _mentions_binding(small, name, index):
                result = "unknown"
        return result
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return Definition("other", statement) if statement.name.value == name else None
    if isinstance(statement, cst.With):
        for item in statement.items:
            if item.asname is not None and name in _names_in_target(item.asname.name):
                inner = _last_definition_in_block(statement.body, name, index)
                return inner if inner is not None else Definition("with", statement, target=item)
        # The body of a with block always runs (barring an exception, which leaves the function).
        return _last_definition_in_block(statement.body, name, index)
    if _mentions_binding(statement, name, index):
        return "unknown"
    return None


def _last_definition_in_block(block: cst.BaseSuite, name: str, index: Optional[Index] = None):
    body = block.body if isinstance(block.body, (list, tuple)) else ()
    for statement in reversed(body):
        found = _last_definition_in(statement, name, index)
        if found is not None:
            return found
    return None


def reaching_definition(index: Index, use: cst.Name) -> Optional[Definition]:
    """The definition of `use.value` that certainly reaches `use`, or None when unknown."""
    name = use.value
    statement = statement_of(index, use)
    if statement is None:
        return None
    current = statement
    # Small statements earlier on the same line come first.
    line = index.parent.get(current)
    if isinstance(current, cst.BaseSmallStatement) and isinstance(line, cst.SimpleStatementLine):
        earlier = []
        for small in line.body:
            if small is current:
                break
            earlier.append(small)
        for small in reversed(earlier):
            found = _small_defines(small, name)
            if found is not None:
                return found
            if _mentions_binding(small, name, index):
                return None
        current = line
    while True:
        parent_block = index.parent.get(current)
        owner = index.parent.get(parent_block) if parent_block is not None else None
        body = getattr(parent_block, "body", None)
        if isinstance(body, (list, tuple)):
            position = next((i for i, item in enumerate(body) if item is current), None)
            if position is not None:
                for earlier in reversed(body[:position]):
                    found = _last_definition_in(earlier, name, index)
                    if found == "unknown":
                        return None
                    if found is not None:
                        return found
        if owner is None or isinstance(parent_block, cst.Module):
            return None
        if isinstance(owner, (cst.FunctionDef, cst.Lambda)):
            params = owner.params
            for param in (
                list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
            ):
                if param.name.value == name:
                    return Definition("param", param, target=param)
            for star in (params.star_arg, params.star_kwarg):
                if isinstance(star, cst.Param) and star.name.value == name:
                    return Definition("other", star, target=star)
            return None
        if isinstance(owner, cst.ClassDef):
            return None
        if isinstance(owner, (cst.For, cst.While)):
            # The loop body may run again: a binding anywhere in the loop reaches by the back edge.
            if _mentions_binding(owner.body, name, index):
                return None
            if isinstance(owner, cst.For) and parent_block is owner.body:
                if name in _names_in_target(owner.target):
                    return Definition("for", owner, target=owner)
            if isinstance(owner, cst.For) and _mentions_binding(owner.target, name, index):
                return None
        if isinstance(owner, (cst.Try, cst.TryStar, cst.ExceptHandler)):
            pass  # earlier statements of a try block still dominate what follows in it
        # Walk out to the compound statement holding this block (If/Else/For/While/With/Try...).
        current = owner
        while current is not None and not isinstance(current, cst.BaseCompoundStatement):
            current = index.parent.get(current)
        if current is None:
            return None
        if isinstance(current, cst.With):
            for item in current.items:
                if item.asname is not None and name in _names_in_target(item.asname.name):
                    return Definition("with", current, target=item)
