"""Positions of a few nodes, without LibCST's PositionProvider.

PositionProvider records a range for every node of the module and costs more than the parse
itself; a linter needs positions only for the handful of nodes it reports, and only in files
that have findings. This runs LibCST's own code generation once, notes the position where each
requested node starts and ends, and stops as soon as the last one is known.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Set, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState

_NEWLINE = re.compile(r"\r\n|\r|\n")

# (line 1-based, column 0-based in characters)
Point = Tuple[int, int]


class _AllFound(Exception):
    pass


class _Nothing:
    """A context manager that does nothing (cheaper than `contextlib.nullcontext()` per use)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> bool:
        return False


_NOTHING = _Nothing()


@dataclass(frozen=False)
class PlainCodegenState(CodegenState):
    """LibCST's code generation state without the per-node position bookkeeping it never uses
    when only the text is wanted (its own `record_syntactic_position` is a generator-based
    context manager, entered for every Name and operator generated)."""

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        return _NOTHING


def block_indents(module: cst.Module, blocks: Iterable[cst.CSTNode]) -> List[str]:
    """The indent tokens a code generation state holds inside `blocks` (a node's ancestors,
    innermost first): one per `IndentedBlock`, outermost first, as LibCST's own generation of the
    whole module pushes them."""
    return [module.default_indent if block.indent is None else block.indent
            for block in reversed(list(blocks)) if type(block) is cst.IndentedBlock]


def code_for_node(module: cst.Module, node: cst.CSTNode) -> str:
    """What `module.code_for_node(node)` gives, faster."""
    state = PlainCodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    node._codegen(state)
    return "".join(state.tokens)


@dataclass(frozen=False)
class _TargetedCodegenState(CodegenState):
    targets: Set[cst.CSTNode] = field(default_factory=set)
    # Asked for every node generated: by id, since LibCST nodes hash through a Python method.
    target_ids: Set[int] = field(default_factory=set)
    ranges: Dict[cst.CSTNode, Tuple[Point, Point]] = field(default_factory=dict)
    syntactic: Set[cst.CSTNode] = field(default_factory=set)
    starts: Dict[cst.CSTNode, Point] = field(default_factory=dict)
    consumed: int = 0
    line: int = 1
    column: int = 0

    def here(self) -> Point:
        tokens = self.tokens
        line, column = self.line, self.column
        for token in tokens[self.consumed:]:
            newlines = token.count("\n") + token.count("\r") - token.count("\r\n")
            if newlines:
                line += newlines
                column = len(token) - max(token.rfind("\n"), token.rfind("\r")) - 1
            else:
                column += len(token)
        self.consumed = len(tokens)
        self.line, self.column = line, column
        return line, column

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.target_ids and node not in self.starts:
            self.starts[node] = self.here()

    def after_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.target_ids and node not in self.syntactic:
            self._finish(node, self.starts.get(node, self.here()), self.here())

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        # LibCST asks for every Name, operator and call generated; a generator-based context
        # manager per node was a third of the cost of finding a file's positions.
        if id(node) not in self.target_ids:
            return _NOTHING
        return self._recorded(node)

    @contextmanager
    def _recorded(self, node) -> Iterator[None]:
        start = self.here()
        try:
            yield
        finally:
            self.syntactic.add(node)
            self._finish(node, start, self.here())

    def _finish(self, node: cst.CSTNode, start: Point, end: Point) -> None:
        if node not in self.ranges:
            self.ranges[node] = (start, end)
            if len(self.ranges) == len(self.targets):
                raise _AllFound


def node_ranges(module: cst.Module, nodes: Iterable[cst.CSTNode], index=None,
                text: Optional[str] = None) -> Dict[cst.CSTNode, Tuple[Point, Point]]:
    """The syntactic (start, end) of each node in `nodes`, as PositionProvider would give them.

    With the module's `index` (parent links) and the `text` it was parsed from, only the
    statement around each node is generated, and where it stands is found in the text. Without
    the text, the top-level statements that hold no requested node are generated without the
    bookkeeping, as plain text whose lines are counted."""
    targets = set(nodes)
    if not targets:
        return {}
    if index is not None and text is not None:
        found = _ranges_in_text(module, targets, index, text)
        if found is not None:
            return found
    state = _targeted_state(module, targets)
    holding = _statements_holding(module, targets, index) if index is not None else None
    try:
        if holding is None:
            module._codegen(state)
        else:
            for line in module.header:
                line._codegen(state)
            for statement in module.body:
                if id(statement) in holding:
                    statement._codegen(state)
                else:
                    plain = PlainCodegenState(default_indent=module.default_indent,
                                              default_newline=module.default_newline)
                    statement._codegen(plain)
                    state.tokens.append("".join(plain.tokens))  # `here()` counts its lines
    except _AllFound:
        pass
    return state.ranges


def _targeted_state(module: cst.Module, targets: Set[cst.CSTNode]) -> _TargetedCodegenState:
    return _TargetedCodegenState(default_indent=module.default_indent, default_newline=module.default_newline,
                                 targets=targets, target_ids={id(node) for node in targets})


def _ranges_in_text(module: cst.Module, targets: Set[cst.CSTNode], index, text: str
                    ) -> Optional[Dict[cst.CSTNode, Tuple[Point, Point]]]:
    """The ranges of `targets`, each found by generating only the innermost statement around it
    (with its blocks' indentation, so that its code is the file's text) up to the node, and
    finding that code in `text`. A statement's code that occurs more than once is not proof of
    where it stands: the enclosing statement is tried, and None (generate the module) when even
    a top-level statement is ambiguous or a node lies outside the module's statements."""
    parent = index.parent.get
    statement_types = _STATEMENT_TYPES
    groups: Dict[int, Tuple[List[cst.CSTNode], List[cst.CSTNode]]] = {}
    for node in targets:
        chain: List[cst.CSTNode] = []  # the statements around `node`, innermost first
        current: Optional[cst.CSTNode] = node
        while current is not None and current is not module:
            if isinstance(current, statement_types):
                chain.append(current)
            current = parent(current)
        if current is not module or not chain:
            return None
        group = groups.get(id(chain[0]))
        if group is None:
            groups[id(chain[0])] = (chain, [node])
        else:
            group[1].append(node)
    ranges: Dict[cst.CSTNode, Tuple[Point, Point]] = {}
    for chain, nodes in groups.values():
        for statement in chain:
            found = _ranges_in_statement(module, statement, nodes, index, text)
            if found is not None:
                ranges.update(found)
                break
        else:
            return None
    return ranges


def _ranges_in_statement(module: cst.Module, statement: cst.CSTNode, nodes: List[cst.CSTNode], index,
                         text: str) -> Optional[Dict[cst.CSTNode, Tuple[Point, Point]]]:
    state = _targeted_state(module, set(nodes))
    state.indent_tokens = block_indents(module, index.ancestors(statement))
    above = index.parent.get(statement)
    try:
        if type(statement) is cst.If and type(above) is cst.If and above.orelse is statement:
            statement._codegen(state, is_elif=True)  # spelled `elif` only by the `if` it continues
        else:
            statement._codegen(state)
    except _AllFound:
        pass
    if len(state.ranges) != len(nodes):
        return None
    code = "".join(state.tokens)  # the statement's code up to the last node's end
    start = text.find(code)
    if start < 0 or text.find(code, start + 1) >= 0:
        return None
    if start and text[start - 1] not in "\r\n":  # a statement starts a line
        return None
    lines = text.count("\n", 0, start) + text.count("\r", 0, start) - text.count("\r\n", 0, start)
    return {node: ((line + lines, column), (end_line + lines, end_column))
            for node, ((line, column), (end_line, end_column)) in state.ranges.items()}


_STATEMENT_TYPES = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


def _statements_holding(module: cst.Module, targets: Set[cst.CSTNode], index) -> Optional[Set[int]]:
    """The ids of the top-level statements under which the targets lie, or None when one does
    not lie under a statement of `module` (the module itself, a node of another tree)."""
    parent = index.parent.get
    holding: Set[int] = set()
    for node in targets:
        above = parent(node)
        while above is not None and above is not module:
            node, above = above, parent(above)
        if above is not module:
            return None
        holding.add(id(node))
    return holding


def line_starts(text: str) -> List[int]:
    """Offsets where each line of `text` starts (for turning positions into offsets)."""
    return [0] + [match.end() for match in _NEWLINE.finditer(text)]


def offset_of(starts: List[int], row: int, column0: int) -> Optional[int]:
    if row - 1 >= len(starts):
        return None
    return starts[row - 1] + column0
