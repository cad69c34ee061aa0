"""Facts about autograd for TL001 (in-place writes into tensors autograd needs) and TL006
(activations cached on the module): which calls write a tensor in place, which tensor a write
reaches through views, whether grad may be off for a write, whether a forward's input is a
tensor, and the small edits their fixes make.

What a tensor *is* (a leaf that requires grad, a tensor with a graph, a view of an argument)
comes from the value model (`Semantic.values`); this module only asks it. Nothing here imports
torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.index import iter_children
from torchlint.analysis.interpreter import GRAD_OFF, GRAD_UNKNOWN
from torchlint.analysis.scopes import dotted_name
from torchlint.analysis.semantic import method_call, method_call_in
from torchlint.analysis.value import CONTAINER, INPUT, Value
from torchlint.positions import code_for_node

if TYPE_CHECKING:
    from torchlint.analysis.semantic import Semantic

INPLACE_WITH_OUT_OF_PLACE = api.INPLACE_WITH_OUT_OF_PLACE
INPLACE_ONLY = api.INPLACE_ONLY
INPLACE_METHODS = api.INPLACE_METHODS
VIEW_METHODS = api.VIEW_METHODS
VIEW_ATTRIBUTES = api.VIEW_ATTRIBUTES


# -- in-place operations -----------------------------------------------------------------------
def inplace_method(sem: "Semantic", call: cst.CSTNode) -> Optional[str]:
    """The in-place tensor method `call` invokes (`x.add_(y)` -> "add_"), or None. Functions of
    imported modules (`nn.init.zeros_(w)`, `torch.relu_(x)`) do not count."""
    if not method_call_in(call, INPLACE_METHODS):
        return None
    receiver = call.func.value
    if isinstance(receiver, (cst.Name, cst.Attribute)) and sem.qualified_name(receiver) is not None:
        return None
    return call.func.attr.value


def is_basic_index(node: cst.Subscript) -> bool:
    """`t[0]`, `t[:, 1:3]`, `t[..., None]`: indexing that returns a view (no tensor/list index)."""
    for element in node.slice:
        inner = element.slice
        if isinstance(inner, cst.Slice):
            continue
        value = inner.value
        if isinstance(value, cst.UnaryOperation):
            value = value.expression
        if isinstance(value, (cst.Integer, cst.Ellipsis)):
            continue
        if isinstance(value, cst.Name) and value.value == "None":
            continue
        return False
    return True


def view_base(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The tensor whose memory `expr` certainly shares: `x[0].view(-1).T` -> `x`."""
    while True:
        if isinstance(expr, cst.Subscript) and is_basic_index(expr):
            expr = expr.value
        elif isinstance(expr, cst.Attribute) and expr.attr.value in VIEW_ATTRIBUTES:
            expr = expr.value
        elif method_call_in(expr, VIEW_METHODS):
            expr = expr.func.value
        else:
            return expr


def mutation_target(sem: "Semantic", node: cst.CSTNode) -> Optional[Tuple[str, cst.BaseExpression]]:
    """What `node` writes in place: ("method", receiver) for `x.add_(y)`, ("augassign", target) for
    `x += y`, ("item", subscripted) for `x[i] = y` (also `x[i] += y`)."""
    if type(node) is cst.Call:
        if inplace_method(sem, node) is None:
            return None
        return "method", node.func.value
    if type(node) is cst.AugAssign:
        target = node.target
        if isinstance(target, cst.Subscript):
            return "item", target.value
        return "augassign", target
    if isinstance(node, cst.AssignTarget):
        if type(node.target) is cst.Subscript:
            return "item", node.target.value
    return None


def requires_grad_turned_off(sem: "Semantic", expr: cst.BaseExpression, node: cst.CSTNode) -> bool:
    """Whether code near `node` may have switched grad off for `expr`: `p.requires_grad = False`,
    `p.requires_grad_(False)` in the same function, `model.requires_grad_(False)` on the module a
    parameter loop iterates, or a guard `if not p.requires_grad:` around `node`."""
    name = dotted_name(expr)
    if name is None:
        return True
    scope = sem.function_of(node) or sem.module
    owners = {name}
    if isinstance(expr, cst.Name):
        for binding in sem.scopes.lookup(expr.value, expr) or ():
            if binding.kind == "for" and isinstance(binding.node, cst.For):
                iterable = binding.node.iter
                if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.args:
                    iterable = iterable.args[0].value
                if method_call(iterable):
                    owner = dotted_name(iterable.func.value)
                    if owner is not None:
                        owners.add(owner)
    # `fused.weight` of a module switched off as a whole in the same function
    # (`fused.requires_grad_(False)`, `fused = nn.Conv2d(...).requires_grad_(False)`: layer fusion).
    modules = {name[:end] for end in range(len(name)) if name[end] == "."}
    function = sem.function_of(node)
    for assign in sem.index.descendants(scope, cst.Assign):
        for target in assign.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and t.attr.value == "requires_grad" and dotted_name(t.value) == name \
                    and _may_run_before(sem, assign, node):
                return True
            # `fused = nn.Conv2d(...).requires_grad_(False)`: made without grad.
            if dotted_name(t) in modules and method_call(assign.value, "requires_grad_") and assign.value.args \
                    and not _is_true_literal(assign.value.args[0].value) and _may_run_before(sem, assign, node):
                return True
    for call in sem.index.nodes(cst.Call):
        if not method_call(call, "requires_grad_"):
            continue
        owner = dotted_name(call.func.value)
        if owner in owners or owner in modules and sem.function_of(call) is function:
            if call.args and not _is_true_literal(call.args[0].value) and _may_run_before(sem, call, node):
                return True
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            break
        if isinstance(ancestor, (cst.If, cst.While)) and _mentions_attribute(ancestor.test, "requires_grad"):
            positive = _positive_requires_grad_test(ancestor.test)
            if not (positive and child is ancestor.body):
                return True
        if isinstance(ancestor, cst.IfExp) and _mentions_attribute(ancestor.test, "requires_grad"):
            return True
        child = ancestor
    return False


def _may_run_before(sem: "Semantic", other: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Whether `other` may run before `node`: it is elsewhere (another function), earlier in the
    same function, or in a loop around both (`E.requires_grad = False` after the write that
    raises does not help)."""
    if sem.function_of(other) is not sem.function_of(node):
        return True
    if sem.index.order[other] < sem.index.order[node]:
        return True
    return any(sem.index.contains(loop, other) for loop in sem.enclosing_loops(node))


def _is_true_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _mentions_attribute(node: cst.CSTNode, attr: str) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Attribute) and current.attr.value == attr:
            return True
        if isinstance(current, cst.Name) and attr in current.value:
            return True
        stack.extend(iter_children(current))
    return False


def _positive_requires_grad_test(test: cst.BaseExpression) -> bool:
    """`p.requires_grad` or `p.requires_grad and ...`: the body runs only when grad is on."""
    if isinstance(test, cst.Attribute) and test.attr.value == "requires_grad":
        return True
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _positive_requires_grad_test(test.left) or _positive_requires_grad_test(test.right)
    return False


def grad_is_off(sem: "Semantic", node: cst.CSTNode) -> bool:
    """`node` runs with grad off, or may: a `no_grad`/`inference_mode` block or decorator, a
    `torch.autograd.Function` method, `set_grad_enabled(flag)`, or a function some of whose callers
    in this file run it under no_grad."""
    return sem.values.grad_mode(node) in (GRAD_OFF, GRAD_UNKNOWN)


# -- inputs of forward -------------------------------------------------------------------------
def forward_method(sem: "Semantic", node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The `forward` of an nn.Module whose own body holds `node` (not a nested def)."""
    function = sem.function_of(node)
    if function is None or function.name.value != "forward":
        return None
    klass = sem.class_of_method(function)
    if klass is None or not sem.is_module_class(klass):
        return None
    return function


def forward_input(sem: "Semantic", value: Value, node: cst.CSTNode) -> Optional[cst.Param]:
    """The parameter of the `forward` holding `node` whose memory `value` shares (the argument
    itself, a plain copy or a view of it), other than `self`."""
    method = forward_method(sem, node)
    param = value.alias
    if method is None or type(param) is not cst.Param:
        return None
    params = _params(method)
    if param not in params or param is params[0]:
        return None
    return param


def _params(function: cst.FunctionDef) -> List[cst.Param]:
    params = function.params
    return list(params.posonly_params) + list(params.params) + list(params.kwonly_params)


def param_is_tensor(sem: "Semantic", param: cst.Param, method: cst.FunctionDef) -> bool:
    """Whether a parameter is plausibly a tensor: the value model says so (an annotation, what
    the callers pass), or it is an argument of unknown type used like a tensor in the body
    (`x.shape`, `x.size()`, `x.view(...)`)."""
    value = sem.values.param_value(param, sem.values.generic_frame(method))
    if value.is_tensor:
        return True
    if value.kind != INPUT:
        return False
    name = param.name.value
    for attribute in sem.index.descendants(method.body, cst.Attribute):
        if attribute.attr.value in api.TENSOR_EVIDENCE and isinstance(attribute.value, cst.Name) \
                and attribute.value.value == name:
            return True
    return False


def guarded_by_inplace_flag(sem: "Semantic", node: cst.CSTNode) -> bool:
    """Inside `if self.inplace:` / `x.mul_(g) if inplace else x * g`: in-place by the caller's
    choice."""
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)) and _mentions_attribute(ancestor.test, "inplace"):
            return True
        if isinstance(ancestor, cst.BooleanOperation) and child is ancestor.right and \
                _mentions_attribute(ancestor.left, "inplace"):
            return True
        child = ancestor
    return False


# -- tensors cached on the module -----------------------------------------------------------------
def caches_graph(value: Value) -> bool:
    """A tensor that may carry the autograd graph of the call that made it (not a leaf, not
    detached, not made under no_grad)."""
    if value.kind == CONTAINER:
        items = value.items if value.items else ((value.element,) if value.element is not None else ())
        return bool(items) and any(caches_graph(item) for item in items)
    return value.is_tensor and value.may_have_graph


def is_store(sem: "Semantic", node: cst.CSTNode) -> bool:
    """`node` is written, not read: an assignment target (or inside a tuple target), an
    augmented-assignment target, `del node`."""
    child = node
    parent = sem.parent(node)
    while isinstance(parent, (cst.Element, cst.Tuple, cst.List, cst.StarredElement)):
        child, parent = parent, sem.parent(parent)
    if isinstance(parent, cst.AssignTarget) and parent.target is child:
        return True
    if isinstance(parent, (cst.AugAssign, cst.AnnAssign)) and parent.target is child:
        return True
    return isinstance(parent, cst.Del)


def self_attribute(node: cst.BaseExpression) -> Optional[cst.Attribute]:
    """`self.attr` itself, or None."""
    if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self":
        return node
    return None


def assigned_pairs(target: cst.BaseExpression, value: cst.BaseExpression, path: Tuple[int, ...] = ()
                   ) -> Iterator[Tuple[cst.BaseExpression, Optional[cst.BaseExpression], Optional[Tuple[int, ...]]]]:
    """(target element, its own value expression, its index path in the assigned value) for each
    element an assignment binds: `a, self.h = x, y` gives (`a`, `x`, (0,)), (`self.h`, `y`, (1,));
    `out, self.h = self.rnn(x)` gives (`self.h`, None, (1,)). The path is None under a starred
    target."""
    if type(target) in (cst.Tuple, cst.List):
        starred = any(isinstance(e, cst.StarredElement) for e in target.elements)
        literal = isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements) \
            and not starred and not any(isinstance(e, cst.StarredElement) for e in value.elements)
        for position, element in enumerate(target.elements):
            inner = value.elements[position].value if literal else None
            yield from assigned_pairs(element.value, inner, None if starred else path + (position,))
        return
    yield target, value, path


# -- fixes -------------------------------------------------------------------------------------
def statement_indent(sem: "Semantic", statement: cst.CSTNode) -> str:
    """The indentation LibCST writes before `statement`: the indents of its enclosing blocks."""
    parts = []
    for ancestor in sem.ancestors(statement):
        if isinstance(ancestor, cst.IndentedBlock):
            parts.append(ancestor.indent if ancestor.indent is not None else sem.module.default_indent)
    return "".join(reversed(parts))


def torch_is_imported(sem: "Semantic", node: cst.CSTNode) -> bool:
    """Whether the name `torch` at `node` is the torch module."""
    bindings = sem.scopes.lookup("torch", node)
    return bool(bindings) and all(b.kind == "import" and b.qualified_name == "torch" for b in bindings)


def _has_multiline_string(sem: "Semantic", node: cst.CSTNode) -> bool:
    for kind in (cst.SimpleString, cst.FormattedString):
        for string in sem.index.descendants(node, kind):
            if "\n" in code_for_node(sem.module, string) or "\r" in code_for_node(sem.module, string):
                return True
    return False


def wrap_in_no_grad(sem: "Semantic", statement: cst.CSTNode) -> Optional[str]:
    """Replacement text for `statement` (a `for` loop, or the only small statement of its line)
    that runs it inside `with torch.no_grad():`, re-indented one level; None when that cannot be
    done without changing text that indentation matters to (a multi-line string)."""
    if not torch_is_imported(sem, statement) or _has_multiline_string(sem, statement):
        return None
    indent = statement_indent(sem, statement)
    unit = sem.module.default_indent
    newline = sem.module.default_newline
    if isinstance(statement, cst.BaseCompoundStatement):
        code = code_for_node(sem.module, statement.with_changes(leading_lines=()))
        lines = code.splitlines(keepends=True)
        body = "".join(indent + unit + line if line.strip() else line for line in lines)
        if not body.endswith(("\n", "\r")):
            body += newline
        return f"with torch.no_grad():{newline}{body}"
    if isinstance(statement, cst.BaseSmallStatement):
        line = sem.parent(statement)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        code = code_for_node(sem.module, statement.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)).strip()
        if "\n" in code or "\r" in code:
            return None
        return f"with torch.no_grad():{newline}{indent}{unit}{code}"
    return None
