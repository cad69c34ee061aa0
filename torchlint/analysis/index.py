"""The engine's single traversal: a parent map and the nodes of each type in document order.

LibCST's visitor machinery rebuilds every node it visits and costs about as much as the parse
itself; walking the dataclass fields directly costs a few percent of it. The walk is iterative,
so pathologically nested code cannot exhaust the interpreter stack here.
"""

from __future__ import annotations

import dataclasses
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


def _child_fields(node_type: type) -> Tuple[str, ...]:
    fields = _FIELDS.get(node_type)
    if fields is None:
        fields = tuple(
            f.name
            for f in dataclasses.fields(node_type)
            if f.name != "star" and not f.name.startswith(_SKIPPED_PREFIXES)
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
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, cst.CSTNode):
                    yield item


class Index:
    """Parent links and per-type node lists for one module, built in one walk."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.parent: Dict[cst.CSTNode, cst.CSTNode] = {}
        self.by_type: Dict[Type[cst.CSTNode], List[cst.CSTNode]] = defaultdict(list)
        self.order: Dict[cst.CSTNode, int] = {}
        self._walk(module)

    def _walk(self, root: cst.CSTNode) -> None:
        parent = self.parent
        by_type = self.by_type
        order = self.order
        fields_of = _FIELDS
        is_node = _IS_NODE
        stack: List[cst.CSTNode] = [root]
        counter = 0
        while stack:
            node = stack.pop()
            order[node] = counter
            counter += 1
            node_type = type(node)
            by_type[node_type].append(node)
            fields = fields_of.get(node_type) or _child_fields(node_type)
            children: List[cst.CSTNode] = []
            for name in fields:
                value = getattr(node, name)
                value_type = type(value)
                if value_type is tuple or value_type is list:
                    for item in value:
                        item_type = type(item)
                        if is_node.get(item_type) or (item_type not in is_node and _node_type(item_type)):
                            children.append(item)
                elif is_node.get(value_type) or (value_type not in is_node and _node_type(value_type)):
                    children.append(value)
            for child in children:
                parent[child] = node
            children.reverse()
            stack.extend(children)

    def nodes(self, node_type: Type[cst.CSTNode]) -> List[cst.CSTNode]:
        return self.by_type.get(node_type, [])

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        parent = self.parent.get(node)
        while parent is not None:
            yield parent
            parent = self.parent.get(parent)

    def contains(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        if outer is inner:
            return True
        return any(a is outer for a in self.ancestors(inner))

    def descendants(self, node: cst.CSTNode, node_type: Optional[type] = None) -> Iterator[cst.CSTNode]:
        stack = list(iter_children(node))
        while stack:
            current = stack.pop()
            if node_type is None or isinstance(current, node_type):
                yield current
            stack.extend(iter_children(current))
