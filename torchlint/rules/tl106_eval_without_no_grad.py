"""TL106: an evaluation loop that runs the model with autograd on."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import evaluation, training
from torchlint.analysis.semantic import Semantic
from torchlint.rules.base import Rule, RuleContext

MODEL_PARAM_NAMES = {"model", "net", "network", "classifier"}


DETACHING = {"detach", "item", "tolist"}


class EvalWithoutNoGrad(Rule):
    code = "TL106"
    name = "eval-without-no-grad"
    summary = "Evaluation loop runs the model with autograd on (`model.eval()` is not `no_grad`)"
    fix_availability = "none"
    triggers = ("val", "test", "predict", "infer", "train")
    node_types = (cst.Call,)
    confirmation_module = "tl106"
    docs = """
## What it does
Flags a model call inside a loop that is evaluation — the loop follows `model.eval()` in the same
function, or the function is named like `evaluate`, `validate`, `test`, `predict` or `infer` —
when nothing in the function computes gradients (no `backward()`, `torch.autograd.grad` or
optimizer `step()`) and the call does not run under `torch.no_grad()` / `torch.inference_mode()`
(block or decorator, here or around every call of the function in this file).

## Why is this bad?
`model.eval()` only switches Dropout and BatchNorm to inference behaviour; it does not turn
autograd off. Every forward pass still records its graph and saves activations for a backward
that never comes, and every output keeps `requires_grad=True`: outputs collected in a list keep
all their graphs alive, so memory grows with the number of batches (measured on torch 2.13 by
the confirmation case: megabytes of saved activations held by live graphs, none under
`no_grad`). Inference also runs slower.

## Example
```python
def evaluate(model, loader):
    model.eval()
    preds = []
    for x, _ in loader:
        preds.append(model(x))
    return torch.cat(preds)
```

Use instead:
```python
@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    preds = []
    for x, _ in loader:
        preds.append(model(x))
    return torch.cat(preds)
```

## Fix safety
No fix is offered: wrapping the loop in `no_grad` changes what the outputs are (no graph,
`requires_grad=False`), which is a behaviour change a caller might depend on.

## References
- https://pytorch.org/docs/stable/generated/torch.no_grad.html
- https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval
- https://pytorch.org/docs/stable/notes/autograd.html#evaluation-mode-nn-module-eval
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        func = node.func
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return
        if isinstance(func, cst.Attribute) and not (isinstance(func.value, cst.Name) and func.value.value == "self"):
            return
        sem = ctx.semantic
        loops = sem.enclosing_loops(node, comprehensions=True)
        if not loops or sem.grad_mode(node) is not None:
            return
        if sem.is_expression_statement(node) or _detached_at_once(sem, node):
            return  # run for its side effects, or `model(x).detach()`: the graph dies at once
        if training.is_loss_call(sem, node) and node.args and _grad_free(sem, node.args[0].value):
            return  # `criterion(out, y)` on an `out` computed under no_grad records no graph
        scope = evaluation.scope_body(sem, node)
        reason = _evaluation_reason(sem, node, func, loops[-1], scope)
        if reason is None:
            return
        if _first_in_loop(sem, node, loops[-1]) is not node:
            return
        if evaluation.has_backward(sem, scope) or evaluation.mentions_grad_switch(sem, scope):
            return
        if isinstance(scope, cst.FunctionDef) and (
            _grad_decorated(sem, scope) or _called_without_grad(sem, scope)
        ):
            return
        if _freezes_parameters(sem):
            return
        ctx.report(
            node,
            f"`{ctx.short(node, 40)}` runs with autograd on in an evaluation loop ({reason}): every "
            "output keeps its graph and saved activations; wrap the loop in `torch.no_grad()` "
            "or `torch.inference_mode()`",
        )


def _evaluation_reason(sem: Semantic, call: cst.Call, func, loop, scope) -> Optional[str]:
    for receiver in evaluation.eval_mode_receivers(sem, scope):
        if evaluation.same_spelling(receiver, func) and evaluation.before(sem, receiver, loop) \
                and evaluation.scope_body(sem, receiver) is scope:
            return f"after `{sem.module.code_for_node(receiver)}.eval()`"
    if isinstance(scope, cst.FunctionDef) and evaluation.is_eval_function_name(scope.name.value):
        certain = sem.is_module_expr(func)
        if not certain and isinstance(func, cst.Name):
            definition = sem.reaching_definition(func)
            certain = definition is not None and definition.kind == "param" and (
                func.value in MODEL_PARAM_NAMES or func.value.endswith("_model")
            )
        if certain:
            return f"in `{scope.name.value}()`"
    return None


def _detached_at_once(sem: Semantic, node: cst.Call) -> bool:
    attribute = sem.parent(node)
    call = sem.parent(attribute) if isinstance(attribute, cst.Attribute) else None
    return isinstance(call, cst.Call) and call.func is attribute and attribute.attr.value in DETACHING


def _grad_free(sem: Semantic, expr: cst.BaseExpression) -> bool:
    """`expr` certainly records no graph: a `.detach()`ed value, or a name assigned under
    `no_grad`/`inference_mode` (or from such a value)."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in DETACHING:
        return True
    if not isinstance(expr, cst.Name):
        return False
    definition = sem.reaching_definition(expr)
    if definition is None or definition.statement is None:
        return False
    if sem.grad_mode(definition.statement) == "no_grad":
        return True
    return definition.kind == "assign" and definition.value is not None and not isinstance(
        definition.value, cst.Name) and _grad_free(sem, definition.value)


def _first_in_loop(sem: Semantic, node: cst.Call, loop) -> cst.Call:
    for call in sem.index.descendants(loop, cst.Call):
        if evaluation.same_spelling(call.func, node.func) and evaluation.before(sem, call, node):
            node = call
    return node


def _grad_decorated(sem: Semantic, function: cst.FunctionDef) -> bool:
    for decorator in function.decorators:
        text = sem.module.code_for_node(decorator.decorator)
        if "grad" in text or "inference" in text:
            return True
    return False


def _called_without_grad(sem: Semantic, function: cst.FunctionDef) -> bool:
    """Some call of `function` in this file runs it under no_grad (or unknown grad mode)."""
    name = function.name.value
    for call in sem.index.nodes(cst.Call):
        func = call.func
        spelled = func.value if isinstance(func, cst.Name) else (
            func.attr.value if isinstance(func, cst.Attribute) else None)
        if spelled == name and sem.grad_mode(call) is not None:
            return True
    return False


def _freezes_parameters(sem: Semantic) -> bool:
    code = sem.module.code
    return "requires_grad_(False)" in code or ".requires_grad = False" in code
