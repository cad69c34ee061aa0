"""Scopes and name bindings, computed from the index without LibCST's ScopeProvider.

A binding records how a name got its value in one scope: an import (with the qualified name it
refers to), a parameter, an assignment, a loop target, a def or class. Resolution follows Python's
rules closely enough for a linter: function scopes see enclosing function scopes and the module,
never a class body; comprehensions get their own scope for their targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Union

import libcst as cst

from torchlint.analysis.index import Index

ScopeNode = Union[cst.Module, cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.CSTNode]

_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
SCOPE_TYPES = (cst.Module, cst.FunctionDef, cst.Lambda, cst.ClassDef) + _COMPREHENSIONS
_UNPACKING = frozenset({cst.Tuple, cst.List, cst.Element, cst.StarredElement})
# The node types whose `target` field binds, and how.
_TARGET_KIND = {cst.AssignTarget: "assign", cst.AnnAssign: "assign", cst.AugAssign: "augassign",
                cst.For: "for", cst.CompFor: "for", cst.NamedExpr: "walrus"}
_NAME_TYPES = frozenset({cst.Name, cst.Attribute})
_DECLARATIONS = frozenset({cst.Global, cst.Nonlocal, cst.NameItem})
# The parent types of a Name that may bind it (`_store_kind` decides); any other parent: a load.
_MAY_BIND = _UNPACKING | frozenset(_TARGET_KIND) | _DECLARATIONS | {cst.AsName}
# By exact type (LibCST's node classes are final, and isinstance on them goes through ABCMeta):
# 1 = the scope covers only the node's `body`, 2 = it covers every child.
_SCOPE_KIND = {cst.FunctionDef: 1, cst.ClassDef: 1, cst.Lambda: 1, **{c: 2 for c in _COMPREHENSIONS}}


@dataclass(frozen=True)
class Binding:
    name: str
    kind: str  # "import", "param", "assign", "augassign", "for", "with", "def", "class", "other"
    node: cst.CSTNode  # the binding statement or parameter
    qualified_name: Optional[str] = None  # for imports and module-level aliases of imports
    value: Optional[cst.BaseExpression] = None  # for plain single-target assignments


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    """`a.b.c` as a string, for Name/Attribute chains only."""
    parts: List[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is cst.Name:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


_BINDING_STATEMENT: Dict[type, bool] = {}
_UNASKED = object()
_NO_NAMES: Dict[str, List["Binding"]] = {}  # never written: the names of a scope that binds none


def _ends_binding_search(node_type: type) -> bool:
    """Whether a node of this type holds a binding's value (a statement, a comprehension's
    `for`, a walrus). Answered per type: isinstance on LibCST's abstract classes is slow."""
    found = _BINDING_STATEMENT.get(node_type)
    if found is None:
        found = _BINDING_STATEMENT[node_type] = issubclass(
            node_type, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.CompFor, cst.NamedExpr))
    return found


class Scopes:
    def __init__(self, index: Index) -> None:
        self.index = index
        # Keyed by id(node): LibCST nodes hash through a Python-level `__hash__`.
        self._scope_of: Dict[int, cst.CSTNode] = {}
        self._bindings: Optional[Dict[cst.CSTNode, Dict[str, List[Binding]]]] = None
        # The same table keyed by id(scope): LibCST nodes hash through a Python-level `__hash__`,
        # and every name resolution looks a scope up.
        self._by_scope: Dict[int, Dict[str, List[Binding]]] = {}
        self._qualified: Dict[int, Optional[str]] = {}
        self._imported_names: Optional[frozenset] = None
        self.relative_imports: Dict[tuple, str] = {}  # (id(scope), name) -> ".layers.PatchEmbed"
        self.star_imports: List[str] = []  # modules of `from models import *` at module level

    # -- which scope a node is in -------------------------------------------------------------
    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The innermost scope whose code evaluates `node` (a def's own name is outside it)."""
        cache = self._scope_of
        cached = cache.get(id(node))
        if cached is not None:
            return cached
        index = self.index
        above = index.above
        preorder = index.preorder
        scope: cst.CSTNode = index.module
        # Every node on the way up shares the answer, so the whole path is cached: later
        # questions about its neighbours stop after a step or two.
        path = [node]
        up = index.parent_number(node)
        child = node
        while up >= 0:
            current = preorder[up]
            kind = _SCOPE_KIND.get(type(current))
            if kind is not None and (kind == 2 or child is current.body):
                # Decorators, bases, defaults and annotations of a def run in the enclosing scope.
                scope = current
                break
            known = cache.get(id(current))
            if known is not None:
                scope = known
                break
            path.append(current)
            child = current
            up = above[up]
        for visited in path:
            cache[id(visited)] = scope
        return scope

    def function_of(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        """The innermost enclosing `def` whose body contains `node`."""
        scope = self._scope_of.get(id(node)) or self.scope_of(node)
        kind = type(scope)
        while kind is not cst.FunctionDef and kind is not cst.Module:
            scope = self.scope_of(scope)
            kind = type(scope)
        return scope if kind is cst.FunctionDef else None

    # -- bindings ---------------------------------------------------------------------------
    @property
    def bindings(self) -> Dict[cst.CSTNode, Dict[str, List[Binding]]]:
        if self._bindings is None:
            self._bindings = self._collect()
        return self._bindings

    def bindings_in(self, scope: cst.CSTNode, name: str) -> List[Binding]:
        if self._bindings is None:
            self.bindings
        return self._by_scope.get(id(scope), _NO_NAMES).get(name, [])

    def _add(self, table, scope, binding: Binding) -> None:
        names = table.get(id(scope))
        if names is None:
            names = table[id(scope)] = {}
            self._scopes_in_order.append(scope)
        found = names.get(binding.name)
        if found is None:
            names[binding.name] = [binding]
        else:
            found.append(binding)

    def _collect(self) -> Dict[cst.CSTNode, Dict[str, List[Binding]]]:
        table: Dict[int, Dict[str, List[Binding]]] = self._by_scope
        self._scopes_in_order: List[cst.CSTNode] = []
        index = self.index
        for node in index.nodes(cst.Import):
            scope = self.scope_of(node)
            for alias in node.names:
                full = dotted_name(alias.name)
                if full is None:
                    continue
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self._add(table, scope, Binding(alias.asname.name.value, "import", node, full))
                else:
                    top = full.split(".")[0]
                    self._add(table, scope, Binding(top, "import", node, top))
        for node in index.nodes(cst.ImportFrom):
            scope = self.scope_of(node)
            if type(node.names) is cst.ImportStar:
                if type(scope) is cst.Module and (node.module is not None or node.relative):
                    inner = dotted_name(node.module) if node.module is not None else ""
                    if inner is not None:
                        self.star_imports.append("." * len(node.relative) + inner)
                continue
            if node.relative:
                # `from .layers import PatchEmbed`: qualified as `.layers.PatchEmbed` (one dot per
                # level), which only the project layer resolves.
                dots = "." * len(node.relative)
                inner = dotted_name(node.module) if node.module is not None else None
                if node.module is not None and inner is None:
                    continue
                base = f"{dots}{inner}" if inner else dots[:-1] if len(dots) > 1 else ""
                for alias in node.names:
                    if not isinstance(alias.name, cst.Name):
                        continue
                    name = alias.name.value
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        name = alias.asname.name.value
                    full = f"{base}.{alias.name.value}" if base else f".{alias.name.value}"
                    # No qualified name (it is not torch's), but the project layer resolves it.
                    self._add(table, scope, Binding(name, "import", node, None))
                    self.relative_imports[(id(scope), name)] = full
                continue
            if node.module is None:
                continue
            base = dotted_name(node.module)
            for alias in node.names:
                if not isinstance(alias.name, cst.Name):
                    continue
                name = alias.name.value
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    name = alias.asname.name.value
                self._add(table, scope, Binding(name, "import", node, f"{base}.{alias.name.value}"))
        for node in index.nodes(cst.Param):
            owner = index.parent.get(index.parent.get(node))
            if owner is not None:
                self._add(table, owner, Binding(node.name.value, "param", node))
        for node_type, kind in ((cst.FunctionDef, "def"), (cst.ClassDef, "class")):
            for node in index.nodes(node_type):
                self._add(table, self.scope_of(node), Binding(node.name.value, kind, node))
        names = index.nodes(cst.Name)
        for node, parent in zip(names, index.name_parents()):
            if type(parent) not in _MAY_BIND:
                continue  # a load: most names are settled by their parent's type alone
            kind = self._store_kind(node, parent)
            if kind is None:
                continue
            scope = self.scope_of(node)
            if kind == "walrus":
                while isinstance(scope, _COMPREHENSIONS):
                    scope = self.scope_of(scope)
                kind = "assign"
            statement, value = self._assigned_value(node)
            self._add(table, scope, Binding(node.value, kind, statement, None, value))
        # Keyed by node for the callers that read the whole table, in the order the scopes got
        # their first binding (as before); alias resolution below looks names up in it.
        self._bindings = {scope: table[id(scope)] for scope in self._scopes_in_order}
        self._resolve_import_aliases(table)
        return self._bindings

    def _store_kind(self, name: cst.Name, parent: Optional[cst.CSTNode] = None) -> Optional[str]:
        """How `name` is bound here, or None for a load (`parent`: its parent, when known)."""
        parent_of = self.index.parent
        child: cst.CSTNode = name
        if parent is None:
            parent = parent_of.get(name)
        while type(parent) in _UNPACKING:
            child, parent = parent, parent_of.get(parent)
        parent_type = type(parent)
        if parent_type in _TARGET_KIND:
            return _TARGET_KIND[parent_type] if child is parent.target else None
        if parent_type is cst.AsName:
            if child is not parent.name:
                return None
            grand = type(parent_of.get(parent))
            if grand is cst.WithItem:
                return "with"
            if grand is cst.ExceptHandler:
                return "other"
            return None  # import aliases are handled with their import
        if parent_type in _DECLARATIONS:
            return "other"
        return None

    def _assigned_value(self, name: cst.Name):
        """The statement binding `name` and, for `name = value`, the value."""
        index = self.index
        above = index.above
        preorder = index.preorder
        up = index.parent_number(name)
        node = None
        while up >= 0:  # by pre-order numbers: no lookup per step
            node = preorder[up]
            if _ends_binding_search(type(node)):
                break
            node = None
            up = above[up]
        if node is None:
            return name, None
        if type(node) is cst.Assign and any(t.target is name for t in node.targets):
            return node, node.value
        if type(node) is cst.AnnAssign and node.target is name:
            return node, node.value
        if type(node) is cst.NamedExpr and node.target is name:
            return node, node.value
        return node, None

    def _resolve_import_aliases(self, table) -> None:
        """`F = torch.nn.functional` at module level acts like an import alias."""
        module_table = table.get(id(self.index.module), {})
        for name, bindings in list(module_table.items()):
            if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].value is None:
                continue
            target = dotted_name(bindings[0].value)
            if target is None or target.split(".")[0] == name:
                continue
            resolved = self._resolve_dotted(target, self.index.module)
            if resolved is not None:
                module_table[name] = [
                    Binding(name, "import", bindings[0].node, resolved, bindings[0].value)
                ]

    # -- resolution -------------------------------------------------------------------------
    def lookup(self, name: str, node: cst.CSTNode) -> Optional[List[Binding]]:
        """The bindings of `name` in the first scope (from `node` outward) that binds it."""
        found = self.binding_scope(name, node)
        return None if found is None else found[1]

    def binding_scope(self, name: str, node: cst.CSTNode):
        """(scope, bindings) for the first scope, from `node`'s outward, that binds `name`."""
        scope = self.scope_of(node)
        if self._bindings is None:
            self.bindings
        table = self._by_scope
        first = True
        while True:
            if first or type(scope) is not cst.ClassDef:
                found = table.get(id(scope), _NO_NAMES).get(name)
                if found:
                    return scope, found
            if type(scope) is cst.Module:
                return None
            first = False
            scope = self.scope_of(scope)

    def _resolve_dotted(self, dotted: str, node: cst.CSTNode) -> Optional[str]:
        head, _, rest = dotted.partition(".")
        bindings = self.lookup(head, node)
        if not bindings:
            return None
        imports = [b for b in bindings if b.kind == "import"]
        if not imports:
            return None
        if type(self.scope_of(node)) is cst.FunctionDef and len(imports) != len(bindings):
            # A local that is both imported and assigned: which one reaches is unknowable here.
            if any(b.kind == "param" for b in bindings):
                return None
        base = imports[0].qualified_name
        if base is None:
            return None  # a relative import: see `import_name`
        return f"{base}.{rest}" if rest else base

    def import_name(self, node: cst.CSTNode) -> Optional[str]:
        """The qualified name of `node` including relative imports (`PatchEmbed` after `from
        .layers import PatchEmbed` is `.layers.PatchEmbed`, one dot per level): what the project
        layer resolves. `qualified_name` leaves relative imports unresolved."""
        found = self.qualified_name(node)
        if found is not None or not self.relative_imports:
            return found
        dotted = dotted_name(node) if type(node) in _NAME_TYPES else None
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        located = self.binding_scope(head, node)
        if located is None:
            return None
        base = self.relative_imports.get((id(located[0]), head))
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def qualified_name(self, node: cst.CSTNode) -> Optional[str]:
        """`torch.nn.functional.relu` for `F.relu` when `F` is `torch.nn.functional`, else None."""
        answer = self._qualified.get(id(node), _UNASKED)
        if answer is not _UNASKED:
            return answer
        answer = None
        root = node
        while type(root) is cst.Attribute:
            root = root.value
        # Only a name some import binds can resolve: most names are settled by their root's
        # spelling, without spelling the whole chain or looking anything up.
        if type(root) is cst.Name and root.value in (self._imported_names or self.imported_names):
            dotted = dotted_name(node)
            if dotted is not None:
                answer = self._resolve_dotted(dotted, node)
        self._qualified[id(node)] = answer
        return answer

    @property
    def imported_names(self) -> frozenset:
        """Every name an import (or a module-level alias of one) binds, in any scope."""
        if self._imported_names is None:
            self._imported_names = frozenset(
                name
                for names in self.bindings.values()
                for name, bindings in names.items()
                if any(b.kind == "import" for b in bindings)
            )
        return self._imported_names
