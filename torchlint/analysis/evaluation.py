"""Facts for the field rules TL104–TL109: evaluation loops, grad mode, loss criteria and the
activations fed to them.

What a value is (a module with Dropout or BatchNorm, a criterion of which class, the output of a
softmax or a sigmoid) comes from the value model (`Semantic.values`). Like every fact, each
answer is "no" when the code does not make it clear, so the rules built on them stay silent.
"""

from __future__ import annotations

import re
from typing import List, Optional

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis import training
from torchlint.analysis.interpreter import GRAD_OFF
from torchlint.analysis.semantic import Semantic, is_true, keyword, method_call
from torchlint.analysis.value import MODULE, identity

# -- grad mode ----------------------------------------------------------------------------------


def certainly_no_grad(sem: Semantic, node: cst.CSTNode) -> bool:
    """`node` certainly runs with autograd off: inside `with torch.no_grad()` /
    `inference_mode()` (not `inference_mode(False)`) or a function decorated with one. (A
    function called only under no_grad may still be called from elsewhere.)"""
    return sem.values.lexical_grad_mode(node) == GRAD_OFF


def mentions_grad_switch(sem: Semantic, node: cst.CSTNode) -> bool:
    """Calls under `node` (following same-file functions) that switch grad mode by hand:
    `torch.set_grad_enabled(...)`, `torch.enable_grad()`."""
    cache = sem.__dict__.setdefault("_grad_switches", {})
    found = cache.get(id(node))
    if found is None:
        found = cache[id(node)] = any(
            sem.is_torch(call, "torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
                         "torch.enable_grad", "torch.autograd.enable_grad", "torch._C._set_grad_enabled")
            for call in sem.calls_under(node))
    return found


def has_backward(sem: Semantic, node: cst.CSTNode) -> bool:
    """Whether anything under `node` (following same-file functions) computes gradients:
    `.backward()`, `torch.autograd.backward/grad`, `optimizer.step()`, `manual_backward`."""
    cache = sem.__dict__.setdefault("_has_backward", {})
    found = cache.get(id(node))
    if found is None:
        found = cache[id(node)] = any(
            method_call(call, "manual_backward", "step") or sem.is_backward_call(call)
            or sem.is_torch(call, "torch.autograd.grad")
            for call in sem.calls_under(node))
    return found


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


_LIBRARIES_WITH_EVAL = ("torch.", "numpy.", "pandas.", "tensorflow.", "jax.", "sympy.", "builtins.")


def is_eval_mode_call(sem: Semantic, call: cst.CSTNode) -> bool:
    """`x.eval()` (no arguments) or `x.train(False)` / `x.train(mode=False)`."""
    if method_call(call, "eval") and not call.args:
        # not a library's function named `eval`; a user's own module imported and then shadowed
        # by its instance (`import model; model = model.RNNModel(...)`) still names a model
        qualified = sem.qualified_name(call.func)
        return qualified is None or not qualified.startswith(_LIBRARIES_WITH_EVAL)
    if method_call(call, "train") and call.args:
        value = call.args[0].value
        return isinstance(value, cst.Name) and value.value == "False"
    return False


def eval_mode_receivers(sem: Semantic, node: cst.CSTNode) -> List[cst.BaseExpression]:
    """What `node` (following same-file calls) switches to eval mode; asked for every call in a
    loop by TL106, so kept per node."""
    cache = sem.__dict__.setdefault("_eval_mode_receivers", {})
    found = cache.get(id(node))
    if found is None:
        found = cache[id(node)] = [c.func.value for c in sem.calls_under(node) if is_eval_mode_call(sem, c)]
    return found


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


# -- frozen models -------------------------------------------------------------------------------


def entirely_frozen(sem: Semantic, func: cst.BaseExpression) -> bool:
    """The evaluated model has all its parameters frozen (`model.requires_grad_(False)`, or
    `p.requires_grad = False` for every `p` of `model.parameters()`): its forward records no
    graph. One frozen parameter elsewhere in the file does not count. (TL106 and TL003 ask it
    for the model whose outputs they report.)"""
    wanted = identity(sem.values.of(func))
    for call in sem.index.nodes(cst.Call):
        if method_call(call, "requires_grad_") and call.args and not is_true(call.args[0].value):
            receiver = call.func.value
            if (same_spelling(receiver, func) and sem.function_of(call) is sem.function_of(func)) or (
                    wanted is not None and identity(sem.values.of(receiver)) is wanted):
                return not trainable_part_added_after(sem, receiver, call)
    for loop in sem.index.nodes(cst.For):
        iterable = loop.iter
        if not (method_call(iterable, "parameters") and isinstance(loop.target, cst.Name)):
            continue
        owner = iterable.func.value
        if not ((same_spelling(owner, func) and sem.function_of(loop) is sem.function_of(func)) or (
                wanted is not None and identity(sem.values.of(owner)) is wanted)):
            continue
        for statement in loop.body.body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assign) and any(
                            isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                            and isinstance(t.target.value, cst.Name) and t.target.value.value == loop.target.value
                            for t in small.targets) and not is_true(small.value):
                        return not trainable_part_added_after(sem, owner, loop)
    return False


def trainable_part_added_after(sem: Semantic, owner: cst.BaseExpression, freeze: cst.CSTNode) -> bool:
    """`model.fc = nn.Linear(512, 2)` after the freeze, in the same scope: the new head has
    parameters that require grad, so the model is no longer entirely frozen."""
    scope = sem.function_of(freeze)
    after = sem.index.order[freeze]
    for assign in sem.index.nodes(cst.Assign):
        if sem.index.order[assign] <= after or sem.function_of(assign) is not scope:
            continue
        for target in assign.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and same_spelling(t.value, owner):
                built = sem.values.of(assign.value)
                if built.kind == MODULE and not (built.module is not None and built.module.stateless):
                    return True
    return False


# -- modules with dropout / batch norm ----------------------------------------------------------


def stochastic_layer_of(sem: Semantic, expr: cst.BaseExpression) -> Optional[str]:
    """When `expr` certainly is a module that contains Dropout or BatchNorm (so its output
    depends on train/eval mode): a short description of the layer, else None."""
    return sem.values.stochastic_layer(sem.values.of(expr))


# -- loss criteria ------------------------------------------------------------------------------

CROSS_ENTROPY_CLASSES = api.CROSS_ENTROPY_CLASSES
NLL_CLASSES = api.NLL_CLASSES
BCE_CLASSES = api.BCE_CLASSES
CROSS_ENTROPY_FUNCTIONS = ("torch.nn.functional.cross_entropy",)
NLL_FUNCTIONS = ("torch.nn.functional.nll_loss",)


def classification_loss_kind(sem: Semantic, call: cst.Call) -> Optional[str]:
    """"ce" when `call` computes a cross-entropy loss (`F.cross_entropy(...)`, a
    `CrossEntropyLoss` instance called), "nll" for a negative log-likelihood loss, else None."""
    possible = sem.__dict__.get("_classification_losses")
    if possible is None:
        # Each test below needs its function or class among the names the file calls: TL108 and
        # TL114 ask this of every call.
        possible = sem.__dict__["_classification_losses"] = not sem.called_names.isdisjoint(
            CROSS_ENTROPY_FUNCTIONS + NLL_FUNCTIONS + tuple(CROSS_ENTROPY_CLASSES) + tuple(NLL_CLASSES))
    if not possible:
        return None
    if sem.is_torch(call, *CROSS_ENTROPY_FUNCTIONS):
        return "ce"
    if sem.is_torch(call, *NLL_FUNCTIONS):
        return "nll"
    if training.is_criterion(sem, call.func, CROSS_ENTROPY_CLASSES):
        return "ce"
    if training.is_criterion(sem, call.func, NLL_CLASSES):
        return "nll"
    return None
BCE_FUNCTIONS = ("torch.nn.functional.binary_cross_entropy",)


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
    "softmax": {"functions": tuple(sorted(api.SOFTMAX_FUNCTIONS)), "method": "softmax"},
    "sigmoid": {"functions": tuple(sorted(api.SIGMOID_FUNCTIONS)), "method": "sigmoid"},
}


def activation_output(sem: Semantic, expr: Optional[cst.BaseExpression], kind: str) -> Optional[cst.CSTNode]:
    """When `expr` certainly is the output of softmax (`kind="softmax"`) or sigmoid: the node
    that applied it (a call, or a model call whose model ends in that activation); else None."""
    if expr is None:
        return None
    value = sem.values.of(expr)
    if value.activation is not None and value.activation[0] == kind:
        return value.activation[1]
    return None


def activation_in_model(sem: Semantic, source: Optional[cst.CSTNode], loss: cst.CSTNode) -> Optional[str]:
    """When the softmax/sigmoid `activation_output` found is applied inside a model (a call of a
    same-file module or a container ending in the activation, not `nn.Softmax(dim=1)(x)` itself,
    or anything applied in a method of a module class other than the one computing `loss`):
    "" or, where a method of the model applies it, ` (in `decode`)`; None when not in a model."""
    if not isinstance(source, cst.Call):
        return None
    function = sem.function_of(source)
    # Applied in a method of a module class (`forward`, `decode`), away from the loss.
    in_forward = function is not None and function is not sem.function_of(loss) \
        and sem.is_module_class(sem.class_of_method(function))
    value = sem.values.of(source.func)
    if not in_forward:
        if value.kind != MODULE or value.module is None:
            return None
        qualified = value.module.qualified or ""
        if qualified.startswith(("torch.nn.Softmax", "torch.nn.Sigmoid", "torch.nn.LogSoftmax",
                                 "torch.nn.modules.activation.")):
            return None
    return f" (in `{function.name.value}`)" if in_forward else ""


def backpropagated_anywhere(sem: Semantic, loss: cst.CSTNode) -> bool:
    """Whether the loss computed at `loss` may be backpropagated: not under `no_grad`, in a file
    that computes gradients somewhere."""
    return not certainly_no_grad(sem, loss) and has_backward(sem, sem.module)
