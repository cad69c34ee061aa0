"""May-reach definitions: every binding of a name that may give it its value at a use.

`Flow.reaching(use)` walks back from the use through the blocks of its function (or module): the
statements before it in its block, then out through each enclosing compound statement. A branch
contributes the definitions of each of its arms and stops the walk only when every arm binds the
name; a loop body adds the definitions its previous iteration leaves behind (the back edge); a
`for` target, a `with ... as` target and a parameter are certain. The answer is the tuple of
definitions, `()` when nothing in the use's own scope binds the name (it comes from an enclosing
scope), or None when the name's binding cannot be followed (`global`, `nonlocal`, `del`, a
`match` pattern).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.index import Index
from torchlint.analysis.scopes import Scopes

_COMPREHENSIONS = frozenset({cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp})
_UNPACKING = frozenset({cst.Tuple, cst.List})
_SCOPE_BOUNDARIES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda}) | _COMPREHENSIONS
_CERTAIN_SMALL = frozenset({cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Import, cst.ImportFrom, cst.Del})
# The node types whose `body` is a list of statements (every other `body` is one node).
_BLOCKS = frozenset({cst.Module, cst.IndentedBlock, cst.SimpleStatementLine, cst.SimpleStatementSuite})
# The types the walk back from a use looks at besides blocks (`Flow._reaching`).
_COMPOUNDS = frozenset({cst.For, cst.While, cst.With, cst.ExceptHandler, cst.ExceptStarHandler, cst.Try,
                        cst.TryStar, cst.MatchCase, cst.FunctionDef, cst.Lambda, cst.ClassDef})


class Def:
    """One binding of a name.

    `kind`: "assign" (`statement` an Assign/AnnAssign; `value` the assigned expression; `path` the
    indexes of the name inside a tuple target, `()` for a plain target, None under a starred
    target), "augassign" (`value` the right-hand side), "for" (`statement` a For or CompFor,
    `value` its iterable, `path` as for assign), "with" (`statement` the WithItem, `value` its
    context expression), "walrus", "param" (`statement` the Param), "def", "class", "import",
    "except", "unknown" (del, global, a match pattern)."""

    __slots__ = ("kind", "statement", "target", "value", "path")

    def __init__(self, kind: str, statement: cst.CSTNode, target: Optional[cst.CSTNode] = None,
                 value: Optional[cst.BaseExpression] = None, path: Optional[Tuple[int, ...]] = ()) -> None:
        self.kind = kind
        self.statement = statement
        self.target = target
        self.value = value
        self.path = path

    def __repr__(self) -> str:
        return f"Def({self.kind}, path={self.path})"


class Flow:
    def __init__(self, index: Index, scopes: Scopes) -> None:
        self.index = index
        self.scopes = scopes
        self._last_cache: Dict[Tuple[int, str], Tuple[Tuple[Def, ...], bool]] = {}
        self._store_cache: Dict[int, Optional[Def]] = {}
        self._reaching_cache: Dict[Tuple[int, str], Optional[Tuple[Def, ...]]] = {}
        self._declared: Dict[int, frozenset] = {}
        # id(statement) -> its index, per body: a walk from a module-level point asks a long
        # module body for its position once per name, so a scan each time is quadratic.
        self._positions: Dict[int, Dict[int, int]] = {}

    # -- public -------------------------------------------------------------------------------
    def reaching(self, use: cst.Name) -> Optional[Tuple[Def, ...]]:
        """The definitions of `use.value` that may reach `use` (see the module docstring)."""
        return self.reaching_at(use, use.value)

    def reaching_at(self, point: cst.CSTNode, name: str) -> Optional[Tuple[Def, ...]]:
        """The definitions of `name` that may reach the program point `point` (a node: the walk
        starts just before the statement holding it)."""
        key = (id(point), name)
        cache = self._reaching_cache
        if key in cache:
            return cache[key]
        answer = self._reaching(point, name)
        cache[key] = answer
        return answer

    def definition_of_store(self, name: cst.Name) -> Optional[Def]:
        """The definition a Name in a store position makes (None for a load)."""
        key = id(name)
        cache = self._store_cache
        if key not in cache:
            cache[key] = self._make_def(name)
        return cache[key]

    def bindings(self, scope: cst.CSTNode, name: str) -> List[Def]:
        """Every definition of `name` in `scope`, flow-insensitively, in document order."""
        found = []
        for binding in self.scopes.bindings_in(scope, name):
            node = binding.node
            if binding.kind == "param":
                found.append(Def("param", node, node))
            elif binding.kind in ("def", "class"):
                found.append(Def(binding.kind, node, node))
            elif binding.kind == "import":
                found.append(Def("import", node, node))
        for store in self._stores_under(scope, name, scope):
            found.append(store)
        found.sort(key=lambda d: self.index.order.get(d.target if d.target is not None else d.statement, 0))
        return found

    def binds_in(self, node: cst.CSTNode, name: str) -> bool:
        """Whether anything in `node`, nested scopes included, may bind `name`: an assignment, a
        loop, `with` or `except` target, an import, a def or class of that name."""
        index = self.index
        for each in index.names_under(node, name):
            parent = index.parent.get(each)
            if self.definition_of_store(each) is not None:
                return True
            if type(parent) in (cst.FunctionDef, cst.ClassDef) and parent.name is each:
                return True
            if type(parent) in (cst.ImportAlias, cst.AsName, cst.NameItem):
                return True
        return False

    # -- the walk -------------------------------------------------------------------------------
    def _reaching(self, point: cst.CSTNode, name: str) -> Optional[Tuple[Def, ...]]:
        scopes = self.scopes
        scope = scopes.scope_of(point)
        while type(scope) in _COMPREHENSIONS:
            if scopes.bindings_in(scope, name):
                return tuple(d for d in self._stores_under(scope, name, scope) if d.kind == "for") or None
            point = scope  # a comprehension runs where it stands: the outer name reaches from there
            scope = scopes.scope_of(scope)
        if not scopes.bindings_in(scope, name):
            return ()
        if name in self._declared_in(scope):
            return None
        defs: List[Def] = []
        index = self.index
        above = index.above
        preorder = index.preorder
        up = index.parent_number(point)
        child = point
        blocks = _BLOCKS
        compounds = _COMPOUNDS
        while up >= 0:
            parent = preorder[up]
            kind = type(parent)
            if kind not in blocks and kind not in compounds:
                child = parent  # an expression or a simple statement: nothing binds on the way up
                up = above[up]
                continue
            body = parent.body if kind in blocks else None
            if type(body) is tuple or type(body) is list:
                positions = self._positions.get(id(body))
                if positions is None:
                    positions = self._positions[id(body)] = {id(each): i for i, each in enumerate(body)}
                position = positions.get(id(child))
                if position:
                    # Only the statements that mention the name can bind it: a use deep in a
                    # long script would otherwise test every statement above it, for each name.
                    mentioning = index.mentioning(body, name, position)
                    for statement in reversed(body[:position]) if mentioning is None else \
                            (body[at] for at in mentioning):
                        found, certain = self._last(statement, name)
                        if found:
                            defs.extend(found)
                        if certain:
                            return tuple(defs)
            if kind is cst.For:
                if child is parent.body or child is parent.orelse:
                    target = self._target_def(parent, name)
                    if target is not None and child is parent.body:
                        defs.append(target)
                        return tuple(defs)
                    if target is not None:
                        defs.append(target)
                    defs.extend(self._last(parent.body, name)[0])
            elif kind is cst.While:
                if child is parent.body or child is parent.orelse or child is parent.test:
                    defs.extend(self._last(parent.body, name)[0])
            elif kind is cst.With:
                if child is parent.body:
                    bound = [self._with_def(item, name) for item in parent.items]
                    bound = [d for d in bound if d is not None]
                    if bound:
                        defs.append(bound[-1])
                        return tuple(defs)
            elif kind is cst.ExceptHandler or kind is cst.ExceptStarHandler:
                if child is parent.body and parent.name is not None and _binds(parent.name.name, name):
                    defs.append(Def("except", parent, parent.name.name))
                    return tuple(defs)
            elif kind is cst.Try or kind is cst.TryStar:
                if child in parent.handlers:
                    defs.extend(self._all_defs(parent.body, name))
                elif child is parent.orelse:
                    found, certain = self._last(parent.body, name)
                    defs.extend(found)
                    if certain:
                        return tuple(defs)
                elif child is parent.finalbody:
                    defs.extend(self._all_defs(parent.body, name))
                    for handler in parent.handlers:
                        defs.extend(self._last(handler.body, name)[0])
                    if parent.orelse is not None:
                        defs.extend(self._last(parent.orelse, name)[0])
            elif kind is cst.MatchCase:
                return None
            elif kind is cst.FunctionDef or kind is cst.Lambda:
                if child is parent.body:
                    param = _param_named(parent.params, name)
                    if param is not None:
                        defs.append(Def("param", param, param))
                    return tuple(defs)
            elif kind is cst.ClassDef:
                if child is parent.body:
                    return tuple(defs)
            elif kind is cst.Module:
                return tuple(defs)
            child = parent
            up = above[up]
        return tuple(defs)

    def _declared_in(self, scope: cst.CSTNode) -> frozenset:
        """Names declared `global`/`nonlocal` directly in `scope`."""
        key = id(scope)
        found = self._declared.get(key)
        if found is None:
            names = set()
            for kind in (cst.Global, cst.Nonlocal):
                if not self.index.nodes(kind):
                    continue  # most files declare nothing: no search under each scope
                for node in self.index.descendants(scope, kind) if type(scope) is not cst.Module else \
                        self.index.nodes(kind):
                    if self.scopes.scope_of(node) is scope:
                        names.update(item.name.value for item in node.names)
            found = self._declared[key] = frozenset(names)
        return found

    def _last(self, node: cst.CSTNode, name: str) -> Tuple[Tuple[Def, ...], bool]:
        """The definitions of `name` that may be the last ones when `node` (a statement or block)
        has run, and whether it certainly binds the name on every path through it."""
        if not self.index.mentions(node, name):
            return (), False
        key = (id(node), name)
        cache = self._last_cache
        cached = cache.get(key)
        if cached is not None:
            return cached
        answer = self._compute_last(node, name)
        cache[key] = answer
        return answer

    def _compute_last(self, node: cst.CSTNode, name: str) -> Tuple[Tuple[Def, ...], bool]:
        kind = type(node)
        if kind in (cst.Else, cst.Finally):
            return self._last(node.body, name)
        if kind in (cst.SimpleStatementLine, cst.SimpleStatementSuite, cst.IndentedBlock):
            body = node.body
            if len(body) == 1:
                return self._last(body[0], name)  # most lines hold one statement: no block walk
            return self._last_block(body, name)
        if kind in _CERTAIN_SMALL:
            stores = self._stores_under(node, name, None)
            if not stores:
                return (), False
            direct = [d for d in stores if d.kind != "walrus"]
            if direct:
                return (direct[-1],), True
            return tuple(stores), False
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            if node.name.value == name:
                return (Def("def" if kind is cst.FunctionDef else "class", node, node),), True
            return (), False
        if kind is cst.If:
            body, certain_body = self._last(node.body, name)
            if node.orelse is None:
                return body, False
            other, certain_other = self._last(node.orelse, name)
            return body + other, certain_body and certain_other
        if kind is cst.For:
            defs = []
            target = self._target_def(node, name)
            if target is not None:
                defs.append(target)
            defs.extend(self._last(node.body, name)[0])
            if node.orelse is not None:
                defs.extend(self._last(node.orelse, name)[0])
            return tuple(defs), False
        if kind is cst.While:
            defs = list(self._last(node.body, name)[0])
            if node.orelse is not None:
                defs.extend(self._last(node.orelse, name)[0])
            return tuple(defs), False
        if kind is cst.With:
            body, certain = self._last(node.body, name)
            if certain:
                return body, True
            bound = [d for d in (self._with_def(item, name) for item in node.items) if d is not None]
            return tuple(bound[-1:]) + body, bool(bound)
        if kind is cst.Try or kind is cst.TryStar:
            if node.finalbody is not None:
                final, certain = self._last(node.finalbody, name)
                if certain:
                    return final, True
            else:
                final = ()
            defs = list(self._all_defs(node.body, name)) if node.handlers else list(self._last(node.body, name)[0])
            certain = not node.handlers and self._last(node.body, name)[1]
            for handler in node.handlers:
                defs.extend(self._last(handler.body, name)[0])
            if node.orelse is not None:
                defs.extend(self._last(node.orelse, name)[0])
            return tuple(defs) + tuple(final), certain
        # Anything else (match, expression statements with a walrus, ...): every binding in it.
        stores = self._all_defs(node, name)
        if kind is cst.Match and stores:
            return (Def("unknown", node, node),), False
        return tuple(stores), False

    def _last_block(self, body, name: str) -> Tuple[Tuple[Def, ...], bool]:
        defs: List[Def] = []
        mentioning = self.index.mentioning(body, name)
        for statement in reversed(body) if mentioning is None else (body[at] for at in mentioning):
            found, certain = self._last(statement, name)
            if found:
                defs.extend(found)
            if certain:
                return tuple(defs), True
        return tuple(defs), False

    def _all_defs(self, node: cst.CSTNode, name: str) -> Tuple[Def, ...]:
        if not self.index.mentions(node, name):
            return ()
        return tuple(self._stores_under(node, name, None))

    # -- definitions ----------------------------------------------------------------------------
    def _stores_under(self, node: cst.CSTNode, name: str, scope: Optional[cst.CSTNode]) -> List[Def]:
        """Definitions of `name` made by Name nodes under `node` in `node`'s own scope (or
        `scope`), in document order."""
        candidates = self.index.names_under(node, name)
        if not candidates:
            return []
        own = scope if scope is not None else self.scopes.scope_of(node)
        found = []
        for each in candidates:
            definition = self.definition_of_store(each)
            if definition is None:
                continue
            where = self.scopes.scope_of(each)
            if definition.kind == "walrus":
                while type(where) in _COMPREHENSIONS:
                    where = self.scopes.scope_of(where)
            if where is own:
                found.append(definition)
        return found

    def _make_def(self, name: cst.Name) -> Optional[Def]:
        parent_of = self.index.parent
        path: List[int] = []
        starred = False
        child: cst.CSTNode = name
        parent = parent_of.get(name)
        while True:
            kind = type(parent)
            if kind is cst.Element or kind is cst.StarredElement:
                starred = starred or kind is cst.StarredElement
                child, parent = parent, parent_of.get(parent)
                continue
            if kind in _UNPACKING:
                if child is not name:
                    position = _position(parent.elements, child)
                    if position is None:
                        return None
                    path.append(position)
                child, parent = parent, parent_of.get(parent)
                continue
            break
        kind = type(parent)
        resolved = None if starred else tuple(reversed(path))
        if kind is cst.AssignTarget:
            if child is not parent.target:
                return None
            statement = parent_of.get(parent)
            return Def("assign", statement, name, statement.value, resolved)
        if kind is cst.AnnAssign:
            if child is not parent.target or parent.value is None:
                return None
            return Def("assign", parent, name, parent.value, resolved)
        if kind is cst.AugAssign:
            if child is not parent.target:
                return None
            return Def("augassign", parent, name, parent.value, ())
        if kind is cst.For or kind is cst.CompFor:
            if child is not parent.target:
                return None
            return Def("for", parent, name, parent.iter, resolved)
        if kind is cst.NamedExpr:
            if child is not parent.target:
                return None
            return Def("walrus", parent, name, parent.value, ())
        if kind is cst.AsName:
            if child is not parent.name:
                return None
            owner = parent_of.get(parent)
            if type(owner) is cst.WithItem:
                return Def("with", owner, name, owner.item, resolved)
            if type(owner) in (cst.ExceptHandler, cst.ExceptStarHandler):
                return Def("except", owner, name)
            return None  # import aliases are bound by their import
        if kind is cst.Del:
            return Def("unknown", parent, name)
        if kind in (cst.MatchAs, cst.MatchStar, cst.MatchMapping):
            return Def("unknown", parent, name)
        return None

    def _target_def(self, loop: cst.For, name: str) -> Optional[Def]:
        for each in self.index.names_under(loop.target, name):  # from the name table
            return self.definition_of_store(each)
        return None

    def _with_def(self, item: cst.WithItem, name: str) -> Optional[Def]:
        if item.asname is None:
            return None
        for each in self.index.names_under(item.asname.name, name):
            return self.definition_of_store(each)
        return None


def _position(sequence, item) -> Optional[int]:
    for position, each in enumerate(sequence):
        if each is item:
            return position
    return None


def _binds(target: cst.CSTNode, name: str) -> bool:
    return type(target) is cst.Name and target.value == name


def _param_named(params: cst.Parameters, name: str) -> Optional[cst.Param]:
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return param
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param and star.name.value == name:
            return star
    return None
