"""Facts for the field rules TL104–TL109: evaluation loops, grad mode, loss criteria and the
activations fed to them, non-leaf tensors.

Functions take the `Semantic` object. Like every fact, each answers "no" when the code does not
make the answer clear, so the rules built on them stay silent.
"""

from __future__ import annotations

import re
from typing import Iterable, List, Optional, Set

import libcst as cst

from torchlint.analysis.semantic import MODULE_SELF_METHODS, Semantic, is_true, keyword, method_call

# -- grad mode ----------------------------------------------------------------------------------


def _disables_with_false_flag(sem: Semantic, item: cst.BaseExpression) -> bool:
    """`torch.inference_mode(False)` / `torch.inference_mode(mode=False)`: grad mode unchanged."""
    if not isinstance(item, cst.Call) or not sem.is_torch(item, "torch.inference_mode",
                                                          "torch.autograd.grad_mode.inference_mode"):
        return False
    flag = keyword(item, "mode")
    if flag is None and item.args and item.args[0].keyword is None:
        flag = item.args[0].value
    return flag is not None and not is_true(flag)


def certainly_no_grad(sem: Semantic, node: cst.CSTNode) -> bool:
    """`node` certainly runs with autograd off: inside `with torch.no_grad()` /
    `inference_mode()` (not `inference_mode(False)`) or a function decorated with one."""
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, cst.With) and child is ancestor.body:
            for item in ancestor.items:
                mode = sem._grad_context(item.item)
                if mode is not None:
                    return mode == "no_grad" and not _disables_with_false_flag(sem, item.item)
        elif isinstance(ancestor, cst.FunctionDef) and child is ancestor.body:
            for decorator in ancestor.decorators:
                mode = sem._grad_context(decorator.decorator)
                if mode is not None:
                    return mode == "no_grad" and not _disables_with_false_flag(sem, decorator.decorator)
            # The function may be called from anywhere: an outer block does not certainly apply.
            return False
        elif isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
            return False
        child = ancestor
    return False


def mentions_grad_switch(sem: Semantic, node: cst.CSTNode) -> bool:
    """Calls under `node` (following same-file functions) that switch grad mode by hand:
    `torch.set_grad_enabled(...)`, `torch.enable_grad()`."""
    for call in sem.calls_under(node):
        if sem.is_torch(call, "torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
                        "torch.enable_grad", "torch.autograd.enable_grad", "torch._C._set_grad_enabled"):
            return True
    return False


def has_backward(sem: Semantic, node: cst.CSTNode) -> bool:
    """Whether anything under `node` (following same-file functions) computes gradients:
    `.backward()`, `torch.autograd.backward/grad`, `optimizer.step()`, `manual_backward`."""
    for call in sem.calls_under(node):
        if sem.is_backward_call(call) or sem.is_torch(call, "torch.autograd.grad"):
            return True
        if method_call(call, "manual_backward", "step"):
            return True
    return False


# -- evaluation loops ---------------------------------------------------------------------------

EVAL_WORDS = {
    "eval", "evaluate", "evaluation", "evaluating", "validate", "validation", "validating", "val",
    "valid", "predict", "prediction", "predicting", "infer", "inference", "inferring",
}
_TEST_FUNCTION = re.compile(r"^(run_|do_)?test(_epoch|_loop|_model|_one_epoch|_net|_network)?$")
# Lightning runs these hooks with grad disabled and the model in eval mode by itself.
_FRAMEWORK_HOOK = re.compile(r"^(validation|test|predict|val)_(step|epoch_end|step_end|dataloader)$"
                             r"|^on_(validation|test|predict)_")


def is_eval_function_name(name: str) -> bool:
    """`evaluate`, `validate`, `run_validation`, `eval_epoch`, `predict`, `infer`, `test`
    (but not pytest's `test_*` functions, nor Lightning's `validation_step` hooks)."""
    lowered = name.lower()
    if _FRAMEWORK_HOOK.search(lowered):
        return False
    if lowered.startswith("test_") and not _TEST_FUNCTION.match(lowered):
        return False  # pytest collects these: tests, not evaluation loops
    if _TEST_FUNCTION.match(lowered):
        return True
    tokens = [t for t in lowered.strip("_").split("_") if t]
    return any(t in EVAL_WORDS for t in tokens)


def is_framework_hook(name: str) -> bool:
    return bool(_FRAMEWORK_HOOK.search(name.lower()))


def is_eval_mode_call(sem: Semantic, call: cst.CSTNode) -> bool:
    """`x.eval()` (no arguments) or `x.train(False)` / `x.train(mode=False)`."""
    if method_call(call, "eval") and not call.args:
        return sem.qualified_name(call.func) is None  # not builtins/`torch.eval`-like names
    if method_call(call, "train") and call.args:
        value = call.args[0].value
        return isinstance(value, cst.Name) and value.value == "False"
    return False


def eval_mode_receivers(sem: Semantic, node: cst.CSTNode) -> List[cst.BaseExpression]:
    return [c.func.value for c in sem.calls_under(node) if is_eval_mode_call(sem, c)]


def same_spelling(a: cst.CSTNode, b: cst.CSTNode) -> bool:
    if isinstance(a, cst.Name) and isinstance(b, cst.Name):
        return a.value == b.value
    if isinstance(a, cst.Attribute) and isinstance(b, cst.Attribute):
        return a.attr.value == b.attr.value and same_spelling(a.value, b.value)
    return False


def before(sem: Semantic, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    return sem.index.order[a] < sem.index.order[b]




def scope_body(sem: Semantic, node: cst.CSTNode) -> cst.CSTNode:
    """The function holding `node`, or the module for top-level code."""
    function = sem.function_of(node)
    return function if function is not None else sem.module


# -- modules with dropout / batch norm ----------------------------------------------------------

STOCHASTIC_LAYERS = re.compile(
    r"^torch\.nn\.(Dropout\d?d?|AlphaDropout|FeatureAlphaDropout|BatchNorm[123]d|SyncBatchNorm|"
    r"LazyBatchNorm[123]d|InstanceNorm[123]d)$"
)
# torchvision classifiers built with BatchNorm or Dropout layers.
TORCHVISION_STOCHASTIC = re.compile(
    r"^torchvision\.models\.(resnet\d+|resnext\w+|wide_resnet\w+|densenet\d+|mobilenet_v\w+|"
    r"efficientnet\w*|alexnet|vgg\d+(_bn)?|googlenet|inception_v3|shufflenet\w+|mnasnet\w+|"
    r"regnet\w+|squeezenet\w+)$"
)


def _stochastic_layer_in(sem: Semantic, node: cst.CSTNode) -> Optional[cst.Call]:
    for call in sem.index.descendants(node, cst.Call):
        name = sem.qualified_name(call.func)
        if name is not None and STOCHASTIC_LAYERS.match(name):
            if name.startswith("torch.nn.InstanceNorm") and not is_true(keyword(call, "track_running_stats")):
                continue
            return call
    return None


def stochastic_layer_of(sem: Semantic, expr: cst.BaseExpression, depth: int = 4) -> Optional[str]:
    """When `expr` certainly is a module that contains Dropout or BatchNorm (so its output
    depends on train/eval mode): a short description of the layer, else None."""
    if depth <= 0:
        return None
    if isinstance(expr, cst.Name):
        value = sem.reaching_value(expr)
        if value is None or value is expr:
            bindings = sem.scopes.lookup(expr.value, expr) or ()
            values = [b.value for b in bindings if b.kind == "assign" and b.value is not None]
            if len(values) != 1 or len(values) != len(bindings):
                return None
            value = values[0]
        return stochastic_layer_of(sem, value, depth - 1)
    if method_call(expr, "to", "cuda", "cpu", "float", "double", "half", "bfloat16"):
        return stochastic_layer_of(sem, expr.func.value, depth - 1)
    if not isinstance(expr, cst.Call):
        return None
    name = sem.qualified_name(expr.func)
    if name is not None:
        if STOCHASTIC_LAYERS.match(name):
            return name.rsplit(".", 1)[-1]
        if TORCHVISION_STOCHASTIC.match(name):
            return f"{name.rsplit('.', 1)[-1]} (BatchNorm/Dropout)"
        if name == "torch.nn.Sequential":
            for arg in expr.args:
                found = stochastic_layer_of(sem, arg.value, depth - 1)
                if found is not None:
                    return found
        return None
    if isinstance(expr.func, cst.Name):
        for binding in sem.scopes.lookup(expr.func.value, expr) or ():
            if binding.kind == "class" and binding.node in sem.module_classes():
                return _class_stochastic_layer(sem, binding.node, set())
    return None


def _class_stochastic_layer(sem: Semantic, klass: cst.ClassDef, seen: Set[cst.ClassDef]) -> Optional[str]:
    if klass in seen:
        return None
    seen.add(klass)
    call = _stochastic_layer_in(sem, klass.body)
    if call is not None:
        return f"{sem.qualified_name(call.func).rsplit('.', 1)[-1]} in `{klass.name.value}`"
    by_name = {c.name.value: c for c in sem.index.nodes(cst.ClassDef)}
    for arg in klass.bases:
        base = by_name.get(arg.value.value) if isinstance(arg.value, cst.Name) else None
        if base is not None:
            found = _class_stochastic_layer(sem, base, seen)
            if found is not None:
                return found
    # Submodules of same-file classes built in __init__.
    for call in sem.index.descendants(klass.body, cst.Call):
        if isinstance(call.func, cst.Name) and call.func.value in by_name:
            inner = by_name[call.func.value]
            if inner in sem.module_classes():
                found = _class_stochastic_layer(sem, inner, seen)
                if found is not None:
                    return found
    return None


# -- loss criteria ------------------------------------------------------------------------------

CROSS_ENTROPY_CLASSES = ("torch.nn.CrossEntropyLoss", "torch.nn.modules.loss.CrossEntropyLoss")
NLL_CLASSES = ("torch.nn.NLLLoss", "torch.nn.modules.loss.NLLLoss")
BCE_CLASSES = ("torch.nn.BCELoss", "torch.nn.modules.loss.BCELoss")
CROSS_ENTROPY_FUNCTIONS = ("torch.nn.functional.cross_entropy",)
NLL_FUNCTIONS = ("torch.nn.functional.nll_loss",)
BCE_FUNCTIONS = ("torch.nn.functional.binary_cross_entropy",)


def is_criterion(sem: Semantic, expr: cst.BaseExpression, classes: Iterable[str], depth: int = 4) -> bool:
    """`expr` certainly is an instance of one of the loss `classes`: `nn.CrossEntropyLoss()`
    itself, or a name / `self.attr` every assignment of which constructs one."""
    classes = tuple(classes)
    if depth <= 0:
        return False
    if isinstance(expr, cst.Call):
        return sem.is_torch(expr, *classes)
    spelled = expr.value if isinstance(expr, cst.Name) else (
        expr.attr.value if isinstance(expr, cst.Attribute) else None)
    if spelled is None or spelled not in _constructed_names(sem, classes):
        return False
    return sem.bound_value_is(expr, lambda v: is_criterion(sem, v, classes, depth - 1))


def _cache(sem: Semantic) -> dict:
    cache = sem.__dict__.get("_evaluation_cache")
    if cache is None:
        cache = sem.__dict__["_evaluation_cache"] = {}
    return cache


def _constructed_names(sem: Semantic, classes: tuple) -> Set[str]:
    """Names and attribute names that some assignment in the file binds to a `classes(...)`
    construction, or to another such name: a cheap filter before the dataflow questions."""
    cache = _cache(sem)
    key = ("constructed", classes)
    found = cache.get(key)
    if found is None:
        found = set()
        assigns = sem.index.nodes(cst.Assign)
        changed = True
        while changed:
            changed = False
            for assign in assigns:
                value = assign.value
                hit = (isinstance(value, cst.Call) and sem.is_torch(value, *classes)) or (
                    isinstance(value, cst.Name) and value.value in found)
                if not hit:
                    continue
                for target in assign.targets:
                    t = target.target
                    spelled = t.value if isinstance(t, cst.Name) else (
                        t.attr.value if isinstance(t, cst.Attribute) else None)
                    if spelled is not None and spelled not in found:
                        found.add(spelled)
                        changed = True
        cache[key] = found
    return found


def loss_input(call: cst.Call) -> Optional[cst.BaseExpression]:
    """The prediction argument of a loss call: first positional, or `input=`."""
    value = keyword(call, "input")
    if value is not None:
        return value
    if call.args and call.args[0].keyword is None and not call.args[0].star:
        return call.args[0].value
    return None


# -- softmax / sigmoid outputs ------------------------------------------------------------------

ACTIVATIONS = {
    "softmax": {
        "functions": ("torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"),
        "modules": ("torch.nn.Softmax", "torch.nn.modules.activation.Softmax"),
        "method": "softmax",
    },
    "sigmoid": {
        "functions": ("torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"),
        "modules": ("torch.nn.Sigmoid", "torch.nn.modules.activation.Sigmoid"),
        "method": "sigmoid",
    },
}


def _is_activation_module(sem: Semantic, expr: cst.BaseExpression, kind: str, depth: int = 6) -> bool:
    """`expr` is an `nn.Softmax(...)`/`nn.Sigmoid()` instance (or a Sequential ending in one)."""
    spec = ACTIVATIONS[kind]
    if depth <= 0:
        return False
    if isinstance(expr, cst.Call):
        if sem.is_torch(expr, *spec["modules"]):
            return True
        if sem.is_torch(expr, "torch.nn.Sequential") and expr.args:
            last = expr.args[-1]
            return not last.star and _is_activation_module(sem, last.value, kind, depth - 1)
        if isinstance(expr.func, cst.Name):
            for binding in sem.scopes.lookup(expr.func.value, expr) or ():
                if binding.kind == "class" and binding.node in sem.module_classes():
                    return _forward_returns_activation(sem, binding.node, kind, depth - 1)
        if method_call(expr, *MODULE_SELF_METHODS):  # `D = D.to(device)` is the same module
            return _is_activation_module(sem, expr.func.value, kind, depth - 1)
        return False
    return sem.bound_value_is(expr, lambda v: _is_activation_module(sem, v, kind, depth - 1))


def _forward_returns_activation(sem: Semantic, klass: cst.ClassDef, kind: str, depth: int) -> bool:
    forward = None
    for statement in klass.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "forward":
            forward = statement
    if forward is None:
        return False
    returns = [r for r in sem.index.descendants(forward.body, cst.Return)
               if sem.function_of(r) is forward]
    if not returns or any(r.value is None for r in returns):
        return False
    return all(activation_output(sem, r.value, kind, depth) is not None for r in returns)


# Tensor methods that rearrange values without changing them: a sigmoid output stays one.
_VALUE_KEEPING_METHODS = {"view", "reshape", "squeeze", "unsqueeze", "flatten", "contiguous", "view_as",
                          "reshape_as", "float", "double"}


def activation_output(sem: Semantic, expr: Optional[cst.BaseExpression], kind: str,
                      depth: int = 12) -> Optional[cst.CSTNode]:
    """When `expr` certainly is the output of softmax (`kind="softmax"`) or sigmoid: the node
    that applied it (a call, or a model call whose model ends in that activation); else None."""
    if expr is None or depth < 0:
        return None
    spec = ACTIVATIONS[kind]
    if isinstance(expr, cst.Name):
        value = sem.reaching_value(expr)
        if value is None or value is expr:
            return None
        return activation_output(sem, value, kind, depth - 1)
    if not isinstance(expr, cst.Call):
        return None
    if sem.is_torch(expr, *spec["functions"]):
        return expr
    if method_call(expr, *_VALUE_KEEPING_METHODS) and sem.qualified_name(expr.func.value) is None:
        return activation_output(sem, expr.func.value, kind, depth - 1)  # `probs.squeeze(1)`
    if method_call(expr, spec["method"]):
        receiver = expr.func.value
        if not (isinstance(receiver, cst.Name) and receiver.value == "self"):
            return expr if sem.qualified_name(receiver) is None else None
    # `nn.Softmax(dim=1)(x)`, `self.softmax(x)`, `model(x)` with model ending in the activation.
    if expr.args and _is_activation_module(sem, expr.func, kind, depth):
        return expr
    return None


# -- non-leaf tensors ---------------------------------------------------------------------------

DIFFERENTIABLE_METHODS = {
    "sum", "mean", "exp", "log", "pow", "sigmoid", "tanh", "relu", "matmul", "mm", "bmm", "mul",
    "add", "sub", "div", "view", "reshape", "t", "clone", "unsqueeze", "squeeze", "abs", "sin", "cos",
    "norm", "sqrt", "expand", "flatten", "softmax", "log_softmax", "transpose", "permute", "square",
    "prod", "cumsum", "max", "min", "clamp", "neg", "reciprocal",
}
DIFFERENTIABLE_FUNCTIONS = {
    "torch." + n for n in (
        "sigmoid", "exp", "log", "tanh", "relu", "matmul", "mm", "bmm", "sum", "mean", "mul", "add",
        "sub", "div", "pow", "sin", "cos", "sqrt", "abs", "square", "cat", "stack", "softmax", "norm",
        "clamp", "outer", "dot", "einsum",
    )
} | {"torch.nn.functional." + n for n in ("linear", "relu", "softmax", "log_softmax", "gelu", "mse_loss")}
_FLOAT_DTYPES_OTHER_THAN_FLOAT32 = {"float64", "double", "float16", "half", "bfloat16"}


def _is_factory_leaf(sem: Semantic, expr: cst.BaseExpression) -> Optional[cst.Call]:
    """A `torch.<factory>(..., requires_grad=True)` call (through a name), else None."""
    value = sem.reaching_value(expr) if isinstance(expr, cst.Name) else expr
    if isinstance(value, cst.Call) and not method_call(value, "requires_grad_") \
            and sem.is_leaf_requiring_grad_construction(value) \
            and not sem.is_torch(value, "torch.nn.Parameter", "torch.nn.parameter.Parameter"):
        return value
    return None


def _requires_grad_tensor(sem: Semantic, expr: cst.BaseExpression, depth: int) -> bool:
    return sem.requires_grad_leaf(expr) or non_leaf_source(sem, expr, depth - 1) is not None


def non_leaf_source(sem: Semantic, expr: cst.BaseExpression, depth: int = 3) -> Optional[cst.CSTNode]:
    """When `expr` certainly is a non-leaf tensor that requires grad (an operation recorded by
    autograd on a tensor requiring grad): the operation; else None."""
    if depth <= 0 or expr is None:
        return None
    if isinstance(expr, cst.Name):
        definition = sem.reaching_definition(expr)
        if definition is None or definition.kind != "assign" or definition.value is None:
            return None
        if certainly_no_grad(sem, definition.statement) or sem.grad_mode(definition.statement) is not None:
            return None
        return non_leaf_source(sem, definition.value, depth)
    if isinstance(expr, cst.BinaryOperation):
        if any(_requires_grad_tensor(sem, side, depth) for side in (expr.left, expr.right)):
            return expr
        return None
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return expr if _requires_grad_tensor(sem, expr.expression, depth) else None
    if isinstance(expr, cst.Subscript):
        return expr if _requires_grad_tensor(sem, expr.value, depth) else None
    if not isinstance(expr, cst.Call):
        return None
    if sem.is_torch(expr, *DIFFERENTIABLE_FUNCTIONS):
        if any(not a.star and a.keyword is None and _requires_grad_tensor(sem, a.value, depth)
               for a in expr.args):
            return expr
        return None
    if not isinstance(expr.func, cst.Attribute):
        return None
    method = expr.func.attr.value
    receiver = expr.func.value
    if method in DIFFERENTIABLE_METHODS:
        return expr if _requires_grad_tensor(sem, receiver, depth) else None
    # Conversions make a new (non-leaf) tensor only when they change something: judged for a
    # factory leaf, whose dtype is float32 and device the CPU unless it says otherwise.
    factory = _is_factory_leaf(sem, receiver)
    if factory is None:
        return None
    if method in ("double", "half", "bfloat16") and not expr.args:
        return expr if keyword(factory, "dtype") is None else None
    if method == "cuda":
        return expr if keyword(factory, "device") is None else None
    if method == "to" and expr.args:
        first = keyword(expr, "dtype")
        if first is None:
            first = expr.args[0].value if expr.args[0].keyword is None else None
        if first is None:
            return None
        name = sem.qualified_name(first)
        if name is not None and name.startswith("torch.") and \
                name.split(".")[-1] in _FLOAT_DTYPES_OTHER_THAN_FLOAT32 and keyword(factory, "dtype") is None:
            return expr
    return None
