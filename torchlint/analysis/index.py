"""The engine's single traversal: a parent map and the nodes of each type in document order.

LibCST's visitor machinery rebuilds every node it visits and costs about as much as the parse
itself; walking the dataclass fields directly costs a few percent of it. The walk is iterative,
so pathologically nested code cannot exhaust the interpreter stack here.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, bisect_right
from collections import defaultdict
from typing import Dict, Iterator, List, Optional, Tuple, Type

import libcst as cst

# Fields that only ever hold whitespace or punctuation tokens: nothing a rule asks about.
_SKIPPED_PREFIXES = (
    "whitespace",
    "lpar",
    "rpar",
    "comma",
    "semicolon",
    "colon",
    "equal",
    "dot",
    "header",
    "footer",
    "leading_lines",
    "lines_after_decorators",
    "newline",
    "indent",
    "default_indent",
    "default_newline",
    "encoding",
    "has_trailing_newline",
    "asynchronous",
    "operator",
    "lbracket",
    "rbracket",
    "lbrace",
    "rbrace",
    "arrow",
    "trailing_",
    "first_colon",
    "second_colon",
    "posonly_ind",
    "empty_lines",
    "comment",
)

_FIELDS: Dict[type, Tuple[str, ...]] = {}
_REVERSED_FIELDS: Dict[type, Tuple[str, ...]] = {}  # the walk's order: last field first
_PLAIN_TYPES = (str, bool, int, "str", "bool", "int")


def _child_fields(node_type: type) -> Tuple[str, ...]:
    fields = _FIELDS.get(node_type)
    if fields is None:
        fields = tuple(
            f.name
            for f in dataclasses.fields(node_type)
            if f.name != "star" and not f.name.startswith(_SKIPPED_PREFIXES)
            and f.type not in _PLAIN_TYPES  # `Name.value` and the like hold text, never a node
        )
        _FIELDS[node_type] = fields
    return fields


# isinstance(x, cst.CSTNode) goes through ABCMeta.__instancecheck__ (CSTNode is an ABC), which
# made it the walk's biggest cost; a per-type answer is a dict lookup.
_IS_NODE: Dict[type, bool] = {}


def _node_type(value_type: type) -> bool:
    answer = _IS_NODE[value_type] = issubclass(value_type, cst.CSTNode)
    return answer


def iter_children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    is_node = _IS_NODE
    for name in _FIELDS.get(type(node)) or _child_fields(type(node)):
        value = getattr(node, name)
        value_type = type(value)
        if value_type is tuple or value_type is list:
            for item in value:
                item_type = type(item)
                if is_node.get(item_type) or (item_type not in is_node and _node_type(item_type)):
                    yield item
        elif is_node.get(value_type) or (value_type not in is_node and _node_type(value_type)):
            yield value


class _Parents:
    """`get(node)`: the parent of `node`, like a dict keyed by node. Stored by `id(node)`: LibCST
    nodes hash through a Python-level `__hash__`, which made hashing the walk's biggest cost."""

    __slots__ = ("_number", "_parent_numbers", "_preorder")

    def __init__(self, number: Dict[int, int], parent_numbers: List[int], preorder: list) -> None:
        self._number = number
        self._parent_numbers = parent_numbers
        self._preorder = preorder

    def get(self, node, default=None):
        position = self._number.get(id(node))
        if position is None:
            return default
        above = self._parent_numbers[position]
        return default if above < 0 else self._preorder[above]

    def __getitem__(self, node):
        found = self.get(node)
        if found is None:
            raise KeyError(node)
        return found

    def __contains__(self, node) -> bool:
        return self.get(node) is not None


class _Order:
    """`order[node]`: the pre-order number of `node`, like a dict keyed by node."""

    __slots__ = ("_number",)

    def __init__(self, number: Dict[int, int]) -> None:
        self._number = number

    def get(self, node, default=None):
        return self._number.get(id(node), default)

    def __getitem__(self, node) -> int:
        return self._number[id(node)]

    def __contains__(self, node) -> bool:
        return id(node) in self._number


class Index:
    """Parent links, pre-order numbers and per-type node lists for one module, built in one walk.

    `parent.get(node)` and `order[node]` behave like dicts keyed by node."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.by_type: Dict[Type[cst.CSTNode], List[cst.CSTNode]] = defaultdict(list)
        self.preorder: List[cst.CSTNode] = []
        self._number: Dict[int, int] = {}
        self._parent_numbers: List[int] = []
        self._ends: Optional[List[int]] = None
        self._position_lists: Dict[type, List[int]] = {}
        self._name_positions: Dict[str, List[int]] = {}
        self._sibling_starts: Dict[int, Optional[List[int]]] = {}
        self._callees: Optional[Dict[str, List[cst.Call]]] = None
        self._walk(module)
        # For the hot upward walks (scope, loops, grad mode): from `parent_number(node)`,
        # `above[n]` is the next parent's pre-order number (-1 past the module); climbing by
        # numbers hashes nothing.
        self.above = self._parent_numbers
        self.parent = _Parents(self._number, self._parent_numbers, self.preorder)
        self.order = _Order(self._number)

    def _walk(self, root: cst.CSTNode) -> None:
        by_type = self.by_type
        preorder = self.preorder
        parent_numbers = self._parent_numbers
        number = self._number
        fields_of = _REVERSED_FIELDS
        is_node = _IS_NODE
        # Two parallel stacks (nodes, their parents' numbers): no tuple per node, nothing hashed
        # to link a node to its parent. Children are pushed last field first, each sequence
        # backwards, so that they pop in document order with no list built per node.
        nodes: List[cst.CSTNode] = [root]
        aboves: List[int] = [-1]
        pop_node = nodes.pop
        pop_above = aboves.pop
        push_node = nodes.append
        push_above = aboves.append
        record = preorder.append
        link = parent_numbers.append
        position = -1
        name_type = cst.Name
        names: Dict[str, List[int]] = {}
        self._name_positions = names  # spelling -> pre-order numbers of the Names spelled so
        name_aboves: List[int] = []
        self._name_aboves = name_aboves  # the parent's number of each Name, in document order
        note_name_above = name_aboves.append
        while nodes:
            node = pop_node()
            parent_number = pop_above()
            link(parent_number)
            record(node)
            position += 1
            number[id(node)] = position
            node_type = type(node)
            by_type[node_type].append(node)
            fields = fields_of.get(node_type)
            if fields is None:
                fields = fields_of[node_type] = _child_fields(node_type)[::-1]
            if not fields:  # a leaf (Name, Integer, SimpleString, ...)
                if node_type is name_type:
                    note_name_above(parent_number)
                    spelled = names.get(node.value)
                    if spelled is None:
                        names[node.value] = [position]
                    else:
                        spelled.append(position)
                continue
            for name in fields:
                value = getattr(node, name)
                value_type = type(value)
                if value_type is tuple or value_type is list:
                    for item in reversed(value):
                        item_type = type(item)
                        if is_node.get(item_type) or (item_type not in is_node and _node_type(item_type)):
                            push_node(item)
                            push_above(position)
                elif is_node.get(value_type) or (value_type not in is_node and _node_type(value_type)):
                    push_node(value)
                    push_above(position)

    def parent_number(self, node: cst.CSTNode) -> int:
        """The pre-order number of `node`'s parent: where an upward walk over `above` starts
        (-1 for the module itself or a node outside this module)."""
        number = self._number.get(id(node))
        return -1 if number is None else self._parent_numbers[number]

    def name_parents(self) -> List[cst.CSTNode]:
        """The parent of each of `nodes(cst.Name)`, in the same order (recorded by the walk)."""
        preorder = self.preorder
        return [preorder[above] for above in self._name_aboves]

    def parents_of(self, nodes: List[cst.CSTNode]) -> List[Optional[cst.CSTNode]]:
        """The parent of each of `nodes` (all of this module), in one pass."""
        number = self._number
        parent_numbers = self._parent_numbers
        preorder = self.preorder
        return [None if above < 0 else preorder[above]
                for above in [parent_numbers[number[id(node)]] for node in nodes]]

    def number(self, node: cst.CSTNode) -> Optional[int]:
        """`node`'s pre-order number, or None for a node outside this module."""
        return self._number.get(id(node))

    def nodes(self, node_type: Type[cst.CSTNode]) -> List[cst.CSTNode]:
        return self.by_type.get(node_type, [])

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        preorder = self.preorder
        above = self._parent_numbers
        number = self._number.get(id(node))
        up = -1 if number is None else above[number]
        while up >= 0:  # by pre-order numbers: no lookup per step
            yield preorder[up]
            up = above[up]

    def contains(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        if outer is inner:
            return True
        return any(a is outer for a in self.ancestors(inner))

    def descendants(self, node: cst.CSTNode, node_type=None) -> Iterator[cst.CSTNode]:
        """The nodes under `node` (not `node` itself) in document order, optionally only those
        of `node_type` (a type or a tuple of types)."""
        start = self._number.get(id(node))
        concrete = _concrete_types(node_type)
        if start is None or concrete is None:
            yield from self._walk_descendants(node, node_type)
            return
        # A subtree is a contiguous run of the pre-order numbering: per-type lists are sorted
        # by it, so the nodes of a type under `node` are one slice, found by bisection.
        end = (self._ends or self._subtree_end())[start]
        if len(concrete) == 1:
            nodes = self.by_type.get(concrete[0])
            if nodes:
                positions = self._positions(concrete[0])
                yield from nodes[bisect_right(positions, start):bisect_right(positions, end)]
            return
        found = []
        for each in concrete:
            nodes = self.by_type.get(each)
            if nodes:
                positions = self._positions(each)
                found.extend(nodes[bisect_right(positions, start):bisect_right(positions, end)])
        number = self._number
        found.sort(key=lambda each: number[id(each)])
        yield from found

    def mentions(self, node: cst.CSTNode, name: str) -> bool:
        """Whether a `Name` spelled `name` is `node` or lies under it (True when unknown)."""
        start = self._number.get(id(node))
        if start is None:
            return True
        positions = self._name_table().get(name)
        if not positions:
            return False
        first = bisect_left(positions, start)
        return first < len(positions) and positions[first] <= (self._ends or self._subtree_end())[start]

    def mentioning(self, siblings, name: str, end: Optional[int] = None) -> Optional[Iterator[int]]:
        """The indexes, last first, of those of `siblings[:end]` that `mentions(sibling, name)`;
        None when one of them is not of this module. `siblings` is a sequence a node holds (a
        block's statements, kept by id): a walk back over a long module body asks this for each
        name instead of testing every statement before the use."""
        key = id(siblings)
        starts = self._sibling_starts.get(key, ())
        if starts == ():
            number = self._number
            starts = self._sibling_starts[key] = [number.get(id(each), -1) for each in siblings]
            if -1 in starts:
                starts = self._sibling_starts[key] = None
        if starts is None:
            return None
        return self._mentioning(starts, self._name_positions.get(name), len(starts) if end is None else end)

    def _mentioning(self, starts: List[int], positions: Optional[List[int]], end: int) -> Iterator[int]:
        if not positions or not end:
            return
        ends = self._ends or self._subtree_end()
        low = bisect_left(positions, starts[0])
        at_most = bisect_right(positions, ends[starts[end - 1]]) - 1
        while at_most >= low:
            position = positions[at_most]
            at = bisect_right(starts, position, 0, end) - 1
            last = ends[starts[at]]
            if position > last:  # between two siblings (nothing a block holds): go on inside the one before
                at_most = bisect_right(positions, last, low, at_most) - 1
                continue
            yield at
            # The sibling's other mentions say nothing more: go on before it.
            at_most = bisect_left(positions, starts[at], low, at_most) - 1

    def names_under(self, node: cst.CSTNode, name: str) -> List[cst.Name]:
        """The `Name` nodes spelled `name` that are `node` or lie under it, in document order."""
        start = self._number.get(id(node))
        if start is None:
            return [each for each in ([node] if type(node) is cst.Name else self._walk_descendants(node, cst.Name))
                    if each.value == name]
        positions = self._name_table().get(name)
        if not positions:
            return []
        preorder = self.preorder
        end = (self._ends or self._subtree_end())[start]
        return [preorder[position] for position in positions[bisect_left(positions, start):bisect_right(positions, end)]]

    def names_spelled(self, name: str) -> List[cst.Name]:
        """Every `Name` node spelled `name`, in document order."""
        preorder = self.preorder
        return [preorder[position] for position in self._name_table().get(name, ())]

    def names_spelled_any(self, spellings) -> List[cst.Name]:
        """Every `Name` node spelled one of `spellings`, in document order."""
        table = self._name_table()
        positions = [p for spelling in spellings for p in table.get(spelling, ())]
        positions.sort()
        preorder = self.preorder
        return [preorder[position] for position in positions]

    def attributes_named(self, spellings) -> List[cst.Attribute]:
        """Every `Attribute` whose member is spelled one of `spellings` (`x.solve` for "solve"),
        in document order."""
        attribute = cst.Attribute
        found = []
        parent = self.parent.get
        for name in self.names_spelled_any(spellings):
            above = parent(name)
            if type(above) is attribute and above.attr is name:
                found.append(above)
        return found

    def calls_named(self, spellings) -> List[cst.Call]:
        """Every call `name(...)` or `<x>.name(...)` with `name` one of `spellings`, in document
        order: what a rule about `.step()` or `.append()` looks at, found from the name table
        instead of by looking at every call."""
        table = self.callee_table()
        lists = [table[spelled] for spelled in spellings if spelled in table]
        if not lists:
            return []
        if len(lists) == 1:
            return list(lists[0])
        found = [call for calls in lists for call in calls]
        number = self._number
        found.sort(key=lambda call: number[id(call)])
        return found

    def callee_table(self) -> Dict[str, List[cst.Call]]:
        """Spelling -> the calls `name(...)` and `<x>.name(...)` spelled so, in document order:
        one pass over the calls per file, which every rule with `called_names` and the value
        model's call sites read."""
        table = self._callees
        if table is None:
            table = self._callees = {}
            name_type, attribute_type = cst.Name, cst.Attribute
            for call in self.by_type.get(cst.Call, ()):
                func = call.func
                kind = type(func)
                spelled = func.value if kind is name_type else func.attr.value if kind is attribute_type else None
                if spelled is not None:
                    calls = table.get(spelled)
                    if calls is None:
                        table[spelled] = [call]
                    else:
                        calls.append(call)
        return table

    def _name_table(self) -> Dict[str, List[int]]:
        """Spelling -> pre-order numbers of the `Name` nodes spelled so, in document order (built
        by the walk)."""
        return self._name_positions

    def _walk_descendants(self, node: cst.CSTNode, node_type) -> Iterator[cst.CSTNode]:
        stack = list(iter_children(node))
        stack.reverse()
        while stack:
            current = stack.pop()
            if node_type is None or isinstance(current, node_type):
                yield current
            children = list(iter_children(current))
            children.reverse()
            stack.extend(children)

    def _subtree_end(self) -> List[int]:
        """For each pre-order number, the last pre-order number inside that node's subtree."""
        if self._ends is None:
            parent_numbers = self._parent_numbers
            ends = list(range(len(parent_numbers)))
            for position in range(len(parent_numbers) - 1, 0, -1):
                above = parent_numbers[position]
                if ends[position] > ends[above]:
                    ends[above] = ends[position]
            self._ends = ends
        return self._ends

    def _positions(self, node_type: type) -> List[int]:
        positions = self._position_lists.get(node_type)
        if positions is None:
            number = self._number
            positions = self._position_lists[node_type] = [number[id(n)] for n in self.by_type[node_type]]
        return positions


_CONCRETE: Dict[object, Optional[Tuple[type, ...]]] = {}


def _concrete_types(node_type) -> Optional[Tuple[type, ...]]:
    """`node_type` as a tuple of node classes that have no subclasses, or None when it names an
    abstract class (the bisection only works on exact per-type lists)."""
    if node_type is None:
        return None
    try:
        return _CONCRETE[node_type]
    except KeyError:
        pass
    types = node_type if isinstance(node_type, tuple) else (node_type,)
    answer: Optional[Tuple[type, ...]] = types
    for each in types:
        if not (isinstance(each, type) and issubclass(each, cst.CSTNode)) or each.__subclasses__():
            answer = None
    _CONCRETE[node_type] = answer
    return answer
