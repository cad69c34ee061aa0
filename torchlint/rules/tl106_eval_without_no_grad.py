"""TL106: an evaluation loop that runs the model with autograd on."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import evaluation
from torchlint.analysis.value import AG_GRAPH, INPUT, MODULE, UNKNOWN
from torchlint.analysis.semantic import Semantic, is_true, method_call
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext
from torchlint.positions import code_for_node



DETACHING = {"detach", "item", "tolist"}


class EvalWithoutNoGrad(Rule):
    code = "TL106"
    name = "eval-without-no-grad"
    summary = "Evaluation loop runs the model with autograd on (`model.eval()` is not `no_grad`)"
    fix_availability = "none"
    triggers = ("val", "test", "predict", "infer", "train")
    node_types = (cst.Call,)
    confirmation_module = "tl106"
    severity_docs = """
A **warning** when the loop keeps outputs that carry a graph beyond their batch (`preds.append(out)`,
`total += loss` as a tensor, into a list or sum made before the loop): every batch's graph and
saved activations stay alive, memory that grows with the number of batches. A **note** when each
batch's graph is freed as the next output replaces it (only `.item()`, `argmax`, `.detach()` of the
outputs are kept), or the loop detaches the outputs in place right away (`outputs.detach_()`): the
results are right and only the forward's extra memory and time remain.
"""
    docs = """
## What it does
Flags a model call inside a loop that is evaluation — the loop follows `model.eval()` in the same
function (also a validation loop inside an epoch loop that trains: the loop itself computes no
gradients), or the function is named like `evaluate`, `validate`, `test`, `predict` or `infer`
and computes no gradients — when the call does not run under `torch.no_grad()` /
`torch.inference_mode()` (block or decorator, here or around every call of the function in this
file). The model may be a parameter that every caller in the file passes a module to, and a
submodule call (`net.encoder(x)` after `net.eval()`) counts; a loss criterion called on the
model's output is not reported (the model call is), nor a model whose parameters are all frozen
(`model.requires_grad_(False)`, or `requires_grad = False` for each of its parameters).

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
        if type(func) not in (cst.Name, cst.Attribute):
            return
        sem = ctx.semantic
        loops = sem.enclosing_loops(node, comprehensions=True)
        if not loops or sem.values.lexical_grad_mode(node) is not None:
            return
        if sem.is_expression_statement(node) or _detached_at_once(sem, node):
            return  # run for its side effects, or `model(x).detach()`: the graph dies at once
        loop = _evaluation_loop(sem, loops)
        if loop is None:
            return  # the innermost loop trains
        scope = evaluation.scope_body(sem, node)
        if not _may_evaluate(sem, func, loop, scope):
            return  # no reason can hold, whatever the callee is: the value model is not asked
        if isinstance(func, cst.Attribute) and func.attr.value != "forward" and sem.values.of(func).kind != MODULE \
                and not _switched_to_eval_here(sem, func, node):
            return  # `net.eval()`, `model.detect_objects(...)`, `rnn.init_hidden(n)`: a method, not a forward
        reason = _evaluation_reason(sem, node, func, loop, scope)
        if reason is None:
            return
        if _first_in_loop(sem, node, loop) is not node:
            return
        if evaluation.mentions_grad_switch(sem, scope):
            return
        if isinstance(scope, cst.FunctionDef) and (
            _grad_decorated(sem, scope) or _called_without_grad(sem, scope)
        ):
            return
        if evaluation.entirely_frozen(sem, func):
            return
        detached = _detached_in_place(sem, node, loop)
        if detached is not None:
            harm = (f"each batch's forward still records a graph and saves its activations (`{detached}` "
                    "frees them only afterwards)")
            severity = Severity.NOTE  # the outputs are right and the graphs freed each batch
        else:
            kept = _kept_across_batches(sem, loop)
            if kept is not None:
                harm = (f"every output keeps its graph and saved activations, and `{kept}` keeps them "
                        "across batches: memory grows with every batch")
                severity = Severity.WARNING  # memory grows with the number of batches
            else:
                harm = ("each batch's forward records a graph and saves its activations (freed when the next "
                        "batch replaces them: extra memory and time, the results are right)")
                severity = Severity.NOTE
        volatile = _volatile_relied_on(sem, loop, scope) or _volatile_input(sem, node)
        if volatile is not None:
            harm += (f"; `{volatile}` does not help: `volatile` was removed in PyTorch 0.4 and is "
                     "ignored (torch 2.13 warns 'volatile was removed and now has no effect')")
        ctx.report(
            node,
            f"`{ctx.short(node, 40)}` runs with autograd on in an evaluation loop ({reason}): {harm}; "
            "wrap the loop in `torch.no_grad()` or `torch.inference_mode()`",
            severity=severity,
        )


def _kept_across_batches(sem: Semantic, loop) -> Optional[str]:
    """The first statement of the loop that keeps a value carrying a graph beyond its batch:
    `outputs.append(out)`, `preds.extend([model(x)])`, `total += loss` (a tensor, not `.item()`),
    into a container or sum the loop does not make afresh."""
    for node in sem.index.descendants(loop, (cst.Call, cst.AugAssign)):
        if isinstance(node, cst.Call):
            if not (method_call(node, "append", "extend") and len(node.args) == 1):
                continue
            value, target = node.args[0].value, node.func.value
            if isinstance(value, (cst.List, cst.Tuple)):
                elements = [e.value for e in value.elements if isinstance(e, cst.Element)]
            else:
                elements = [value]
        else:
            if not isinstance(node.operator, cst.AddAssign):
                continue
            target, elements = node.target, [node.value]
        root = target
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        if isinstance(root, cst.Name) and _made_in(sem, loop, root.value):
            continue  # a fresh container or sum every batch
        if any(_carries_graph(sem, e) for e in elements):
            return code_for_node(sem.module, node if isinstance(node, cst.Call) else node).strip()
    return None


def _carries_graph(sem: Semantic, expr: cst.BaseExpression) -> bool:
    value = sem.values.of(expr)
    return value.is_tensor and value.autograd == AG_GRAPH


def _made_in(sem: Semantic, loop, name: str) -> bool:
    """`name = ...` (a plain assignment) in the loop's body: the container is made afresh."""
    for assign in sem.index.descendants(loop, cst.Assign):
        if any(isinstance(t.target, cst.Name) and t.target.value == name for t in assign.targets):
            return True
    return False


def _detached_in_place(sem: Semantic, node: cst.Call, loop) -> Optional[str]:
    """`outputs = model(x)` followed in the loop by `outputs.detach_()`: the text of that call."""
    statement = sem.statement_of(node)
    if not isinstance(statement, cst.Assign) or statement.value is not node:
        return None
    names = {t.target.value for t in statement.targets if isinstance(t.target, cst.Name)}
    for call in sem.index.descendants(loop, cst.Call):
        if method_call(call, "detach_") and isinstance(call.func.value, cst.Name) \
                and call.func.value.value in names and evaluation.before(sem, node, call):
            return code_for_node(sem.module, call)
    return None


def _volatile_relied_on(sem: Semantic, loop, scope) -> Optional[str]:
    """`Variable(x, volatile=True)` in the loop (or before it in its function): the text of the
    keyword, which the code relies on to turn autograd off."""
    where = loop if isinstance(scope, cst.Module) else scope
    for call in sem.index.descendants(where, cst.Call):
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "volatile" and is_true(arg.value):
                return code_for_node(sem.module, arg).strip().rstrip(",")
    return None


def _volatile_input(sem: Semantic, node: cst.Call) -> Optional[str]:
    """An argument of the model call bound to `Variable(..., volatile=True)` (`test_x =
    Variable(x, volatile=True)` at the top of a script): the text of the keyword."""
    for arg in node.args:
        if not isinstance(arg.value, cst.Name):
            continue
        for binding in sem.scopes.lookup(arg.value.value, arg.value) or ():
            value = binding.value
            if binding.kind != "assign" or not isinstance(value, cst.Call):
                continue
            for keyword in value.args:
                if keyword.keyword is not None and keyword.keyword.value == "volatile" and is_true(keyword.value):
                    return code_for_node(sem.module, keyword).strip().rstrip(",")
    return None


def _evaluation_loop(sem: Semantic, loops) -> Optional[cst.CSTNode]:
    """The outermost of the loops around the call that runs no backward pass (the validation
    loop inside an epoch loop that also trains), or None when the innermost one trains."""
    found = None
    for loop in loops:  # innermost first
        if evaluation.has_backward(sem, loop):
            break
        found = loop
    return found


def _evaluation_reason(sem: Semantic, call: cst.Call, func, loop, scope) -> Optional[str]:
    """Why this loop evaluates the callee: it runs after `model.eval()` (which also shows the
    callee is a module), or in a function named like evaluation where the callee is certainly a
    module (or a parameter named like one, in a file that imports torch). A loss criterion called
    on the model's output is not the model call."""
    for receiver in evaluation.eval_mode_receivers(sem, scope):
        if _same_or_part_of(receiver, func) and evaluation.before(sem, receiver, loop) \
                and evaluation.scope_body(sem, receiver) is scope:
            if sem.values.of(func).kind not in (MODULE, UNKNOWN, INPUT):
                return None
            return f"after `{code_for_node(sem.module, receiver)}.eval()`"
    if isinstance(scope, cst.FunctionDef) and evaluation.is_eval_function_name(scope.name.value) \
            and not evaluation.has_backward(sem, scope) and not sem.is_module_class(sem.class_of_method(scope)):
        model = sem.values.of(func)
        if model.kind == MODULE or (model.role == "model" and sem.imports_torch):
            return f"in `{scope.name.value}()`"
    return None


def _may_evaluate(sem: Semantic, func, loop, scope) -> bool:
    """The syntactic half of `_evaluation_reason`: a `.eval()` of the callee (or of what holds it)
    before the loop in the same scope, or a function named like evaluation that runs no backward
    and is no module's method. Without it there is no reason, whatever the callee's value."""
    for receiver in evaluation.eval_mode_receivers(sem, scope):
        if _same_or_part_of(receiver, func) and evaluation.before(sem, receiver, loop) \
                and evaluation.scope_body(sem, receiver) is scope:
            return True
    return isinstance(scope, cst.FunctionDef) and evaluation.is_eval_function_name(scope.name.value) \
        and not evaluation.has_backward(sem, scope) and not sem.is_module_class(sem.class_of_method(scope))


def _switched_to_eval_here(sem: Semantic, func: cst.Attribute, call: cst.Call) -> bool:
    """`self.model.eval()` earlier in the same function shows that `self.model` (set by a base
    class this file cannot see) is a module, when nothing says otherwise."""
    if sem.values.of(func).kind not in (UNKNOWN, INPUT):
        return False
    scope = evaluation.scope_body(sem, call)
    return any(evaluation.same_spelling(receiver, func) and evaluation.before(sem, receiver, call)
               and evaluation.scope_body(sem, receiver) is scope
               for receiver in evaluation.eval_mode_receivers(sem, scope))


def _same_or_part_of(receiver: cst.CSTNode, func: cst.CSTNode) -> bool:
    """`model.eval()` covers `model(x)` and `model.decoder(x)`."""
    while True:
        if evaluation.same_spelling(receiver, func):
            return True
        if not isinstance(func, cst.Attribute):
            return False
        func = func.value


def _detached_at_once(sem: Semantic, node: cst.Call) -> bool:
    attribute = sem.parent(node)
    call = sem.parent(attribute) if type(attribute) is cst.Attribute else None
    return type(call) is cst.Call and call.func is attribute and attribute.attr.value in DETACHING


def _first_in_loop(sem: Semantic, node: cst.Call, loop) -> cst.Call:
    for call in sem.index.descendants(loop, cst.Call):
        if evaluation.same_spelling(call.func, node.func) and evaluation.before(sem, call, node):
            node = call
    return node


def _grad_decorated(sem: Semantic, function: cst.FunctionDef) -> bool:
    for decorator in function.decorators:
        text = code_for_node(sem.module, decorator.decorator)
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
        if spelled == name and sem.values.lexical_grad_mode(call) is not None:
            return True
    return False
