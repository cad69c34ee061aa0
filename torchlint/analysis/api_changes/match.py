"""Which entry of the API-change table (`removed.py`) a node of the file uses: resolution through
the semantic model, for every import style, shared by TL209 (removed: raises) and TL210
(deprecated: warns, or deprecated in the documentation only).

A use is a name or attribute whose qualified name is an entry's (`torch.solve`, `solve` after
`from torch import solve`, `th.solve` after `import torch as th`), a module import (`import
torch._six`, `from torch._six import string_classes`, `from torch import _six`), an import of an
entry by name (`from torch import solve`), or the DataLoader iterator's `.next()` on a receiver
the value model knows is `iter(<DataLoader>)`. Nothing here imports torch or a rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.api_changes import FUNCTION, METHOD, MODULE, RAISES, WARNS, ApiChange, removed
from torchlint.analysis.scopes import dotted_name

_REMOVAL_ANNOUNCED = re.compile(r"will be (?:removed|deleted)|this context manager will be removed")

FUNCTIONS: Dict[str, ApiChange] = {c.api: c for c in removed.CHANGES if c.kind == FUNCTION}
MODULES: Dict[str, ApiChange] = {c.api: c for c in removed.CHANGES if c.kind == MODULE}
METHODS: Dict[str, ApiChange] = {c.api.rsplit(".", 1)[-1]: c for c in removed.CHANGES if c.kind == METHOD}
# The last part of every name: a node spelling none of them needs no resolving.
LAST_NAMES: FrozenSet[str] = frozenset(api.rsplit(".", 1)[-1] for api in (*FUNCTIONS, *MODULES))
_MEMBER_NAMES: Tuple[str, ...] = tuple(sorted(LAST_NAMES | set(METHODS)))


def triggers(outcomes: Tuple[str, ...]) -> Tuple[str, ...]:
    """The strings one of which a file must contain for an entry of `outcomes` to be found."""
    names = {c.api.rsplit(".", 1)[-1] for c in removed.CHANGES if c.outcome in outcomes}
    return tuple(sorted(names))


def announces_removal(change: ApiChange) -> bool:
    """The current release's warning says the API will go (TL210's WARNING), measured text."""
    return change.outcome == WARNS and bool(_REMOVAL_ANNOUNCED.search(change.error))


def reference_fails(change: ApiChange) -> bool:
    """A mere reference (not only a call) has the outcome: the name is gone (AttributeError,
    ImportError) or the entry is a class whose every use counts (`on_reference`)."""
    return change.on_reference or change.kind == MODULE


# A test that picks code by the installed version or by what exists (`if _TORCH_GREATER_EQUAL_2_4`,
# `if hasattr(torch, "amp")`, `torch.__version__ >= ...`): both branches are deliberate.
_VERSION_TEST = re.compile(r"version|VERSION|GREATER|LESS|_GE_|_LT_|hasattr\(|TORCH_\d")
# What an `except` clause must catch for a removed API in its `try` body to be handled.
_CAUGHT_BY = {
    "ModuleNotFoundError": ("ModuleNotFoundError", "ImportError"),
    "ImportError": ("ImportError",),
    "AttributeError": ("AttributeError",),
    "RuntimeError": ("RuntimeError",),
}


def _handler_names(handler: cst.ExceptHandler) -> Tuple[str, ...]:
    kind = handler.type
    if kind is None:
        return ("BaseException",)
    parts = [element.value for element in kind.elements] if isinstance(kind, cst.Tuple) else [kind]
    return tuple((dotted_name(part) or "").rsplit(".", 1)[-1] for part in parts)


def guarded(node: cst.CSTNode, change: ApiChange, sem) -> bool:
    """The use is compatibility code the program handles: inside an `except` clause (the
    fallback for an older release), in a branch of a version / feature test, or in a `try` body
    whose handler catches the exception the entry raises (`try: from torch._six import inf /
    except ImportError: ...`)."""
    raised = change.error_type
    caught = _CAUGHT_BY.get(raised, (raised,)) + ("Exception", "BaseException")
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, cst.ExceptHandler):
            return True
        if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)) and child is not ancestor.test:
            if _VERSION_TEST.search(sem.source(ancestor.test)):
                return True
        if isinstance(ancestor, cst.Try) and child is ancestor.body and change.outcome == RAISES:
            if any(name in caught for handler in ancestor.handlers for name in _handler_names(handler)):
                return True
        child = ancestor
    return False


@dataclass(frozen=True)
class Use:
    change: ApiChange
    node: cst.CSTNode  # where to report
    how: str  # "call", "reference", "import", "method"
    names: Tuple[str, ...] = ()  # for an import: the flagged names it imports


def _module_entry(name: str) -> Optional[ApiChange]:
    for api, change in MODULES.items():
        if name == api or name.startswith(api + "."):
            return change
    return None


def _inside_import(node: cst.CSTNode, sem) -> bool:
    for ancestor in sem.ancestors(node):
        if type(ancestor) in (cst.Import, cst.ImportFrom):
            return True
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
    return False


def _imported_modules(sem) -> FrozenSet[str]:
    """The table's modules this file imports itself (those imports are reported; uses through
    the names they bind are not reported again)."""
    found = sem.__dict__.get("_api_drift_modules")
    if found is None:
        names = set()
        for node in sem.index.nodes(cst.Import):
            for alias in node.names:
                change = _module_entry(dotted_name(alias.name) or "")
                if change is not None:
                    names.add(change.api)
        for node in sem.index.nodes(cst.ImportFrom):
            if node.module is not None and not node.relative:
                change = _module_entry(dotted_name(node.module) or "")
                if change is not None:
                    names.add(change.api)
        found = sem.__dict__["_api_drift_modules"] = frozenset(names)
    return found


def import_uses(node: cst.CSTNode, sem) -> List[Use]:
    """The table entries an `import` / `from ... import` statement imports (one Use per
    statement for `from` imports, naming every flagged name)."""
    uses: List[Use] = []
    if type(node) is cst.Import:
        for alias in node.names:
            change = _module_entry(dotted_name(alias.name) or "")
            if change is not None:
                uses.append(Use(change, alias, "import", (dotted_name(alias.name) or change.api,)))
        return [use for use in uses if not guarded(node, use.change, sem)]
    if not isinstance(node, cst.ImportFrom) or node.module is None or node.relative:
        return uses
    module = dotted_name(node.module) or ""
    change = _module_entry(module)
    if change is not None:
        return [] if guarded(node, change, sem) else [Use(change, node.module, "import", (module,))]
    if type(node.names) is cst.ImportStar:
        return uses
    flagged: List[Tuple[ApiChange, cst.ImportAlias, str]] = []
    for alias in node.names:
        if not isinstance(alias.name, cst.Name):
            continue
        name = f"{module}.{alias.name.value}"
        found = FUNCTIONS.get(name) or _module_entry(name)
        if found is not None and not guarded(node, found, sem):
            flagged.append((found, alias, name))
    for raising in (True, False):
        group = [(c, a, n) for c, a, n in flagged if (c.outcome == RAISES) == raising]
        if group:
            # One finding per statement and rule, at the first flagged name, naming them all.
            uses.append(Use(group[0][0], group[0][1], "import", tuple(n for _, _, n in group)))
    return uses


def _entry_names(sem) -> FrozenSet[str]:
    """The local names this file's imports bind to a table entry (`solve` after `from torch
    import solve`, `old_qr` after `... import qr as old_qr`, `six` after `import torch._six as
    six`): the only bare names that can be a use."""
    found = sem.__dict__.get("_api_drift_names")
    if found is None:
        names = set()
        for node in sem.index.nodes(cst.ImportFrom):
            if node.module is None or node.relative or type(node.names) is cst.ImportStar:
                continue
            module = dotted_name(node.module) or ""
            for alias in node.names:
                if isinstance(alias.name, cst.Name):
                    qualified = f"{module}.{alias.name.value}"
                    if qualified in FUNCTIONS or qualified in MODULES:
                        names.add(_bound_name(alias))
        for node in sem.index.nodes(cst.Import):
            for alias in node.names:
                if alias.asname is not None and (dotted_name(alias.name) or "") in MODULES:
                    names.add(_bound_name(alias))
        found = sem.__dict__["_api_drift_names"] = frozenset(names)
    return found


def candidates(node_type, sem) -> Optional[List[cst.CSTNode]]:
    """The nodes of `node_type` that can be a use (for TL209/TL210's `candidates`): Attributes
    whose member spells an entry's last name or a removed method, Names an import binds to an
    entry; every import statement."""
    if node_type is cst.Attribute:
        return sem.index.attributes_named(_MEMBER_NAMES)
    if node_type is cst.Name:
        return sem.index.names_spelled_any(_entry_names(sem))
    return None


def _bound_name(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return dotted_name(alias.name) or ""


def name_use(node: cst.CSTNode, sem) -> Optional[Use]:
    """The entry a Name or Attribute node uses (a call, a decorator, or a reference where a
    reference fails), else None. Cached per node: TL209 and TL210 both ask."""
    if type(node) is cst.Attribute:
        if node.attr.value not in LAST_NAMES:
            return None
    elif type(node) is cst.Name:
        if node.value not in _entry_names(sem):
            return None
    else:
        return None
    cache = sem.__dict__.setdefault("_api_drift_uses", {})
    key = id(node)
    if key not in cache:
        cache[key] = _name_use(node, sem)
    return cache[key]


def _name_use(node: cst.CSTNode, sem) -> Optional[Use]:
    parent = sem.parent(node)
    if type(node) is cst.Name:
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            return None  # the member part of `x.solve`: the Attribute is the use
        if isinstance(parent, cst.Arg) and parent.keyword is node:
            return None  # f(solve=...)
        if isinstance(parent, (cst.Param, cst.FunctionDef, cst.ClassDef, cst.AssignTarget)):
            return None  # a binding, not a use
        bindings = sem.scopes.lookup(node.value, node)
        if not bindings or not all(isinstance(b.node, (cst.Import, cst.ImportFrom)) for b in bindings):
            return None  # also bound otherwise (`def solve(...)`): not certainly the import
    if _inside_import(node, sem):
        return None
    name = sem.qualified_name(node)
    if name is None:
        return None
    change = FUNCTIONS.get(name) or MODULES.get(name)
    if change is not None and guarded(node, change, sem):
        return None
    change = FUNCTIONS.get(name)
    if change is not None:
        called = isinstance(parent, cst.Call) and parent.func is node
        if called:
            return Use(change, node, "call")
        if isinstance(parent, cst.Decorator) or reference_fails(change):
            return Use(change, node, "reference")
        return None
    change = MODULES.get(name)
    if change is not None and change.api not in _imported_modules(sem):
        return Use(change, node, "reference")
    return None


def method_use(node: cst.Attribute, sem) -> Optional[Use]:
    """A removed method called on a receiver the analysis is sure of: the DataLoader iterator's
    `.next()` on `iter(loader)`, `loader.__iter__()`, `enumerate(loader)` or a name holding one
    of them (the loader a `torch.utils.data.DataLoader` by the value model); a removed Tensor
    method (`A.symeig()`) on a value the value model knows is a tensor."""
    change = METHODS.get(node.attr.value)
    if change is None:
        return None
    call = sem.parent(node)
    if not (isinstance(call, cst.Call) and call.func is node):
        return None
    if change.api.startswith("torch.Tensor."):
        if not sem.imports_torch or not _is_tensor(node.value, sem) or guarded(call, change, sem):
            return None
        return Use(change, call, "method")
    if call.args:
        return None
    receiver = node.value
    if isinstance(receiver, cst.Name):
        receiver = sem.assigned_value(receiver)
    if _is_loader_iterator(receiver, sem) and not guarded(call, change, sem):
        return Use(change, call, "method")
    if _is_builtin_iterator(receiver, sem) and not guarded(call, change, sem):
        return Use(change, call, "iterator")
    return None


def _is_builtin_iterator(expr: Optional[cst.CSTNode], sem) -> bool:
    """`iter(x)` of a list, tuple, dict, generator, tensor or batch the value model knows, in a
    file that defines no method `next` (the only way a Python 3 iterator answers `.next()`)."""
    from torchlint.analysis.value import BATCH, CONTAINER, STRING, TENSOR_KINDS  # noqa: PLC0415

    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "iter"
            and len(expr.args) == 1 and not expr.args[0].star and expr.args[0].keyword is None
            and not sem.scopes.lookup("iter", expr.func)):
        return False
    if any(function.name.value == "next" for function in sem.index.nodes(cst.FunctionDef)) \
            or sem.index.names_spelled("next") and any(
                isinstance(sem.parent(name), cst.AssignTarget) for name in sem.index.names_spelled("next")):
        return False
    try:
        kind = sem.values.of(expr.args[0].value).kind
    except Exception:  # noqa: BLE001 - an unknown value is not a known iterable
        return False
    return kind in (CONTAINER, BATCH, STRING) or kind in TENSOR_KINDS


def _is_tensor(expr: cst.CSTNode, sem) -> bool:
    try:
        return sem.values.of(expr).is_tensor
    except Exception:  # noqa: BLE001 - an unknown value is not a tensor
        return False


def _is_loader_iterator(expr: Optional[cst.CSTNode], sem) -> bool:
    from torchlint.analysis.value import LOADER  # noqa: PLC0415 - the value model on first need

    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value == "__iter__" and not expr.args:
        inner = func.value
    elif isinstance(func, cst.Name) and func.value in ("iter", "enumerate") and len(expr.args) >= 1 \
            and not expr.args[0].star and expr.args[0].keyword is None \
            and not sem.scopes.lookup(func.value, func):
        inner = expr.args[0].value
    else:
        return False
    if _is_loader_iterator(inner, sem) and isinstance(func, cst.Name) and func.value == "iter":
        return True  # iter(enumerate(loader))
    try:
        return sem.values.of(inner).kind == LOADER
    except Exception:  # noqa: BLE001 - an unknown value is not a loader
        return False


def torch_root(node: cst.BaseExpression, sem) -> Optional[str]:
    """The spelling of the `torch` module at the root of an attribute chain (`torch`, `th`), or
    None when the chain does not start at a name bound to torch itself."""
    root = node
    while isinstance(root, cst.Attribute):
        root = root.value
    if isinstance(root, cst.Name) and sem.qualified_name(root) == "torch":
        return root.value
    return None


def rename_edit(node: cst.CSTNode, change: ApiChange, sem) -> Optional[Tuple[cst.CSTNode, str]]:
    """(node to replace, text) renaming an attribute use of `change.api` to `change.rename` when
    both live under the module the attribute is read from (`torch.qr` -> `torch.linalg.qr`,
    `transforms.Scale` -> `transforms.Resize`); None otherwise (a bare imported name: the import
    would have to change too)."""
    if not change.rename or not isinstance(node, cst.Attribute):
        return None
    owner = sem.qualified_name(node.value)
    if owner is None or not change.rename.startswith(owner + "."):
        return None
    return node.attr, change.rename[len(owner) + 1:]


__all__ = ["Use", "FUNCTIONS", "MODULES", "METHODS", "triggers", "announces_removal", "reference_fails",
           "import_uses", "name_use", "method_use", "torch_root", "rename_edit", "METHOD"]
