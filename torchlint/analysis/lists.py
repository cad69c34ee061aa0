"""What a list built by appending holds: `losses = []` then `losses.append(loss)`. The value model
does not follow mutation; this answers, for a name read somewhere, the expressions appended to
the one empty list it certainly holds there, when nothing else changes that list."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

_OTHER_MUTATIONS = frozenset({"extend", "insert", "__setitem__", "__iadd__"})


def appended(sem, name: cst.Name) -> Optional[List[cst.BaseExpression]]:
    """The expressions appended to the list `name` holds where it is read: `name` has one reaching
    definition `name = []` in its scope, its only changes there are `name.append(x)` calls (no
    `extend`, `insert`, item assignment, `+=`, and it is never passed to another call or
    returned before this read), and at least one of them comes before `name` in the file. None
    when any of that is not certain."""
    definitions = sem.values.flow.reaching(name)
    if not definitions or len(definitions) != 1:
        return None
    definition = definitions[0]
    if definition.kind != "assign" or definition.path != () or not isinstance(definition.value, cst.List) \
            or definition.value.elements:
        return None
    scope = sem.scopes.scope_of(name)
    if sem.scopes.scope_of(definition.value) is not scope:
        return None
    index = sem.index
    position = index.number(name)
    found: List[cst.BaseExpression] = []
    before = False
    for use in index.names_spelled(name.value):
        if use is name or sem.scopes.scope_of(use) is not scope:
            continue
        parent = sem.parent(use)
        if isinstance(parent, cst.AssignTarget):
            continue  # the definition itself (or a later rebinding, which `reaching` already judged)
        if isinstance(parent, cst.Attribute) and parent.value is use:
            call = sem.parent(parent)
            method = parent.attr.value
            if isinstance(call, cst.Call) and call.func is parent:
                if method == "append" and len(call.args) == 1 and call.args[0].keyword is None \
                        and not call.args[0].star:
                    found.append(call.args[0].value)
                    before = before or index.number(call) < position
                    continue
                if method in _OTHER_MUTATIONS or method in ("clear", "pop", "remove", "sort", "reverse"):
                    return None
            continue
        if isinstance(parent, cst.AugAssign) or isinstance(parent, cst.Subscript) and isinstance(
                sem.parent(sem.parent(parent)), cst.AssignTarget):
            return None
        if isinstance(parent, cst.Arg) and index.number(use) < position and not _reads_only(sem, sem.parent(parent)):
            return None  # handed to a function that may change it before this read
    if not found or not before:
        return None
    return found


_READERS = frozenset({"print", "len", "sum", "str", "repr", "float", "max", "min", "sorted", "enumerate", "zip",
                      "list", "tuple", "format"})


def _reads_only(sem, call: cst.CSTNode) -> bool:
    """A call that only reads its arguments: builtins that do, NumPy and matplotlib functions."""
    if not isinstance(call, cst.Call):
        return False
    if isinstance(call.func, cst.Name) and call.func.value in _READERS and not sem.scopes.lookup(call.func.value, call.func):
        return True
    qualified = sem.qualified_name(call.func)
    return qualified is not None and qualified.split(".")[0] in ("numpy", "matplotlib")
