"""Facts about autograd for TL001 (in-place on autograd tensors) and TL006 (activations cached on
the module): which calls are in-place tensor methods, which names are leaves that require grad,
which names are still the unrebound inputs of `forward`, and which expressions are tensors computed
in this `forward`.

Every function takes the `Semantic` object of the module and answers conservatively ("no" when
unsure). Nothing here imports torch; the in-place method list was taken from `dir(torch.Tensor)`
on torch 2.13.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.index import iter_children
from torchlint.analysis.scopes import dotted_name
from torchlint.analysis.semantic import TENSOR_FACTORIES, method_call

if TYPE_CHECKING:
    from torchlint.analysis.semantic import Semantic

# In-place tensor methods (torch 2.13 `dir(torch.Tensor)`, names ending in `_`) that write the
# tensor's values. Left out on purpose: `requires_grad_`, `share_memory_`, `detach_` (autograd
# bookkeeping, not values), metadata-only or storage ops (`set_`, `resize_*`, `as_strided_`,
# `squeeze_`, `unsqueeze_`, `t_`, `transpose_`, `swapaxes_`, `swapdims_`, `sparse_resize_*`) and
# the CPU-only Python callbacks `apply_`, `map_`, `map2_`.
INPLACE_WITH_OUT_OF_PLACE = frozenset("""
abs_ absolute_ acos_ acosh_ add_ addbmm_ addcdiv_ addcmul_ addmm_ addmv_ addr_ arccos_ arccosh_
arcsin_ arcsinh_ arctan2_ arctan_ arctanh_ asin_ asinh_ atan2_ atan_ atanh_ baddbmm_ bernoulli_
bitwise_and_ bitwise_left_shift_ bitwise_not_ bitwise_or_ bitwise_right_shift_ bitwise_xor_ ceil_
clamp_ clamp_max_ clamp_min_ clip_ conj_physical_ copysign_ cos_ cosh_ cumprod_ cumsum_ deg2rad_
digamma_ div_ divide_ eq_ erf_ erfc_ erfinv_ exp2_ exp_ expm1_ fix_ float_power_ floor_
floor_divide_ fmod_ frac_ gcd_ ge_ greater_ greater_equal_ gt_ heaviside_ hypot_ i0_ igamma_
igammac_ index_add_ index_copy_ index_fill_ index_put_ index_reduce_ lcm_ ldexp_ le_ lerp_ less_
less_equal_ lgamma_ log10_ log1p_ log2_ log_ logical_and_ logical_not_ logical_or_ logical_xor_
logit_ lt_ masked_fill_ masked_scatter_ mul_ multiply_ mvlgamma_ nan_to_num_ ne_ neg_ negative_
nextafter_ not_equal_ polygamma_ pow_ put_ rad2deg_ reciprocal_ relu_ remainder_ renorm_ round_
rsqrt_ scatter_ scatter_add_ scatter_reduce_ sgn_ sigmoid_ sign_ sin_ sinc_ sinh_ sqrt_ square_
sub_ subtract_ tan_ tanh_ tril_ triu_ true_divide_ trunc_ xlogy_
""".split())
# In-place methods with no out-of-place method of the same name minus `_`.
INPLACE_ONLY = frozenset("cauchy_ copy_ exponential_ fill_ fill_diagonal_ geometric_ log_normal_ "
                         "normal_ random_ uniform_ zero_".split())
INPLACE_METHODS = INPLACE_WITH_OUT_OF_PLACE | INPLACE_ONLY

# Attributes / methods whose result shares memory with the receiver for certain (a view), so an
# in-place write through them still reaches the receiver.
VIEW_METHODS = frozenset("view view_as transpose permute unsqueeze squeeze t narrow select unflatten "
                         "movedim moveaxis swapaxes swapdims diagonal unfold expand_as".split())
VIEW_ATTRIBUTES = frozenset({"T", "mT", "mH", "H", "real", "imag"})

# Tensor methods whose result carries the receiver's autograd graph (`.cpu()` does not detach).
GRAPH_METHODS = frozenset("""
abs add addmm baddbmm bmm chunk clamp clamp_max clamp_min clip clone contiguous cos cpu cuda cumsum
cumprod div double exp expand expand_as flatten flip float gather half bfloat16 index_select lerp
log log_softmax logsumexp masked_fill masked_scatter matmul max mean min mm mul narrow neg norm
permute pow prod relu repeat repeat_interleave reshape reshape_as roll rsqrt select sigmoid sin
softmax softplus split sqrt square squeeze std sub sum swapaxes t tanh to transpose tril triu type_as
unbind unflatten unfold unsqueeze var view view_as where movedim moveaxis amax amin cat einsum
""".split())
# Attributes whose value keeps the graph (views).
GRAPH_ATTRIBUTES = VIEW_ATTRIBUTES
# torch functions whose result has no autograd history, or is not a tensor.
NON_GRAPH_FUNCTIONS = frozenset("""
argmax argmin argsort argwhere nonzero eq ne lt le gt ge equal isclose allclose isnan isinf isfinite
is_tensor is_floating_point is_complex numel bucketize searchsorted unique unique_consecutive
count_nonzero histc bincount no_grad inference_mode enable_grad set_grad_enabled is_grad_enabled
get_default_dtype manual_seed seed device dtype finfo iinfo Size broadcast_shapes sym_int sym_float
logical_and logical_or logical_not logical_xor randperm multinomial
""".split()) | TENSOR_FACTORIES
TENSOR_ANNOTATIONS = frozenset({"Tensor", "torch.Tensor", "FloatTensor", "torch.FloatTensor",
                                "LongTensor", "torch.LongTensor"})
# Attribute/method uses that show a forward parameter is a tensor.
TENSOR_EVIDENCE = frozenset("""
shape dtype device ndim size dim view reshape transpose permute unsqueeze squeeze contiguous
float half bfloat16 softmax sigmoid masked_fill matmul flatten numel requires_grad
""".split())

COMPUTED = "computed"  # a tensor computed in this forward: may carry this call's graph
SEED = "seed"  # possibly a tensor (an unannotated forward input, or arithmetic on one)


# -- in-place operations -----------------------------------------------------------------------
def inplace_method(sem: "Semantic", call: cst.CSTNode) -> Optional[str]:
    """The in-place tensor method `call` invokes (`x.add_(y)` -> "add_"), or None. Functions of
    imported modules (`nn.init.zeros_(w)`, `torch.relu_(x)`) do not count."""
    if not method_call(call, *INPLACE_METHODS):
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
        elif method_call(expr, *VIEW_METHODS):
            expr = expr.func.value
        else:
            return expr


def mutation_target(sem: "Semantic", node: cst.CSTNode) -> Optional[Tuple[str, cst.BaseExpression]]:
    """What `node` writes in place: ("method", receiver) for `x.add_(y)`, ("augassign", target) for
    `x += y`, ("item", subscripted) for `x[i] = y` (also `x[i] += y`)."""
    if isinstance(node, cst.Call):
        if inplace_method(sem, node) is None:
            return None
        return "method", node.func.value
    if isinstance(node, cst.AugAssign):
        target = node.target
        if isinstance(target, cst.Subscript):
            return "item", target.value
        return "augassign", target
    if isinstance(node, cst.AssignTarget):
        if isinstance(node.target, cst.Subscript):
            return "item", node.target.value
    return None


# -- leaves that require grad ------------------------------------------------------------------
def _is_parameters_target(sem: "Semantic", loop: cst.CSTNode, name: str) -> bool:
    if not isinstance(loop, (cst.For, cst.CompFor)):
        return False
    kind = sem.is_parameters_iteration(loop.iter)
    target = loop.target
    if kind == "parameters":
        return isinstance(target, cst.Name) and target.value == name
    if kind == "named_parameters":
        return (
            isinstance(target, cst.Tuple)
            and len(target.elements) == 2
            and isinstance(target.elements[1].value, cst.Name)
            and target.elements[1].value.value == name
        )
    return False


def leaf_origin(sem: "Semantic", expr: cst.BaseExpression) -> Optional[str]:
    """How `expr` is known to be a leaf that requires grad: "parameter" (a loop variable over
    `.parameters()`, an `nn.Parameter`), "leaf" (a factory with `requires_grad=True`), or None.

    A name qualifies when every binding of it in its scope makes it one; `w -= lr * w.grad`
    updates in place and does not count as a rebinding."""
    if isinstance(expr, cst.Name):
        bindings = sem.scopes.lookup(expr.value, expr)
        if not bindings:
            return None
        origin = None
        for binding in bindings:
            if binding.kind == "augassign":
                continue
            if binding.kind == "assign" and binding.value is not None:
                found = _construction_origin(sem, binding.value)
            elif binding.kind == "for" and _is_parameters_target(sem, binding.node, expr.value):
                found = "parameter"
            else:
                return None
            if found is None:
                return None
            origin = origin or found
        return origin
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        values = sem.self_attribute_assignments(expr)
        if values and all(_construction_origin(sem, v) is not None for v in values):
            return _construction_origin(sem, values[0])
    return None


def _construction_origin(sem: "Semantic", value: cst.BaseExpression) -> Optional[str]:
    if not sem.is_leaf_requiring_grad_construction(value):
        return None
    if sem.is_torch(value, "torch.nn.Parameter", "torch.nn.parameter.Parameter"):
        return "parameter"
    return "leaf"


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
    for assign in sem.index.descendants(scope, cst.Assign):
        for target in assign.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and t.attr.value == "requires_grad" and dotted_name(t.value) == name:
                return True
    for call in sem.index.nodes(cst.Call):
        if method_call(call, "requires_grad_") and dotted_name(call.func.value) in owners:
            if call.args and not _is_true_literal(call.args[0].value):
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


def function_runs_without_grad(sem: "Semantic", node: cst.CSTNode, depth: int = 3) -> bool:
    """Whether the function holding `node` is called in this file from a `no_grad` /
    `inference_mode` context (or from a function that is), so its body runs with grad off."""
    function = sem.function_of(node)
    if function is None or depth <= 0:
        return False
    name = function.name.value
    for call in sem.index.nodes(cst.Call):
        func = call.func
        callee = func.value if isinstance(func, cst.Name) else (
            func.attr.value if isinstance(func, cst.Attribute) else None)
        if callee != name:
            continue
        if function not in sem.resolve_local_function(call, call):
            continue
        if sem.in_no_grad(call) or function_runs_without_grad(sem, call, depth - 1):
            return True
    return False


def in_autograd_function(sem: "Semantic", node: cst.CSTNode) -> bool:
    """Inside a method of a `torch.autograd.Function` subclass (runs with grad off)."""
    method = sem.method_of(node)
    klass = sem.class_of_method(method)
    if klass is None:
        return False
    return any(sem.is_torch(base.value, "torch.autograd.Function", "torch.autograd.function.Function")
               for base in klass.bases)


def grad_is_off(sem: "Semantic", node: cst.CSTNode) -> bool:
    return sem.in_no_grad(node) or in_autograd_function(sem, node) or function_runs_without_grad(sem, node)


# -- inputs of forward -------------------------------------------------------------------------
def forward_method(sem: "Semantic", node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The `forward` of an nn.Module whose own body holds `node` (not a nested def)."""
    function = sem.function_of(node)
    if function is None or function.name.value != "forward":
        return None
    klass = sem.class_of_method(function)
    if klass is None or klass not in sem.module_classes():
        return None
    return function


def _params(function: cst.FunctionDef) -> List[cst.Param]:
    params = function.params
    return list(params.posonly_params) + list(params.params) + list(params.kwonly_params)


def _annotation_kind(param: cst.Param) -> Optional[str]:
    """"tensor" for `x: Tensor` / `Optional[torch.Tensor]`, "other" for another annotation, None
    for none."""
    if param.annotation is None:
        return None
    annotation = param.annotation.annotation
    if isinstance(annotation, cst.Subscript) and dotted_name(annotation.value) in ("Optional", "typing.Optional"):
        annotation = annotation.slice[0].slice.value if isinstance(annotation.slice[0].slice, cst.Index) else annotation
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        sides = [annotation.left, annotation.right]
        others = [s for s in sides if not (isinstance(s, cst.Name) and s.value == "None")]
        if len(others) == 1:
            annotation = others[0]
    if isinstance(annotation, cst.SimpleString):
        text = annotation.value.strip("'\"")
        return "tensor" if text in TENSOR_ANNOTATIONS else "other"
    return "tensor" if dotted_name(annotation) in TENSOR_ANNOTATIONS else "other"


def _literal_default(param: cst.Param) -> bool:
    default = param.default
    if default is None:
        return False
    if isinstance(default, cst.Name) and default.value == "None":
        return False
    return True


def forward_param(sem: "Semantic", name: cst.Name) -> Optional[cst.Param]:
    """The parameter of the enclosing `forward` that `name` still is at this point: no rebinding
    reaches it (`x = self.fc(x)` and `x = x.clone()` rebind). Plain copies `y = x` and views of the
    input (`x.view(...)`, `x[0]`, `x.transpose(...)`) are followed, since they share its memory."""
    method = forward_method(sem, name)
    if method is None:
        return None
    current: cst.BaseExpression = name
    for _ in range(6):
        current = view_base(current)
        if not isinstance(current, cst.Name):
            return None
        definition = sem.reaching_definition(current)
        if definition is None:
            return None
        if definition.kind == "param":
            param = definition.target
            if param in _params(method) and param is not _params(method)[0]:
                return param
            return None
        if definition.kind != "assign" or definition.value is None:
            return None
        current = definition.value
    return None


def param_is_tensor(sem: "Semantic", param: cst.Param, method: cst.FunctionDef, strong: bool = False) -> bool:
    """Whether a forward parameter is plausibly a tensor: annotated as one, or (unless `strong`)
    unannotated without a literal default and used like a tensor in the body (`x.shape`,
    `x.size()`, `x.view(...)`)."""
    kind = _annotation_kind(param)
    if kind == "tensor":
        return True
    if kind == "other" or strong or _literal_default(param):
        return False
    name = param.name.value
    for attribute in sem.index.descendants(method.body, cst.Attribute):
        if attribute.attr.value in TENSOR_EVIDENCE and isinstance(attribute.value, cst.Name) \
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


# -- tensors computed in forward ---------------------------------------------------------------
def _is_module_callee(sem: "Semantic", func: cst.BaseExpression) -> bool:
    """`self.fc`, `self.blocks[i]`, a name bound to a module, a loop variable over `self.blocks`."""
    if isinstance(func, cst.Subscript):
        func = func.value
    if sem.is_module_expr(func):
        return True
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        return _self_attribute_is_submodule(sem, func)
    if isinstance(func, cst.Name):
        for binding in sem.scopes.lookup(func.value, func) or ():
            if binding.kind == "for" and isinstance(binding.node, cst.For):
                iterable = binding.node.iter
                if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and \
                        iterable.func.value in ("enumerate", "zip") and iterable.args:
                    iterable = iterable.args[-1].value
                if isinstance(iterable, cst.Attribute) and _self_attribute_is_submodule(sem, iterable):
                    return True
    return False


def _self_attribute_is_submodule(sem: "Semantic", attribute: cst.Attribute) -> bool:
    """`self.attr` assigned (in this class) only constructions: `nn.Linear(...)`, `Block(...)`,
    `norm_layer(dim)`, `nn.ModuleList(...)` — and never a method name of the class."""
    values = sem.self_attribute_assignments(attribute)
    if not values:
        return False
    method = sem.method_of(attribute)
    klass = sem.class_of_method(method)
    if klass is not None:
        for statement in klass.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == attribute.attr.value:
                return False
    for value in values:
        if sem.is_module_expr(value):
            continue
        if isinstance(value, cst.Call) and not _is_non_module_call(sem, value):
            continue
        return False
    return True


def _is_non_module_call(sem: "Semantic", call: cst.Call) -> bool:
    name = sem.qualified_name(call.func)
    if name is None:
        func = call.func
        if isinstance(func, cst.Name):
            return func.value in ("dict", "list", "tuple", "set", "int", "float", "str", "bool", "getattr",
                                  "partial", "len", "max", "min", "sum", "range")
        return isinstance(func, cst.Attribute) and func.attr.value[:1].islower() and \
            not isinstance(func.value, cst.Name)  # `x.method()` results
    if name.startswith("torch.nn.") and name.split(".")[-1][:1].isupper():
        return name.split(".")[-1] in ("Parameter", "Buffer")
    return not name.split(".")[-1][:1].isupper()


def forward_value(sem: "Semantic", expr: cst.BaseExpression, depth: int = 12) -> Optional[str]:
    """COMPUTED when `expr` is a tensor computed in this `forward` that may carry its autograd
    graph; SEED when it may be one (an unannotated input); None otherwise (`.detach()`, `.item()`,
    `.shape`, constants, attributes of `self`)."""
    if depth <= 0:
        return None
    if isinstance(expr, cst.Name):
        return _name_value(sem, expr, depth)
    if isinstance(expr, cst.Call):
        return _call_value(sem, expr, depth)
    if isinstance(expr, cst.Attribute):
        if expr.attr.value in GRAPH_ATTRIBUTES:
            return forward_value(sem, expr.value, depth - 1)
        return None
    if isinstance(expr, cst.Subscript):
        inner = forward_value(sem, expr.value, depth - 1)
        return inner
    if isinstance(expr, cst.BinaryOperation):
        left = forward_value(sem, expr.left, depth - 1)
        right = forward_value(sem, expr.right, depth - 1)
        if COMPUTED in (left, right):
            return COMPUTED
        if isinstance(expr.operator, cst.MatrixMultiply) and SEED in (left, right):
            return COMPUTED
        return SEED if SEED in (left, right) else None
    if isinstance(expr, cst.UnaryOperation):
        if isinstance(expr.operator, cst.Not):
            return None
        return forward_value(sem, expr.expression, depth - 1)
    if isinstance(expr, cst.IfExp):
        body = forward_value(sem, expr.body, depth - 1)
        orelse = forward_value(sem, expr.orelse, depth - 1)
        if body == COMPUTED and orelse == COMPUTED:
            return COMPUTED
        return SEED if body or orelse else None
    return None


def _name_value(sem: "Semantic", name: cst.Name, depth: int) -> Optional[str]:
    method = forward_method(sem, name)
    if method is None:
        return None
    definition = sem.reaching_definition(name)
    if definition is not None:
        if definition.kind == "param":
            return _param_value(sem, definition.target, method)
        if definition.kind == "assign" and definition.value is not None:
            return forward_value(sem, definition.value, depth - 1)
        if definition.kind == "other" and isinstance(definition.statement, cst.Assign):
            return _unpacked_value(sem, definition.statement, depth)
        return None
    # Rebound in branches or loops: a computed tensor only if every binding in forward gives one.
    bindings = sem.scopes.bindings_in(method, name.value)
    if not bindings:
        return None
    results = []
    for binding in bindings:
        if binding.kind == "param":
            results.append(_param_value(sem, binding.node, method))
        elif binding.kind == "assign" and binding.value is not None:
            if isinstance(binding.value, cst.Name) and binding.value.value == "None":
                continue
            results.append(forward_value(sem, binding.value, depth - 1))
        elif binding.kind == "assign" and isinstance(binding.node, cst.Assign):
            results.append(_unpacked_value(sem, binding.node, depth))
        elif binding.kind == "augassign":
            continue
        else:
            return None
    if not results or any(r is None for r in results):
        return None
    # A name that is sometimes an input and sometimes a submodule's output is a tensor.
    return COMPUTED if COMPUTED in results else SEED


def _param_value(sem: "Semantic", param: cst.CSTNode, method: cst.FunctionDef) -> Optional[str]:
    if not isinstance(param, cst.Param) or param not in _params(method) or param is _params(method)[0]:
        return None
    kind = _annotation_kind(param)
    if kind == "tensor":
        return COMPUTED
    if kind is None and not _literal_default(param):
        return SEED
    return None


def _unpacked_value(sem: "Semantic", assign: cst.Assign, depth: int) -> Optional[str]:
    """`out, h = self.rnn(x, h)` / `q, k, v = qkv.unbind(0)`: elements of a computed result."""
    value = assign.value
    if isinstance(value, (cst.Tuple, cst.List)):
        return None  # element-wise unpacking: not worth following
    return COMPUTED if forward_value(sem, value, depth - 1) == COMPUTED else None


def _call_value(sem: "Semantic", call: cst.Call, depth: int) -> Optional[str]:
    func = call.func
    name = sem.qualified_name(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
    if name is not None:
        if not name.startswith("torch."):
            return None
        last = name.split(".")[-1]
        if last in NON_GRAPH_FUNCTIONS or last[:1].isupper():
            return None  # factories, comparisons, modules and Parameter constructions
        if any(_argument_value(sem, arg.value, depth) is not None for arg in call.args):
            return COMPUTED
        return None
    if isinstance(func, cst.Attribute):
        method = func.attr.value
        if method in GRAPH_METHODS or method in INPLACE_METHODS:
            if forward_value(sem, func.value, depth - 1) is not None:
                return COMPUTED
    if _is_module_callee(sem, func):
        return COMPUTED
    return None


def _argument_value(sem: "Semantic", value: cst.BaseExpression, depth: int) -> Optional[str]:
    if isinstance(value, (cst.List, cst.Tuple)):
        for element in value.elements:
            found = forward_value(sem, element.value, depth - 1)
            if found is not None:
                return found
        return None
    return forward_value(sem, value, depth - 1)


def self_attribute(node: cst.BaseExpression) -> Optional[cst.Attribute]:
    """`self.attr` itself, or None."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node
    return None


def assigned_pairs(target: cst.BaseExpression, value: cst.BaseExpression) -> Iterator[Tuple[cst.BaseExpression, Optional[cst.BaseExpression]]]:
    """(target element, its value) for an assignment; for a tuple target unpacked from a single
    expression the value is None (an element of it)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements) and \
                not any(isinstance(e, cst.StarredElement) for e in target.elements):
            for element, item in zip(target.elements, value.elements):
                yield from assigned_pairs(element.value, item.value)
        else:
            for element in target.elements:
                yield from assigned_pairs(element.value, None)
        return
    yield target, value


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
            if "\n" in sem.module.code_for_node(string) or "\r" in sem.module.code_for_node(string):
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
        code = sem.module.code_for_node(statement.with_changes(leading_lines=()))
        lines = code.splitlines(keepends=True)
        body = "".join(indent + unit + line if line.strip() else line for line in lines)
        if not body.endswith(("\n", "\r")):
            body += newline
        return f"with torch.no_grad():{newline}{body}"
    if isinstance(statement, cst.BaseSmallStatement):
        line = sem.parent(statement)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        code = sem.module.code_for_node(statement.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)).strip()
        if "\n" in code or "\r" in code:
            return None
        return f"with torch.no_grad():{newline}{indent}{unit}{code}"
    return None
