"""A module class's layers, read from its `__init__`, and its `forward` interpreted over shapes.

The layers are what `__init__` assigns to `self` (`self.conv1 = nn.Conv2d(3, 6, 5)`), with their
constructor arguments evaluated where the code fixes them: literals, arithmetic, the constructor's
own parameters (bound from the call that builds the model, or their defaults), module-level
constants and attributes `__init__` set before. `nn.Sequential` and `nn.ModuleList` keep their
layers in order; an instance of another of the project's module classes is interpreted in turn.

`forward` is then run over abstract values: a tensor's shape (each dimension a `dims.Dim`), a
tuple, a number (a dimension), a layer, or unknown. Straight-line code, `if`s whose condition the
constructor decides, loops over a `ModuleList` and calls of the module's other methods are
followed; anything else makes the names it binds unknown. Each layer checks its input against its
contract (`contracts`); a misfit is recorded once with the shapes that led to it (the trace).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis.tensor_shape import contracts as C
from torchlint.analysis.tensor_shape import dims as D
from torchlint.analysis.tensor_shape import ops
from torchlint.analysis.tensor_shape.callees import project_definition
from torchlint.analysis.tensor_shape.values import Num, Tensor, Tup

UNKNOWN = C.UNKNOWN
_MAX_DEPTH = 6
BATCH = D.symbol("N")  # the batch a DataLoader (or an image tensor) puts first
_SHAPE_KEEPING_INPLACE = frozenset({"add_", "sub_", "mul_", "div_", "clamp_", "relu_", "zero_", "fill_",
                                    "copy_", "normal_", "uniform_", "masked_fill_", "requires_grad_", "pow_",
                                    "sigmoid_", "tanh_", "exp_", "abs_", "neg_", "sqrt_", "detach_"})
_SEQUENCE_LAYERS = frozenset({"RNN", "LSTM", "GRU", "MultiheadAttention", "TransformerEncoderLayer",
                              "TransformerDecoderLayer"})


# -- abstract values ---------------------------------------------------------------------------

@dataclass
class Layer:
    """A torch layer built in `__init__`: `name` is the attribute (`conv1`), `node` the call."""

    contract: C.Contract
    arguments: Dict[str, Any]
    node: cst.Call
    name: str
    semantic: Any


@dataclass
class Sequence_:
    layers: List[Any]
    node: cst.CSTNode
    name: str
    kind: str = "Sequential"  # or "ModuleList"


@dataclass
class Submodule:
    """An instance of a module class of the project, with its constructor's arguments."""

    klass: cst.ClassDef
    semantic: Any
    arguments: Dict[str, Any]
    node: cst.CSTNode
    name: str


MODULE_VALUES = (Layer, Sequence_, Submodule)


class ListValue:
    """A list `__init__` builds and appends to (`layers = []; layers.append(block(...))`)."""

    __slots__ = ("items",)

    def __init__(self, items) -> None:
        self.items = list(items)


@dataclass(frozen=True)
class ClassRef:
    """A module class passed as a value (`ResNet(ResidualBlock, [2, 2, 2])`)."""

    klass: cst.ClassDef
    semantic: Any


@dataclass(frozen=True)
class FunctionRef:
    """A function of the file that builds layers (`def conv3x3(cin, cout, stride=1): return
    nn.Conv2d(...)`)."""

    function: cst.FunctionDef
    semantic: Any


_MAX_UNROLL = 256


@dataclass
class Step:
    """One layer or op applied in a forward: what `torchlint shapes` prints and messages cite."""

    label: str
    node: cst.CSTNode
    semantic: Any
    before: D.Shape
    after: D.Shape
    depth: int = 0


@dataclass
class Problem:
    """An input that does not fit: `kind` "features", "rank", "window", "view", "broadcast",
    "cat"; `node` the call in forward that fails, `definition` the layer's constructor call
    (None for an op); `trace` the steps before it; `certain` False where a condition the code
    does not decide guards it."""

    kind: str
    node: cst.CSTNode
    semantic: Any
    text: str
    definition: Optional[cst.CSTNode] = None
    misfit: Optional[C.Misfit] = None
    trace: Tuple[Step, ...] = ()
    certain: bool = True
    layer: Optional[str] = None
    fix: Optional[Tuple[cst.CSTNode, str]] = None  # (argument node, replacement text)
    arguments: Optional[Dict[str, Any]] = None  # the layer's constructor arguments
    calls: Tuple[cst.CSTNode, ...] = ()  # the module calls that led to it, outermost first
    within: str = ""  # the submodule it happens in (`layer2[0]`), for an op outside any layer


@dataclass
class Run:
    output: Any = None
    steps: List[Step] = field(default_factory=list)
    problems: List[Problem] = field(default_factory=list)


# -- constant evaluation -----------------------------------------------------------------------

class NoNames:
    """A semantic model for literals only (`--verify`'s grid arguments): no name resolves."""

    def reaching_definition(self, name):
        return None

    def qualified_name(self, node):
        return None

    def function_of(self, node):
        return None

    @property
    def __dict__(self):
        return {}


def evaluate(sem, node: cst.BaseExpression, env: Dict[str, Any], depth: int = 0) -> Any:
    """The Python value of a constructor argument (int, float, str, bool, None, tuple), a layer,
    or UNKNOWN."""
    if depth > 12:
        return UNKNOWN
    kind = type(node)
    if kind is cst.Integer:
        return int(node.value.replace("_", ""), 0)
    if kind is cst.Float:
        try:
            return float(node.value)
        except ValueError:
            return UNKNOWN
    if kind is cst.SimpleString:
        try:
            return node.evaluated_value
        except Exception:
            return UNKNOWN
    if kind is cst.Name:
        if node.value in env:
            return env[node.value]
        if node.value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.value]
        return _global(sem, node, depth)
    if kind in (cst.Tuple, cst.List):
        items = []
        for element in node.elements:
            if isinstance(element, cst.StarredElement):
                inner = _items(evaluate(sem, element.value, env, depth + 1))
                if inner is None:
                    return UNKNOWN
                items.extend(inner)
            else:
                items.append(_value(sem, element.value, env, depth + 1))
        return tuple(items) if kind is cst.Tuple else ListValue(items)
    if kind is cst.ListComp:
        return _comprehension(sem, node, env, depth)
    if kind is cst.Comparison:
        return _compare(sem, node, env, depth)
    if kind is cst.BooleanOperation:
        left = evaluate(sem, node.left, env, depth + 1)
        if not _is_plain(left):
            # `x.is_cuda and self.ngpu > 1`: a known false side settles `and`, a true one `or`
            right = evaluate(sem, node.right, env, depth + 1)
            if _is_plain(right) and isinstance(node.operator, cst.And) and not right:
                return False
            if _is_plain(right) and isinstance(node.operator, cst.Or) and right:
                return True
            return UNKNOWN
        if isinstance(node.operator, cst.And):
            return evaluate(sem, node.right, env, depth + 1) if left else left
        return left if left else evaluate(sem, node.right, env, depth + 1)
    if kind is cst.IfExp:
        test = evaluate(sem, node.test, env, depth + 1)
        if not _is_plain(test):
            return UNKNOWN
        return evaluate(sem, node.body if test else node.orelse, env, depth + 1)
    if kind is cst.UnaryOperation:
        value = evaluate(sem, node.expression, env, depth + 1)
        if isinstance(node.operator, cst.Minus) and isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
        if isinstance(node.operator, cst.Not) and _is_plain(value):
            return not value
        return UNKNOWN
    if kind is cst.BinaryOperation:
        left = evaluate(sem, node.left, env, depth + 1)
        right = evaluate(sem, node.right, env, depth + 1)
        return _arithmetic(node.operator, left, right)
    if kind is cst.Attribute and isinstance(node.value, cst.Name) and node.value.value == "self":
        return env.get("self." + node.attr.value, UNKNOWN)
    if kind is cst.Attribute and isinstance(node.value, cst.Name) and node.value.value not in env:
        return argparse_default(sem, node)
    if kind is cst.Call:
        func_name = node.func.value if isinstance(node.func, cst.Name) and node.func.value not in env else None
        arguments = [evaluate(sem, a.value, env, depth + 1) for a in node.args if a.keyword is None and not a.star]
        if func_name == "int" and len(arguments) == 1:
            value = arguments[0]
            return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else UNKNOWN
        if func_name == "range" and len(node.args) == len(arguments) and 1 <= len(arguments) <= 3 and \
                all(isinstance(a, int) and not isinstance(a, bool) for a in arguments):
            found = range(*arguments)
            return tuple(found) if len(found) <= _MAX_UNROLL else UNKNOWN
        if func_name == "len" and len(arguments) == 1 and _items(arguments[0]) is not None:
            return len(_items(arguments[0]))
        return layer_of(sem, node, env, "", depth + 1)
    if kind is cst.Subscript and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        container = evaluate(sem, node.value, env, depth + 1)
        index = evaluate(sem, node.slice[0].slice.value, env, depth + 1)
        items = _items(container)
        if items is not None and isinstance(index, int) and -len(items) <= index < len(items):
            return items[index]
        return UNKNOWN
    return UNKNOWN


def _is_plain(value: Any) -> bool:
    """A constant whose truth is known."""
    return value is None or isinstance(value, (bool, int, float, str, tuple))


_COMPARE = {cst.Equal: lambda a, b: a == b, cst.NotEqual: lambda a, b: a != b, cst.LessThan: lambda a, b: a < b,
            cst.LessThanEqual: lambda a, b: a <= b, cst.GreaterThan: lambda a, b: a > b,
            cst.GreaterThanEqual: lambda a, b: a >= b, cst.Is: lambda a, b: a is b, cst.IsNot: lambda a, b: a is not b}


def _compare(sem, node: cst.Comparison, env: Dict[str, Any], depth: int) -> Any:
    left = evaluate(sem, node.left, env, depth + 1)
    for target in node.comparisons:
        right = evaluate(sem, target.comparator, env, depth + 1)
        operator = _COMPARE.get(type(target.operator))
        if operator is None or not _is_plain(left) or not _is_plain(right):
            if isinstance(target.operator, (cst.Is, cst.IsNot)) and (left is None or right is None) and \
                    (isinstance(left, MODULE_VALUES) or isinstance(right, MODULE_VALUES)):
                result = isinstance(target.operator, cst.IsNot)  # a layer is not None
                if not result:
                    return False
                left = right
                continue
            return UNKNOWN
        try:
            if not operator(left, right):
                return False
        except TypeError:
            return UNKNOWN
        left = right
    return True


def binding_key(arguments: Dict[str, Any]) -> tuple:
    """A constructor's bound arguments as a cheap hashable key: constants as they are, layers and
    classes by the node that made them (their repr would render whole syntax trees)."""
    return tuple(sorted((name, _value_key(value)) for name, value in arguments.items()))


def _value_key(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, ListValue)):
        return tuple(_value_key(item) for item in _items(value))
    node = getattr(value, "node", None) or getattr(value, "klass", None) or getattr(value, "function", None)
    return (type(value).__name__, id(node) if node is not None else id(value))


def _frozen(value: Any) -> Any:
    """A constructor argument as the layer sees it: a list of numbers is a tuple of them."""
    if isinstance(value, ListValue):
        return tuple(_frozen(v) for v in value.items)
    return value


def _items(value: Any) -> Optional[list]:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, ListValue):
        return value.items
    return None


def _value(sem, node, env, depth) -> Any:
    """An element's value: a layer for a constructor call, else a constant."""
    return layer_of(sem, node, env, "", depth) if isinstance(node, cst.Call) else evaluate(sem, node, env, depth)


def _comprehension(sem, node: cst.ListComp, env: Dict[str, Any], depth: int) -> Any:
    """`[nn.Linear(d, d) for _ in range(n)]` over a known iterable, without conditions."""
    loop = node.for_in
    if loop.inner_for_in is not None or loop.ifs or not isinstance(loop.target, cst.Name):
        return UNKNOWN
    items = _items(evaluate(sem, loop.iter, env, depth + 1))
    if items is None or len(items) > _MAX_UNROLL:
        return UNKNOWN
    found = []
    for item in items:
        inner = dict(env)
        inner[loop.target.value] = item
        found.append(_value(sem, node.elt, inner, depth + 1))
    return ListValue(found)


def _arithmetic(operator, left, right):
    numbers = (int, float)
    if not (isinstance(left, numbers) and isinstance(right, numbers)) or isinstance(left, bool) or isinstance(right, bool):
        if isinstance(operator, cst.Multiply) and isinstance(left, tuple) and isinstance(right, int):
            return left * right
        if isinstance(operator, cst.Add) and isinstance(left, tuple) and isinstance(right, tuple):
            return left + right
        return UNKNOWN
    try:
        if isinstance(operator, cst.Add):
            return left + right
        if isinstance(operator, cst.Subtract):
            return left - right
        if isinstance(operator, cst.Multiply):
            return left * right
        if isinstance(operator, cst.FloorDivide):
            return left // right
        if isinstance(operator, cst.Divide):
            return left / right
        if isinstance(operator, cst.Power):
            return left ** right if abs(right) < 64 else UNKNOWN
        if isinstance(operator, cst.Modulo):
            return left % right
    except (ZeroDivisionError, OverflowError):
        return UNKNOWN
    return UNKNOWN


def _global(sem, name: cst.Name, depth: int) -> Any:
    """A module-level constant (`NUM_CLASSES = 10`) certainly bound where it is read: assigned
    once at the top level of the module and nowhere else."""
    definition = sem.reaching_definition(name)
    if definition is not None and definition.kind == "assign" and definition.path == () \
            and definition.value is not None and sem.function_of(definition.statement) is None:
        return evaluate(sem, definition.value, {}, depth + 1)
    if definition is not None and definition.kind == "class" and isinstance(definition.statement, cst.ClassDef) \
            and sem.is_module_class(definition.statement):
        return ClassRef(definition.statement, sem)
    if definition is not None and definition.kind == "def" and isinstance(definition.statement, cst.FunctionDef) \
            and sem.function_of(definition.statement) is None and sem.class_of_method(definition.statement) is None:
        return FunctionRef(definition.statement, sem)
    top = _top_level_definitions(sem).get(name.value)
    if top is not None:
        return top
    value = module_constants(sem).get(name.value)
    return UNKNOWN if value is None else evaluate(sem, value, {}, depth + 1)


def argparse_default(sem, node: cst.Attribute) -> Any:
    """`args.batch_size` where `args = parser.parse_args()` (or `parse_args([])`) and the parser
    declares `--batch-size` with a literal default, no action and no other assignment to it: the
    value the script runs with unless the command line says otherwise."""
    found = _argparse_defaults(sem).get(node.value.value)
    if found is None:
        return UNKNOWN
    return found.get(node.attr.value, UNKNOWN)


def _argparse_defaults(sem) -> Dict[str, Dict[str, Any]]:
    """Each name bound to `parser.parse_args()`, with the defaults of its parser's options."""
    found = sem.__dict__.get("_shape_argparse")
    if found is not None:
        return found
    found = {}
    parses: Dict[str, list] = {}
    for call in sem.index.calls_named({"parse_args"}):
        statement = sem.parent(call)
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0].target, cst.Name):
            parses.setdefault(statement.targets[0].target.value, []).append(call)
    for name, calls in parses.items():
        value = calls[0]
        if len(calls) != 1 or not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                and value.func.attr.value == "parse_args" and isinstance(value.func.value, cst.Name)):
            continue
        if value.args and not (len(value.args) == 1 and isinstance(value.args[0].value, cst.List)
                               and not value.args[0].value.elements):
            continue
        parser = value.func.value.value
        options: Dict[str, Any] = {}
        for call in sem.index.calls_named({"add_argument"}):
            func = call.func
            if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == parser):
                continue
            flags = [a.value.evaluated_value for a in call.args if a.keyword is None
                     and isinstance(a.value, cst.SimpleString)]
            keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
            dest = keywords.get("dest")
            if isinstance(dest, cst.SimpleString):
                dest = dest.evaluated_value
            else:
                longs = [f for f in flags if isinstance(f, str) and f.startswith("--")]
                names = longs or [f for f in flags if isinstance(f, str)]
                if not names:
                    continue
                dest = names[0].lstrip("-").replace("-", "_")
            if dest in options or "action" in keywords or "default" not in keywords:
                options[dest] = UNKNOWN
                continue
            default = evaluate(sem, keywords["default"], {}, 1)
            kind = keywords.get("type")
            if isinstance(default, str) and isinstance(kind, cst.Name) and kind.value in ("int", "float"):
                try:
                    default = int(default) if kind.value == "int" else float(default)
                except ValueError:
                    default = UNKNOWN
            options[dest] = default if isinstance(default, (int, float, str, bool, tuple)) or default is None else UNKNOWN
        for target in sem.index.nodes(cst.Attribute):
            if isinstance(target.value, cst.Name) and target.value.value == name and target.attr.value in options:
                parent = sem.parent(target)
                if isinstance(parent, (cst.AssignTarget, cst.AugAssign)) or (
                        isinstance(parent, cst.Call) and parent.func is target):
                    options[target.attr.value] = UNKNOWN
        found[name] = options
    sem.__dict__["_shape_argparse"] = found
    return found


def _top_level_definitions(sem) -> Dict[str, Any]:
    """Module classes and functions defined once at the top of the module, by name."""
    found = sem.__dict__.get("_shape_definitions")
    if found is None:
        found, seen = {}, {}
        for statement in sem.module.body:
            if isinstance(statement, (cst.ClassDef, cst.FunctionDef)):
                name = statement.name.value
                seen[name] = seen.get(name, 0) + 1
                if isinstance(statement, cst.ClassDef) and sem.is_module_class(statement):
                    found[name] = ClassRef(statement, sem)
                elif isinstance(statement, cst.FunctionDef):
                    found[name] = FunctionRef(statement, sem)
        found = {name: value for name, value in found.items() if seen[name] == 1}
        sem.__dict__["_shape_definitions"] = found
    return found


def module_constants(sem) -> Dict[str, cst.BaseExpression]:
    """Names assigned exactly once at the module's level (in its top-level blocks, not in
    functions or classes), with a plain target, and declared `global` nowhere."""
    found = sem.__dict__.get("_shape_constants")
    if found is not None:
        return found
    counts: Dict[str, int] = {}
    values: Dict[str, cst.BaseExpression] = {}

    def walk(statements) -> None:
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assign):
                        for target in small.targets:
                            for name in _binding_names(target.target):
                                counts[name] = counts.get(name, 0) + 1
                        if len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                            values[small.targets[0].target.value] = small.value
                    elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
                        for name in _binding_names(small.target):
                            counts[name] = counts.get(name, 0) + 2
                    elif isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                        for alias in small.names:
                            bound = alias.asname.name if alias.asname is not None else alias.name
                            if isinstance(bound, cst.Name):
                                counts[bound.value] = counts.get(bound.value, 0) + 2
            elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                counts[statement.name.value] = counts.get(statement.name.value, 0) + 2
            elif isinstance(statement, (cst.For, cst.While, cst.If, cst.With, cst.Try)):
                if isinstance(statement, cst.For):
                    for name in _binding_names(statement.target):
                        counts[name] = counts.get(name, 0) + 2
                if isinstance(statement, cst.With):
                    for item in statement.items:
                        if item.asname is not None:
                            for name in _binding_names(item.asname.name):
                                counts[name] = counts.get(name, 0) + 2
                for block in _blocks(statement):
                    walk(block)

    walk(sem.module.body)
    for declaration in sem.index.nodes(cst.Global):
        for item in declaration.names:
            counts[item.name.value] = 2
    found = {name: value for name, value in values.items() if counts.get(name) == 1}
    sem.__dict__["_shape_constants"] = found
    return found


def _binding_names(target) -> List[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _binding_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _binding_names(target.value)
    return []


def _blocks(statement) -> List[Sequence[cst.CSTNode]]:
    """The statement lists directly inside a compound statement."""
    found = []
    body = getattr(statement, "body", None)
    if isinstance(body, cst.BaseSuite) and hasattr(body, "body"):
        found.append(body.body)
    orelse = getattr(statement, "orelse", None)
    while orelse is not None:
        if isinstance(orelse, cst.If):
            found.append(orelse.body.body)
            orelse = orelse.orelse
        else:
            found.append(orelse.body.body)
            orelse = None
    for handler in getattr(statement, "handlers", ()) or ():
        found.append(handler.body.body)
    final = getattr(statement, "finalbody", None)
    if final is not None:
        found.append(final.body.body)
    return found


# -- what __init__ builds ----------------------------------------------------------------------

def layer_of(sem, call: cst.Call, env: Dict[str, Any], name: str, depth: int = 0) -> Any:
    """The layer a constructor call builds (a torch layer, a container, a project module)."""
    qualified = sem.qualified_name(call.func)
    if qualified in ("torch.nn.Sequential", "torch.nn.modules.container.Sequential",
                     "torch.nn.ModuleList", "torch.nn.modules.container.ModuleList"):
        kind = "Sequential" if qualified.endswith("Sequential") else "ModuleList"
        layers: List[Any] = []
        arguments = list(call.args)
        if any(a.keyword is not None for a in arguments) or len([a for a in arguments if a.star]) > 1:
            return UNKNOWN
        if len(arguments) == 1 and (arguments[0].star or kind == "ModuleList" or
                                    isinstance(arguments[0].value, (cst.List, cst.Tuple, cst.ListComp))):
            items = _items(evaluate(sem, arguments[0].value, env, depth + 1))
            if items is None:
                return UNKNOWN
        elif kind == "ModuleList":
            return UNKNOWN if arguments else Sequence_([], call, name, kind)
        else:
            items = []
            for argument in arguments:
                if argument.star:
                    inner = _items(evaluate(sem, argument.value, env, depth + 1))
                    if inner is None:
                        return UNKNOWN
                    items.extend(inner)
                else:
                    items.append(_value(sem, argument.value, env, depth + 1))
        for position, layer in enumerate(items):
            if isinstance(layer, MODULE_VALUES) and (not layer.name or layer.name.startswith("[")):
                layer.name = f"{name}[{position}]"
            layers.append(layer if isinstance(layer, MODULE_VALUES) else UNKNOWN)
        return Sequence_(layers, call, name, kind)
    if qualified in ("torch.nn.Parameter", "torch.nn.parameter.Parameter") and call.args:
        return _built_tensor(sem, call.args[0].value, env, depth)
    contract = C.contract(qualified)
    if contract is not None:
        positional, keywords = [], {}
        for argument in call.args:
            if argument.star:
                return Layer(contract, {n: UNKNOWN for n, _ in contract.parameters}, call, name, sem)
            value = _frozen(evaluate(sem, argument.value, env, depth + 1))
            if argument.keyword is not None:
                keywords[argument.keyword.value] = value
            else:
                positional.append(value)
        if contract.parameters and contract.parameters[0][0] == "*":
            return Layer(contract, {}, call, name, sem)
        bound = contract.bind(positional, keywords)
        if bound is None:
            return UNKNOWN
        return Layer(contract, bound, call, name, sem)
    func = call.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
            and "__class__" in env:
        klass, klass_sem = env["__class__"]
        helper = method(klass, func.attr.value)
        if helper is None or depth > 16:
            return UNKNOWN
        return run_function(klass_sem, helper, call, sem, env, depth + 1, is_method=True)
    callee = None
    if isinstance(func, cst.Name):
        callee = env.get(func.value) if func.value in env else None
        if callee is None and qualified is None or (qualified and "." not in qualified):
            callee = callee or _global(sem, func, depth + 1)
    if isinstance(callee, ClassRef):
        return Submodule(callee.klass, callee.semantic,
                         bind_constructor(sem, callee.klass, callee.semantic, call, env, depth), call, name)
    if isinstance(callee, FunctionRef):
        if depth > 16:
            return UNKNOWN
        return run_function(callee.semantic, callee.function, call, sem, env, depth + 1)
    found = project_class(sem, call.func)
    if found is not None:
        klass, klass_sem = found
        return Submodule(klass, klass_sem, bind_constructor(sem, klass, klass_sem, call, env, depth), call, name)
    return UNKNOWN


_FACTORIES = frozenset({"randn", "rand", "zeros", "ones", "empty", "randint"})


def _built_tensor(sem, node, env: Dict[str, Any], depth: int) -> Any:
    """A tensor `__init__` builds with sizes it knows (`nn.Parameter(torch.randn(1, 1, d))`)."""
    if not isinstance(node, cst.Call):
        return UNKNOWN
    qualified = sem.qualified_name(node.func) or ""
    parts = qualified.split(".")
    if len(parts) != 2 or parts[0] != "torch" or parts[1] not in _FACTORIES:
        return UNKNOWN
    positional = [a for a in node.args if a.keyword is None]
    if any(a.star for a in node.args) or not positional:
        return UNKNOWN
    if parts[1] == "randint":
        sizes = _frozen(evaluate(sem, positional[-1].value, env, depth + 1))
    else:
        values = [_frozen(evaluate(sem, a.value, env, depth + 1)) for a in positional]
        sizes = values[0] if len(values) == 1 and isinstance(values[0], tuple) else tuple(values)
    if not isinstance(sizes, tuple) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in sizes):
        return UNKNOWN
    return Tensor(tuple(sizes))


def run_function(function_sem, function: cst.FunctionDef, call: cst.Call, caller_sem, caller_env: Dict[str, Any],
                 depth: int, is_method: bool = False) -> Any:
    """What a layer-building helper returns (`conv3x3(...)`, `self._make_layer(...)`); a method
    shares `self`'s attributes with its caller, both ways."""
    if any(a.star for a in call.args):
        return UNKNOWN
    params = list(function.params.params)
    if is_method and params and params[0].name.value == "self":
        params = params[1:]
    env: Dict[str, Any] = {}
    positional = [a for a in call.args if a.keyword is None]
    if len(positional) > len(params):
        return UNKNOWN
    for param, argument in zip(params, positional):
        env[param.name.value] = _value(caller_sem, argument.value, caller_env, depth + 1)
    for argument in call.args:
        if argument.keyword is not None:
            env[argument.keyword.value] = _value(caller_sem, argument.value, caller_env, depth + 1)
    for param in params + list(function.params.kwonly_params):
        if param.name.value not in env:
            env[param.name.value] = evaluate(function_sem, param.default, {}, depth + 1) \
                if param.default is not None else UNKNOWN
    if is_method:
        env["__class__"] = caller_env["__class__"]
        env.update({key: value for key, value in caller_env.items() if key.startswith("self.")})
    _init_block(function_sem, function.body.body, env, depth + 1)
    if is_method:
        caller_env.update({key: value for key, value in env.items() if key.startswith("self.")})
    return env.get("__return__", UNKNOWN)


def project_class(sem, func: cst.BaseExpression) -> Optional[Tuple[cst.ClassDef, Any]]:
    """The module class a constructor names, in this file or another file of the project."""
    if isinstance(func, cst.Name):
        definition = sem.reaching_definition(func)
        if definition is not None and definition.kind == "class" and isinstance(definition.statement, cst.ClassDef):
            klass = definition.statement
            return (klass, sem) if sem.is_module_class(klass) else None
    qualified = sem.qualified_name(func)
    project = sem.project
    if qualified is None and isinstance(func, cst.Name) and project is not None:
        qualified = _star_imported(sem, func.value)
    found = project_definition(sem, qualified, "module class")
    if found is None:
        return None
    fact, other = found
    for klass in other.module_classes():
        if klass.name.value == fact.name.rsplit(".", 1)[-1] and other.is_module_class(klass):
            return klass, other
    for klass in other.index.nodes(cst.ClassDef):
        if klass.name.value == qualified.rsplit(".", 1)[-1] and other.is_module_class(klass):
            return klass, other
    return None


def _star_imported(sem, name: str) -> Optional[str]:
    """`pkg.parts.DoubleConv` for a name that a `from .parts import *` of the project may bring,
    where the module itself binds no such name: the project layer answers for that module."""
    if name in module_constants(sem) or name in _top_level_definitions(sem):
        return None
    for statement in sem.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                dots = "." * len(small.relative)
                module = sem.source(small.module) if small.module is not None else ""
                candidate = f"{dots}{module}.{name}" if module else f"{dots}{name}"
                if sem.project.fact(candidate) is not None:
                    return candidate
    return None


def method(klass: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
    for statement in klass.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            return statement
    return None


def bind_constructor(sem, klass: cst.ClassDef, klass_sem, call: Optional[cst.Call], env: Dict[str, Any],
                     depth: int = 0) -> Dict[str, Any]:
    """The values of `__init__`'s parameters for the call that builds the model (defaults where
    the call leaves them out; UNKNOWN where nothing fixes them)."""
    init = method(klass, "__init__")
    if init is None:
        return {}
    params = [p for p in init.params.params][1:]
    bound: Dict[str, Any] = {}
    if call is not None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if any(a.star for a in call.args):
            return {p.name.value: UNKNOWN for p in params}
        for param, argument in zip(params, positional):
            bound[param.name.value] = evaluate(sem, argument.value, env, depth + 1)
        for argument in call.args:
            if argument.keyword is not None:
                bound[argument.keyword.value] = evaluate(sem, argument.value, env, depth + 1)
    for param in list(params) + list(init.params.kwonly_params):
        if param.name.value not in bound:
            bound[param.name.value] = evaluate(klass_sem, param.default, {}, depth + 1) if param.default is not None else UNKNOWN
    return bound


def class_layers(klass_sem, klass: cst.ClassDef, arguments: Dict[str, Any], depth: int = 0) -> Dict[str, Any]:
    """What `__init__` assigns to `self`: `self.conv1` -> Layer, `self.scale` -> 2, by name."""
    init = method(klass, "__init__")
    env: Dict[str, Any] = dict(arguments)
    if init is None:
        return {}
    env["__class__"] = (klass, klass_sem)
    _init_block(klass_sem, init.body.body, env, depth)
    return {key[5:]: value for key, value in env.items() if key.startswith("self.")}


def _init_block(sem, statements, env: Dict[str, Any], depth: int) -> bool:
    """Runs constructor code over constants and layers; False once a `return` ends the block."""
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Return):
                    env["__return__"] = _value(sem, small.value, env, depth) if small.value is not None else None
                    return False
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    for target in targets:
                        _init_assign(sem, target, small.value, env, depth)
                elif isinstance(small, cst.AugAssign):
                    name = _target_name(small.target)
                    if name is not None:
                        env[name] = _arithmetic(_plain_operator(small.operator), env.get(name, UNKNOWN),
                                                evaluate(sem, small.value, env, depth))
                elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    _init_call(sem, small.value, env, depth)
                else:
                    for name in _assigned_names(small, sem):
                        env[name] = UNKNOWN
        elif isinstance(statement, cst.If):
            condition = evaluate(sem, statement.test, env, depth)
            if isinstance(condition, (ListValue, tuple)) or isinstance(condition, MODULE_VALUES):
                condition = bool(_items(condition)) if not isinstance(condition, MODULE_VALUES) else True
            if condition is True or (isinstance(condition, (int, float, str)) and not isinstance(condition, bool)
                                     and condition):
                if not _init_block(sem, statement.body.body, env, depth):
                    return False
            elif condition is False or condition is None or condition == 0 or condition == "":
                orelse = statement.orelse
                if isinstance(orelse, cst.Else):
                    if not _init_block(sem, orelse.body.body, env, depth):
                        return False
                elif isinstance(orelse, cst.If):
                    if not _init_block(sem, [orelse], env, depth):
                        return False
            else:
                for name in _assigned_names(statement, sem):
                    env[name] = UNKNOWN
        elif isinstance(statement, cst.For) and statement.orelse is None:
            items = _items(evaluate(sem, statement.iter, env, depth))
            if items is None or len(items) > _MAX_UNROLL:
                for name in _assigned_names(statement, sem):
                    env[name] = UNKNOWN
                continue
            for item in items:
                _init_bind(statement.target, item, env)
                if not _init_block(sem, statement.body.body, env, depth):
                    return False
        else:
            for name in _assigned_names(statement, sem):
                env[name] = UNKNOWN
    return True


def _init_assign(sem, target, value_node, env: Dict[str, Any], depth: int) -> None:
    name = _target_name(target)
    if name is not None:
        value = layer_of(sem, value_node, env, name[5:] if name.startswith("self.") else "", depth) \
            if isinstance(value_node, cst.Call) else evaluate(sem, value_node, env, depth)
        if isinstance(value, MODULE_VALUES) and name.startswith("self.") and not value.name:
            value.name = name[5:]
            if isinstance(value, Sequence_):
                for item in value.layers:
                    if isinstance(item, MODULE_VALUES) and item.name.startswith("["):
                        item.name = value.name + item.name
        env[name] = value
        return
    if isinstance(target, (cst.Tuple, cst.List)):
        _init_bind(target, evaluate(sem, value_node, env, depth), env)
        return
    for found in _assigned_names(target, sem):
        env[found] = UNKNOWN


def _init_bind(target, value, env: Dict[str, Any]) -> None:
    name = _target_name(target)
    if name is not None:
        env[name] = value
        return
    if isinstance(target, (cst.Tuple, cst.List)):
        items = _items(value)
        elements = target.elements
        if items is None or len(items) != len(elements) or any(isinstance(e, cst.StarredElement) for e in elements):
            items = [UNKNOWN] * len(elements)
        for element, item in zip(elements, items):
            _init_bind(element.value, item, env)


def _init_call(sem, call: cst.Call, env: Dict[str, Any], depth: int) -> None:
    """A call statement in constructor code: `layers.append(...)`, `self.add_module(...)`, a helper
    method run for its effect on `self`; anything else changes nothing the shapes use."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return
    receiver = _target_name(func.value)
    method_name = func.attr.value
    arguments = [a for a in call.args if a.keyword is None and not a.star]
    if receiver is not None and method_name in ("append", "extend", "insert") and receiver in env:
        target = env[receiver]
        if not isinstance(target, ListValue) or any(a.star or a.keyword for a in call.args):
            env[receiver] = UNKNOWN
            return
        if method_name == "append" and len(arguments) == 1:
            target.items.append(_value(sem, arguments[0].value, env, depth))
        elif method_name == "extend" and len(arguments) == 1:
            items = _items(evaluate(sem, arguments[0].value, env, depth))
            if items is None:
                env[receiver] = UNKNOWN
            else:
                target.items.extend(items)
        else:
            env[receiver] = UNKNOWN
        return
    if receiver == "self" and method_name == "add_module" and len(arguments) == 2:
        key = evaluate(sem, arguments[0].value, env, depth)
        if isinstance(key, str):
            env["self." + key] = _value(sem, arguments[1].value, env, depth)
        return
    if receiver == "self" and "__class__" in env:
        layer_of(sem, call, env, "", depth)  # a helper method: its effect on `self`


def _plain_operator(operator):
    return {cst.AddAssign: cst.Add(), cst.SubtractAssign: cst.Subtract(), cst.MultiplyAssign: cst.Multiply(),
            cst.FloorDivideAssign: cst.FloorDivide(), cst.DivideAssign: cst.Divide()}.get(type(operator), None)


def _target_name(target: cst.BaseExpression) -> Optional[str]:
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return "self." + target.attr.value
    return None


def _assigned_names(node: cst.CSTNode, sem=None) -> List[str]:
    """The names (and `self.x` attributes) a statement may rebind, containers it may change
    included (`self.layers.append(...)`)."""
    if sem is not None and node in sem.index.order:
        return _assigned_in(sem, node)  # the file's index walks the subtree far faster than a visitor
    found: List[str] = []

    class Collector(cst.CSTVisitor):
        def visit_AssignTarget(self, target: cst.AssignTarget) -> None:
            _collect(target.target)

        def visit_AugAssign(self, statement: cst.AugAssign) -> None:
            _collect(statement.target)

        def visit_AnnAssign(self, statement: cst.AnnAssign) -> None:
            _collect(statement.target)

        def visit_For(self, statement: cst.For) -> None:
            _collect(statement.target)

        def visit_WithItem(self, item: cst.WithItem) -> None:
            if item.asname is not None:
                _collect(item.asname.name)

        def visit_NamedExpr(self, expr: cst.NamedExpr) -> None:
            _collect(expr.target)

        def visit_Call(self, call: cst.Call) -> None:
            # `self.layers.append(...)` changes a container
            if isinstance(call.func, cst.Attribute):
                name = _target_name(call.func.value)
                if name is not None:
                    found.append(name)

    def _collect(target) -> None:
        _collect_target(target, found)

    node.visit(Collector())
    return found


def _collect_target(target, found: List[str]) -> None:
    """The names an assignment target binds (`a`, `self.x`, `a, (b, *c)`), into `found`."""
    name = _target_name(target)
    if name is not None:
        found.append(name)
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            _collect_target(element.value, found)
    elif isinstance(target, cst.StarredElement):
        _collect_target(target.value, found)


def step_axis(sem, iterable) -> Optional[Tuple[str, int]]:
    """("split", d) for `x.split(1, dim=d)` and ("unbind", d) for `x.unbind(d)`: a loop over it
    takes one step along d at a time. None for anything else (a split into larger pieces)."""
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute)
            and iterable.func.attr.value in ("split", "unbind")) or any(a.star for a in iterable.args):
        return None
    arguments = [evaluate(sem, a.value, {}, 0) for a in iterable.args if a.keyword is None]
    keywords = {a.keyword.value: evaluate(sem, a.value, {}, 0) for a in iterable.args if a.keyword is not None}
    kind = iterable.func.attr.value
    if kind == "split":
        size = arguments[0] if arguments else keywords.get("split_size_or_sections", keywords.get("split_size"))
        dim = arguments[1] if len(arguments) > 1 else keywords.get("dim", 0)
        if size != 1 or isinstance(size, bool):
            return None
    else:
        dim = arguments[0] if arguments else keywords.get("dim", 0)
    if not isinstance(dim, int) or isinstance(dim, bool):
        return None
    return kind, dim


def _time_step(iterable, frame, interpreter, certain: bool) -> Optional[Tensor]:
    """One element of `x.split(1, dim=d)` (size 1 along d) or `x.unbind(d)` (d removed), where
    x's shape is known: every element has that shape."""
    stepping = step_axis(frame.sem, iterable)
    if stepping is None:
        return None
    receiver = interpreter.expr(iterable.func.value, frame, certain)
    if not isinstance(receiver, Tensor) or receiver.shape is None:
        return None
    kind, dim = stepping
    shape = receiver.shape
    if not -len(shape) <= dim < len(shape):
        return None
    if kind == "split":
        return Tensor(tuple(1 if i == dim % len(shape) else d for i, d in enumerate(shape)))
    return Tensor(tuple(d for i, d in enumerate(shape) if i != dim % len(shape)))


def _assigned_in(sem, node: cst.CSTNode) -> List[str]:
    found: List[str] = []

    def collect(target) -> None:
        _collect_target(target, found)

    for inner in (node, *sem.index.descendants(node)):
        kind = type(inner)
        if kind is cst.AssignTarget or kind is cst.AugAssign or kind is cst.AnnAssign or kind is cst.For \
                or kind is cst.NamedExpr:
            collect(inner.target)
        elif kind is cst.WithItem:
            if inner.asname is not None:
                collect(inner.asname.name)
        elif kind is cst.Call and isinstance(inner.func, cst.Attribute):
            name = _target_name(inner.func.value)
            if name is not None:
                found.append(name)
    return found


# -- running forward ---------------------------------------------------------------------------

class Interpreter:
    """Runs a module's forward over abstract values, recording steps and problems."""

    def __init__(self, fitted: Optional[set] = None) -> None:
        self.fitted = fitted if fitted is not None else set()  # layers some input fitted
        self.run = Run()
        self._seen: set = set()
        self._layers_cache: Dict[tuple, Dict[str, Any]] = {}
        self._prefixes: List[str] = []  # the attribute path of the submodule being run
        self.batch: Any = None  # the input's Source while a fed model runs
        self._calls: List[cst.CSTNode] = []

    # -- modules
    def call_module(self, module: Any, inputs: Sequence[Any], node: cst.CSTNode, sem, depth: int,
                    certain: bool) -> Any:
        self._calls.append(node)
        try:
            return self._call_module(module, inputs, node, sem, depth, certain)
        finally:
            self._calls.pop()

    def _call_module(self, module: Any, inputs: Sequence[Any], node: cst.CSTNode, sem, depth: int,
                     certain: bool) -> Any:
        if isinstance(module, Layer):
            return self._call_layer(module, inputs, node, sem, depth, certain)
        if isinstance(module, Sequence_):
            if module.kind != "Sequential" or len(inputs) != 1:
                return UNKNOWN
            value = inputs[0]
            for layer in module.layers:
                if not isinstance(layer, MODULE_VALUES):
                    return UNKNOWN
                value = self.call_module(layer, [value], node, sem, depth, certain)
            return value
        if isinstance(module, Submodule):
            self._prefixes.append(module.name)
            try:
                return self.call_class(module.klass, module.semantic, module.arguments, inputs, depth + 1, certain,
                                       prefix=module.name)
            finally:
                self._prefixes.pop()
        return UNKNOWN

    def call_class(self, klass: cst.ClassDef, klass_sem, arguments: Dict[str, Any], inputs: Sequence[Any],
                   depth: int, certain: bool, prefix: str = "") -> Any:
        forward = method(klass, "forward")
        if forward is None or depth > _MAX_DEPTH:
            return UNKNOWN
        key = (id(klass), binding_key(arguments))
        layers = self._layers_cache.get(key)
        if layers is None:
            layers = class_layers(klass_sem, klass, arguments, depth)
            self._layers_cache[key] = layers
        frame = Frame(klass_sem, klass, layers, depth, certain, prefix)
        return self.call_function(forward, frame, inputs, {})

    def call_function(self, function: cst.FunctionDef, frame: "Frame", inputs: Sequence[Any], keywords: Dict[str, Any]) -> Any:
        params = list(function.params.params)
        if params and params[0].name.value == "self":
            params = params[1:]
        env: Dict[str, Any] = {}
        for position, param in enumerate(params):
            if position < len(inputs):
                env[param.name.value] = inputs[position]
            elif param.name.value in keywords:
                env[param.name.value] = keywords[param.name.value]
            elif param.default is not None:
                env[param.name.value] = evaluate(frame.sem, param.default, {}, 0)
            else:
                env[param.name.value] = UNKNOWN
        frame.env = env
        frame.returns = []
        self._block(function.body.body, frame, frame.certain)
        if not frame.returns:
            return UNKNOWN
        first = frame.returns[0]
        return first if all(_same_value(first, r) for r in frame.returns[1:]) else UNKNOWN

    def _call_layer(self, layer: Layer, inputs: Sequence[Any], node, sem, depth: int, certain: bool) -> Any:
        if not inputs or not isinstance(inputs[0], Tensor):
            return UNKNOWN
        before = inputs[0].shape
        label = layer.name or layer.contract.name
        if layer.contract.name in _SEQUENCE_LAYERS and layer.arguments.get("batch_first") is False \
                and before is not None and len(before) == 3 and before[0] == BATCH:
            state = inputs[1] if len(inputs) > 1 and layer.contract.name in C.RECURRENT else None
            if isinstance(state, Tup) and state.items:
                state = state.items[0]
            raised = None  # a hidden state built for the batch as dim 0 makes torch raise
            if isinstance(state, Tensor) and state.shape is not None and len(state.shape) == 3 \
                    and state.shape[1] == BATCH:
                raised = C.state_misfit(layer.contract.name, layer.arguments, before, state.shape, batch_differs=True)
            self._problem(Problem(
                "batch_first", node, sem,
                f"is built with batch_first=False, so it reads (sequence, batch, features), but its input is "
                f"{D.shape_text(before)} with the batch first", layer.node, raised, tuple(self.run.steps), certain,
                label, arguments=layer.arguments))
            if raised is not None:
                return UNKNOWN
        if len(inputs) > 1 and layer.contract.name in C.CELLS | C.RECURRENT and \
                self._state_misfits(layer, before, inputs[1], node, sem, certain, label):
            return UNKNOWN  # torch raises here: what follows never runs
        result = layer.contract.apply(layer.arguments, before)
        if isinstance(result, C.Misfit):
            self._problem(Problem(result.kind, node, sem, result.text, layer.node, result, tuple(self.run.steps),
                                  certain, label, arguments=layer.arguments), layer)
            return UNKNOWN
        if "[" in label:  # a Sequential's layer: its class says more than its index
            label = f"{label.split('[')[0]}[{label.split('[', 1)[1]} {layer.contract.name}".lstrip("[") \
                if not label.startswith("[") else layer.contract.name
        self.fitted.add(id(layer.node))
        path = ".".join(p for p in self._prefixes if p)
        if path:
            label = f"{path}.{label}"
        if result != before or layer.contract.name not in C.IDENTITY_LAYERS:
            self.run.steps.append(Step(label, layer.node, layer.semantic, before, result, depth))
        output = Tensor(result)
        if layer.contract.returns_pair:
            return Tup((output, UNKNOWN))
        return output

    def _state_misfits(self, layer: Layer, shape, state: Any, node, sem, certain: bool, label: str) -> bool:
        """The hidden state passed with the input: `lstm(x, (h0, c0))`, `cell(x_t, (h, c))`, `gru(x, h0)`."""
        name = layer.contract.name
        if name in ("LSTM", "LSTMCell"):
            if not isinstance(state, Tup) or len(state.items) != 2:
                return False
            states = list(state.items)
        else:
            states = [state]
        for position, value in enumerate(states):
            if not isinstance(value, Tensor):
                continue
            misfit = C.state_misfit(name, layer.arguments, shape, value.shape, position)
            if misfit is not None:
                self._problem(Problem("state", node, sem, misfit.text, layer.node, misfit, tuple(self.run.steps),
                                      certain, label, arguments=layer.arguments), layer)
                return True
        return False

    def _problem(self, problem: Problem, layer: Optional[Layer] = None) -> None:
        problem.calls = tuple(self._calls)
        problem.within = ".".join(p for p in self._prefixes if p)
        key = (id(problem.node), id(problem.definition), problem.kind)
        if key in self._seen:
            return
        self._seen.add(key)
        self.run.problems.append(problem)

    # -- statements
    def _block(self, statements, frame: "Frame", certain: bool) -> bool:
        """Interprets statements; False once a return or raise ends the block."""
        for statement in statements:
            if not self._statement(statement, frame, certain):
                return False
        return True

    def _statement(self, statement, frame: "Frame", certain: bool) -> bool:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Return):
                    frame.returns.append(self.expr(small.value, frame, certain) if small.value is not None else UNKNOWN)
                    return False
                if isinstance(small, cst.Raise):
                    return False
                if isinstance(small, (cst.Assign, cst.AnnAssign)):
                    if small.value is None:
                        continue
                    value = self.expr(small.value, frame, certain)
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    for target in targets:
                        self._bind(target, value, frame)
                elif isinstance(small, cst.AugAssign):
                    value = self._binary(small.target, small.value, _plain_operator(small.operator), small, frame, certain)
                    self._bind(small.target, value, frame)
                elif isinstance(small, cst.Expr):
                    value = self.expr(small.value, frame, certain)
                    call = small.value
                    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                            and isinstance(call.func.value, cst.Name) and call.func.attr.value.endswith("_") \
                            and call.func.attr.value not in _SHAPE_KEEPING_INPLACE:
                        # `x.unsqueeze_(1)`: the name now holds the new shape (unknown if not followed)
                        frame.env[call.func.value.value] = value if isinstance(value, Tensor) else UNKNOWN
            return True
        if isinstance(statement, cst.If):
            condition = self._condition(statement.test, frame)
            if condition is True:
                return self._block(statement.body.body, frame, certain)
            orelse = statement.orelse
            if condition is False:
                if isinstance(orelse, cst.Else):
                    return self._block(orelse.body.body, frame, certain)
                if isinstance(orelse, cst.If):
                    return self._statement(orelse, frame, certain)
                return True
            before = dict(frame.env)
            returns_before = len(frame.returns)
            went_on = self._block(statement.body.body, frame, False)
            first = frame.env
            frame.env = dict(before)
            other_went_on = True
            if isinstance(orelse, cst.Else):
                other_went_on = self._block(orelse.body.body, frame, False)
            elif isinstance(orelse, cst.If):
                other_went_on = self._statement(orelse, frame, False)
            if not went_on and not other_went_on:
                return False
            if len(frame.returns) > returns_before:
                frame.returns[returns_before:] = [UNKNOWN]
            if went_on and other_went_on:
                frame.env = _join_envs(first, frame.env)
            elif went_on:
                frame.env = first
            return True
        if isinstance(statement, cst.For):
            iterable = self.expr(statement.iter, frame, certain)
            if isinstance(iterable, Sequence_) and isinstance(statement.target, cst.Name) and statement.orelse is None:
                for layer in iterable.layers:
                    frame.env[statement.target.value] = layer
                    if not self._block(statement.body.body, frame, certain):
                        return False
                return True
            piece = _time_step(statement.iter, frame, self, certain)
            if piece is not None and isinstance(statement.target, cst.Name) and statement.orelse is None:
                # `for x_t in x.split(1, dim=1)`: the body once, on one step; what it binds after
                # the loop may come from any step, so it is unknown there
                frame.env[statement.target.value] = piece
                self._block(statement.body.body, frame, certain)
                for name in _assigned_names(statement, frame.sem):
                    frame.env[name] = UNKNOWN
                return True
            for name in _assigned_names(statement, frame.sem):
                frame.env[name] = UNKNOWN
            return True
        if isinstance(statement, cst.With):
            return self._block(statement.body.body, frame, certain)
        for name in _assigned_names(statement, frame.sem):
            frame.env[name] = UNKNOWN
        return True

    def _condition(self, test, frame: "Frame") -> Optional[bool]:
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            if isinstance(target.operator, (cst.Is, cst.IsNot)) and isinstance(target.comparator, cst.Name) \
                    and target.comparator.value == "None":
                value = self.expr(test.left, frame, True)
                if value is UNKNOWN:
                    return None
                is_none = value is None
                return is_none if isinstance(target.operator, cst.Is) else not is_none
        value = self.expr(test, frame, True)
        if value is UNKNOWN and frame.klass is not None:
            # what the constructor fixed (`self.ngpu > 1` with ngpu 1), read as constructor code reads it
            value = evaluate(frame.sem, test, {"self." + k: v for k, v in frame.layers.items()}, 0)
        if isinstance(value, bool):
            return value
        if isinstance(value, MODULE_VALUES):
            return True
        if value is None:
            return False
        return None

    def _bind(self, target, value, frame: "Frame") -> None:
        if isinstance(target, cst.Name):
            frame.env[target.value] = value
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            if isinstance(value, Tup) and len(value.items) == len(elements) and \
                    not any(isinstance(e, cst.StarredElement) for e in elements):
                for element, item in zip(elements, value.items):
                    self._bind(element.value, item, frame)
            else:
                for element in elements:
                    self._bind(element.value, UNKNOWN, frame)

    # -- expressions
    def expr(self, node, frame: "Frame", certain: bool) -> Any:
        kind = type(node)
        sem = frame.sem
        if kind is cst.Name:
            if frame.klass is None and hasattr(frame, "resolve"):
                return frame.resolve(node, self)
            if node.value in frame.env:
                return frame.env[node.value]
            if node.value == "None":
                return None
            if node.value in ("True", "False"):
                return node.value == "True"
            value = evaluate(sem, node, {}, 0)
            return value if isinstance(value, (int, float, tuple, str)) else UNKNOWN
        if kind in (cst.Integer, cst.Float, cst.SimpleString):
            value = evaluate(sem, node, {}, 0)
            return Num(value) if isinstance(value, int) and not isinstance(value, bool) else value
        if kind is cst.Attribute:
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                return frame.layers.get(node.attr.value, UNKNOWN) if node.attr.value in frame.layers else UNKNOWN
            if isinstance(node.value, cst.Name) and node.value.value not in frame.env \
                    and node.value.value in _argparse_defaults(sem):
                value = argparse_default(sem, node)
                return Num(value) if isinstance(value, int) and not isinstance(value, bool) else value
            receiver = self.expr(node.value, frame, certain)
            if isinstance(receiver, Tensor) and node.attr.value == "shape" and receiver.shape is not None:
                return Tup(tuple(Num(d) for d in receiver.shape))
            if isinstance(receiver, Tensor) and node.attr.value in ("T", "mT") and receiver.shape is not None:
                return Tensor(ops.transposed_all(receiver.shape) if node.attr.value == "T" else ops.transpose(receiver.shape, -2, -1))
            if isinstance(receiver, Tensor) and node.attr.value in ("data",):
                return receiver
            return UNKNOWN
        if kind in (cst.Tuple, cst.List):
            items = []
            for element in node.elements:
                if isinstance(element, cst.StarredElement):
                    inner = self.expr(element.value, frame, certain)
                    if not isinstance(inner, Tup):
                        return UNKNOWN
                    items.extend(inner.items)
                else:
                    items.append(self.expr(element.value, frame, certain))
            return Tup(tuple(items))
        if kind is cst.Subscript:
            return self._subscript(node, frame, certain)
        if kind is cst.BinaryOperation:
            return self._binary(node.left, node.right, node.operator, node, frame, certain)
        if kind is cst.UnaryOperation:
            value = self.expr(node.expression, frame, certain)
            if isinstance(value, Tensor):
                return value
            if isinstance(value, Num) and isinstance(node.operator, cst.Minus):
                return Num(-value.dim) if D.is_known(value.dim) else UNKNOWN
            return UNKNOWN
        if kind is cst.Call:
            return self._call(node, frame, certain)
        return UNKNOWN

    def _subscript(self, node: cst.Subscript, frame: "Frame", certain: bool) -> Any:
        if frame.klass is None and hasattr(frame, "batch_element"):
            element = frame.batch_element(node)  # `data[0]` of a batch from a known loader
            if element is not None:
                return element
        value = self.expr(node.value, frame, certain)
        if isinstance(value, Tup) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            index = evaluate(frame.sem, node.slice[0].slice.value, {}, 0)
            if isinstance(index, int) and -len(value.items) <= index < len(value.items):
                return value.items[index]
            return UNKNOWN
        if isinstance(value, Tensor) and value.shape is not None:
            if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice) and value.shape:
                return Tensor(self._sliced(value.shape, node.slice[0].slice, frame, certain))
            return Tensor(ops.indexed(frame.sem, value.shape, node.slice))
        return UNKNOWN

    def _sliced(self, shape, piece: cst.Slice, frame: "Frame", certain: bool):
        """`x[a:b]` along the first dimension, with bounds the code fixes."""
        length = shape[0]
        bounds = []
        for bound, default in ((piece.lower, 0), (piece.upper, length)):
            value = default if bound is None else _number(self.expr(bound, frame, certain))
            bounds.append(value)
        step = 1 if piece.step is None else _number(self.expr(piece.step, frame, certain))
        lower, upper = bounds
        if D.is_known(length) and all(isinstance(v, int) and not isinstance(v, bool) for v in (lower, upper, step)) \
                and step > 0:
            return (len(range(length)[lower:upper:step]),) + tuple(shape[1:])
        return (None,) + tuple(shape[1:])

    def _binary(self, left_node, right_node, operator, node, frame: "Frame", certain: bool) -> Any:
        left = self.expr(left_node, frame, certain)
        right = self.expr(right_node, frame, certain)
        if isinstance(left, Num) and isinstance(right, Num):
            return Num(ops.dim_arithmetic(operator, left.dim, right.dim))
        if isinstance(_number(left), (int, float)) and isinstance(_number(right), (int, float)) \
                and (isinstance(left, (Num, float)) or isinstance(right, (Num, float))):
            result = _arithmetic(operator, _number(left), _number(right))
            return Num(result) if isinstance(result, int) else result
        if isinstance(operator, cst.MatrixMultiply):
            if isinstance(left, Tensor) and isinstance(right, Tensor):
                result = ops.matmul(left.shape, right.shape)
                if isinstance(result, str):
                    self._problem(Problem("matmul", node, frame.sem, result, trace=tuple(self.run.steps), certain=certain))
                    return UNKNOWN
                return Tensor(result)
            return UNKNOWN
        if isinstance(left, Tensor) and isinstance(right, Tensor):
            if operator is None:
                return UNKNOWN
            result = ops.broadcast(left.shape, right.shape)
            if isinstance(result, str):
                self._problem(Problem("broadcast", node, frame.sem,
                                      f"`{_op_text(operator)}` of {D.shape_text(left.shape)} and {D.shape_text(right.shape)}: {result}",
                                      trace=tuple(self.run.steps), certain=certain))
                return UNKNOWN
            return Tensor(result)
        if isinstance(left, Tensor) and isinstance(right, (Num, int, float)):
            return left
        if isinstance(right, Tensor) and isinstance(left, (Num, int, float)):
            return right
        return UNKNOWN

    def _call(self, call: cst.Call, frame: "Frame", certain: bool) -> Any:
        sem = frame.sem
        func = call.func
        if any(a.star for a in call.args):
            return UNKNOWN
        callee = UNKNOWN
        if isinstance(func, cst.Name) and func.value in ("len", "int") and len(call.args) == 1 \
                and func.value not in frame.env:
            argument = self.expr(call.args[0].value, frame, certain)
            if func.value == "len":
                return Num(argument.shape[0]) if isinstance(argument, Tensor) and argument.shape else UNKNOWN
            number = _number(argument)
            return Num(int(number)) if isinstance(number, (int, float)) and not isinstance(number, bool) else UNKNOWN
        if isinstance(func, cst.Name) and frame.klass is None and hasattr(frame, "resolve"):
            callee = frame.resolve(func, self)
        elif isinstance(func, cst.Name) and func.value in frame.env:
            callee = frame.env[func.value]
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                and frame.klass is not None:
            attribute = func.attr.value
            if attribute in frame.layers:
                callee = frame.layers[attribute]
            else:
                helper = method(frame.klass, attribute)
                if helper is not None and frame.depth < _MAX_DEPTH:
                    inputs = [self.expr(a.value, frame, certain) for a in call.args if a.keyword is None]
                    keywords = {a.keyword.value: self.expr(a.value, frame, certain) for a in call.args if a.keyword is not None}
                    inner = Frame(sem, frame.klass, frame.layers, frame.depth + 1, certain, frame.prefix)
                    return self.call_function(helper, inner, inputs, keywords)
                return UNKNOWN
        if isinstance(callee, MODULE_VALUES):
            inputs = [self.expr(a.value, frame, certain) for a in call.args if a.keyword is None]
            if not inputs and isinstance(callee, Layer):  # `attn(query=x, key=x, value=x)`
                named = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
                first = next((named[k] for k in ("input", "query", "src", "tgt", "x") if k in named), None)
                if first is not None:
                    inputs = [self.expr(first, frame, certain)]
            return self.call_module(callee, inputs, call, sem, frame.depth, certain)
        if isinstance(func, cst.Attribute):
            receiver_node = func.value
            if not (isinstance(receiver_node, cst.Name) and receiver_node.value in ("torch", "F", "nn")) \
                    and sem.qualified_name(func) is None:
                receiver = self.expr(receiver_node, frame, certain)
                if isinstance(receiver, Tensor):
                    return self._method(receiver, func.attr.value, call, frame, certain)
                return UNKNOWN
        qualified = sem.qualified_name(func)
        if qualified:
            if hasattr(frame, "factory") and qualified.split(".")[0] == "torch" and \
                    qualified.rsplit(".", 1)[-1] in ops.SOURCE_FACTORIES:
                built = frame.factory(call)
                if built is not UNKNOWN:
                    return built
            return self._function(qualified, call, frame, certain)
        return UNKNOWN

    def _batch(self, frame: "Frame") -> Any:
        """Where the batch comes from (its sizes that certainly occur), for hard-coded batch sizes."""
        return getattr(frame, "last_source", None) or self.batch

    def _arguments(self, call: cst.Call, frame: "Frame", certain: bool):
        positional = [self.expr(a.value, frame, certain) for a in call.args if a.keyword is None]
        keywords = {a.keyword.value: self.expr(a.value, frame, certain) for a in call.args if a.keyword is not None}
        return positional, keywords

    def _method(self, receiver: Tensor, name: str, call: cst.Call, frame: "Frame", certain: bool) -> Any:
        positional, keywords = self._arguments(call, frame, certain)
        result = ops.tensor_method(name, receiver.shape, positional, keywords, self._batch(frame))
        return self._op_result(result, name, call, frame, certain, receiver.shape)

    def _function(self, qualified: str, call: cst.Call, frame: "Frame", certain: bool) -> Any:
        positional, keywords = self._arguments(call, frame, certain)
        result = ops.function(qualified, positional, keywords, self._batch(frame))
        short = qualified.rsplit(".", 1)[-1]
        before = positional[0].shape if positional and isinstance(positional[0], Tensor) else None
        return self._op_result(result, short, call, frame, certain, before)

    def _op_result(self, result, name: str, call, frame: "Frame", certain: bool, before: D.Shape) -> Any:
        if isinstance(result, ops.OpProblem):
            self._problem(Problem(result.kind, call, frame.sem, result.text, trace=tuple(self.run.steps),
                                  certain=certain, layer=name))
            return UNKNOWN
        if isinstance(result, Tensor) and name in ops.SHAPE_STEPS and before is not None and result.shape != before:
            self.run.steps.append(Step(name, call, frame.sem, before, result.shape, frame.depth))
        return result


def _number(value: Any) -> Any:
    """A known number: an int or float, or a `Num` of a known size."""
    if isinstance(value, Num):
        return value.dim if D.is_known(value.dim) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def _op_text(operator) -> str:
    return {cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/"}.get(type(operator), "op")


class Frame:
    def __init__(self, sem, klass, layers, depth, certain, prefix) -> None:
        self.sem = sem
        self.klass = klass
        self.layers = layers
        self.depth = depth
        self.certain = certain
        self.prefix = prefix
        self.env: Dict[str, Any] = {}
        self.returns: List[Any] = []


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return a.shape == b.shape
    return a is b or a == b


def _join_envs(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, Any]:
    joined = {}
    for name in set(a) | set(b):
        first, second = a.get(name, UNKNOWN), b.get(name, UNKNOWN)
        joined[name] = first if _same_value(first, second) else (
            Tensor(None) if isinstance(first, Tensor) and isinstance(second, Tensor) else UNKNOWN)
    return joined
