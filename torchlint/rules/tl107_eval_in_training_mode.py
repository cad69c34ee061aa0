"""TL107: an evaluation loop over a model with Dropout/BatchNorm that was never put in eval mode."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import evaluation
from torchlint.analysis import torch_api as api
from torchlint.analysis.value import LOSS, OPTIMIZER
from torchlint.analysis.semantic import Semantic, method_call
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, InsertBefore, Rule, RuleContext


class EvalInTrainingMode(Rule):
    code = "TL107"
    name = "eval-in-training-mode"
    summary = "Evaluation loop over a model with Dropout/BatchNorm without `model.eval()`"
    fix_availability = "sometimes"
    triggers = ("Dropout", "BatchNorm", "InstanceNorm", "torchvision")
    cross_file_triggers = True
    node_types = (cst.Call,)
    confirmation_module = "tl107"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: an evaluation in training mode gives random outputs (Dropout) and
normalises with the batch's statistics while updating the running statistics (BatchNorm), so the
reported numbers are wrong; an `eval()` never undone in a training loop trains every later epoch
in the wrong mode.
"""
    docs = """
## What it does
Flags two ways of evaluating a model in the wrong mode.

First, a call of a model (or of one of its parts, `model.classifier(h)`, when the network is run
part by part) inside a loop that is clearly evaluation — the call runs under
`torch.no_grad()` / `inference_mode()` in a block that computes no gradients, or the function is
named like `evaluate`, `validate`, `test`, `predict` or `infer` and computes no gradients, or
the whole file never computes gradients (an inference script, whatever its functions are called) — when
the model (the part) certainly contains Dropout or BatchNorm layers (it is built in this file from
such layers, or is a torchvision classifier that has them: `alexnet().classifier` has Dropout,
`alexnet().features` has neither) and nothing in the file ever calls `.eval()` or `.train(False)`.

The rule is deliberately narrow: the model must be a local name whose construction the analysis
sees, it must not be handed to another function before the loop (that function could switch
modes), and a single `.eval()` anywhere in the file silences it. `nn.Dropout(0)` (`p=0.0`) is the
identity in both modes and does not count, nor does a layer of a same-file class that its
`forward` never runs: an attribute no method reads (`self.dropout = nn.Dropout(p)` left unused),
or one read only under `if self.flag:` where the class only ever sets `self.flag = False`. A loop
that runs a model with BatchNorm (and no
Dropout) in training mode on purpose is not an evaluation: a lesson that prints the layer's
running statistics (the file reads `running_mean`, `running_var` or `num_batches_tracked`) and
whose loop computes no metric (`==`, `argmax`, `max`, `topk`, `eq`) and no loss.

Second, a plain `model.eval()` statement in the body of a loop that also trains (a backward
call in the loop, and an optimizer of the file built over `model.parameters()`) when nothing in
the loop ever calls `.train()`: the first iteration trains in training mode, every later one in
eval mode. The same for a validation every k batches (`if i % 100 == 99: model.eval();
validate(model, val_loader)`) where `.train()` is called only at the top of the epoch: after the
first validation the rest of the epoch trains in eval mode. A same-file validation function that
calls `.train()` at its end silences it; a function the analysis cannot follow, or a test that is
not periodic (`if i == len(loader) - 1:`, after which nothing trains), does too.

## Why is this bad?
`no_grad` turns autograd off but leaves the module in training mode: Dropout keeps zeroing
activations at random, so outputs differ from run to run (measured on torch 2.13 by the
confirmation case), and BatchNorm normalises with the batch's statistics and keeps updating its
running statistics from validation data. With batch size 1 BatchNorm raises
`ValueError: Expected more than 1 value per channel when training`. Reported accuracy is wrong
and the model saved afterwards has drifted. The other way round, training after an un-undone
`eval()` runs without Dropout and never updates BatchNorm's running statistics (measured by the
confirmation case: no update in the second epoch).

## Example
```python
model = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5), nn.Linear(16, 2))
...
with torch.no_grad():
    for x, y in val_loader:
        correct += (model(x).argmax(1) == y).sum()
```

Use instead:
```python
model.eval()
with torch.no_grad():
    for x, y in val_loader:
        correct += (model(x).argmax(1) == y).sum()
model.train()  # if training continues
```

## Fix safety
When the evaluation loop is not inside a loop that also trains, the fix inserts `model.eval()`
before it (no fix for the missing `.train()`: where the training steps start is the author's
call). It is unsafe: it changes the model's outputs (that is the point) and leaves the model
in eval mode afterwards, so later code that expected training mode must call `model.train()`.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval
- https://pytorch.org/docs/stable/notes/autograd.html#evaluation-mode-nn-module-eval
- https://pytorch.org/docs/stable/generated/torch.nn.Dropout.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        func = node.func
        if evaluation.is_eval_mode_call(ctx.semantic, node):
            self._check_training_resumed(node, ctx)
            return
        model = _model_name(func)
        if model is None or model.value == "self":
            return  # `self(x)` in a method: its caller sets the mode
        sem = ctx.semantic
        loops = sem.enclosing_loops(node, comprehensions=True)
        if not loops:
            return
        if _any_mode_switch(sem):
            return  # asked first: kept per file, while the reason asks the value model
        scope = evaluation.scope_body(sem, node)
        reason = _clearly_evaluation(sem, node, model, scope)
        if reason is None:
            return
        layer = evaluation.stochastic_layer_of(sem, func)
        if layer is None:
            return
        if _passed_along_before(sem, model.value, scope, loops[-1]):
            return
        if _first_in_loop(sem, node, model, loops[0]) is not node:
            return
        if _normalisation_only(layer) and _watches_running_statistics(sem, loops[-1]):
            return  # a lesson that runs BatchNorm in training mode to show its running statistics
        fix = None
        anchor = _insertion_point(sem, node, loops[0])
        if isinstance(anchor, (cst.For, cst.While, cst.With)) and not any(
            evaluation.has_backward(sem, loop) for loop in sem.enclosing_loops(anchor)
        ):
            fix = FixSpec(f"Call `{model.value}.eval()` before the evaluation loop",
                          (InsertBefore(anchor, f"{model.value}.eval()"),), Applicability.UNSAFE)
        ctx.report(
            node,
            f"`{ctx.code(func)}` has {layer} but is still in training mode in this evaluation loop "
            f"({reason}): {_harm(layer)}; call "
            f"`{model.value}.eval()` before the loop (and `.train()` after it if training resumes)",
            fix,
            severity=Severity.ERROR,  # the evaluation's numbers are wrong on every run
        )


    def _check_training_resumed(self, node: cst.Call, ctx: RuleContext) -> None:
        """`model.eval()` in a loop that also trains, with no `.train()` anywhere in the loop:
        from the second iteration on the training steps run in eval mode."""
        sem = ctx.semantic
        receiver = node.func.value
        if not isinstance(receiver, cst.Name):
            return
        statement = sem.statement_of(node)
        line = sem.parent(statement)
        loops = sem.enclosing_loops(node)
        if not loops or not isinstance(line, cst.SimpleStatementLine):
            return
        loop = loops[0]
        if not sem.is_expression_statement(node):
            return
        periodic = sem.parent(line) is not loop.body
        if periodic and not _under_periodic_test(sem, line, loop):
            return  # only a plain `model.eval()` in the loop body, or one under `if i % k == ...:`
        if not evaluation.has_backward(sem, loop):
            return
        for call in sem.calls_under(loop):
            if method_call(call, "train") or (call is not node and evaluation.is_eval_mode_call(sem, call)
                                              and not evaluation.same_spelling(call.func.value, receiver)):
                return
            if any(isinstance(a.value, cst.Name) and a.value.value == receiver.value for a in call.args) \
                    and not sem.is_torch(call, "torch.*") and not _sees_every_mode_switch(sem, call, loop):
                return  # handed to a function that may switch modes
        for attribute in sem.index.nodes(cst.Attribute):
            if attribute.attr.value == "training" and isinstance(sem.parent(attribute), cst.AssignTarget):
                return
        if not _optimized(sem, receiver):
            return  # e.g. a frozen teacher put in eval mode while a student trains
        layer = evaluation.stochastic_layer_of(sem, receiver)
        if layer is None:
            return
        when = ("after the first periodic validation, every later batch trains in eval mode"
                if periodic else "from the second iteration on, training runs in eval mode")
        ctx.report(
            node,
            f"`{receiver.value}.eval()` in a loop that also trains is never undone: {when} "
            f"({layer}: {_frozen(layer)}); call `{receiver.value}.train()` after the evaluation, "
            f"before the training steps",
            severity=Severity.ERROR,  # every later epoch trains in the wrong mode
        )


def _under_periodic_test(sem: Semantic, line: cst.CSTNode, loop: cst.CSTNode) -> bool:
    """`line` sits, within `loop`'s body and no deeper loop, under `if <...> % <...> ...:` (a
    validation every k batches: later iterations of the loop train again). A test like
    `epoch == epochs - 1` is not periodic: nothing trains after it."""
    for ancestor in sem.ancestors(line):
        if ancestor is loop:
            return False
        if isinstance(ancestor, cst.If) and _has_modulo(sem, ancestor.test):
            return _in_body(sem, line, ancestor)
    return False


def _has_modulo(sem: Semantic, test: cst.BaseExpression) -> bool:
    return any(isinstance(op.operator, cst.Modulo) for op in sem.index.descendants(test, cst.BinaryOperation)) \
        or (isinstance(test, cst.BinaryOperation) and isinstance(test.operator, cst.Modulo))


def _in_body(sem: Semantic, line: cst.CSTNode, branch: cst.If) -> bool:
    return any(ancestor is branch.body for ancestor in sem.ancestors(line))


def _sees_every_mode_switch(sem: Semantic, call: cst.Call, loop: cst.CSTNode) -> bool:
    """`call` is a same-file function (`validate(model, loader)`) whose own calls the loop's
    `calls_under` already holds, so a `.train()` in it would have been seen; and it hands none of
    its parameters to a function the analysis cannot follow (which could switch modes)."""
    targets = sem.resolve_local_function(call, loop)
    if not targets:
        return False
    for function in targets:
        parameters = {param.name.value for param in function.params.params}
        for inner in sem.calls_under(function):
            if sem.resolve_local_function(inner, function) or sem.is_torch(inner, "torch.*"):
                continue
            if isinstance(inner.func, cst.Name) and inner.func.value in _PLAIN_BUILTINS:
                continue
            if isinstance(inner.func, cst.Name) and inner.func.value in parameters:
                continue  # the model itself called on a batch
            if any(isinstance(a.value, cst.Name) and a.value.value in parameters for a in inner.args):
                return False
    return True


_PLAIN_BUILTINS = frozenset("print len sum min max abs round float int str format enumerate zip range "
                            "iter next isinstance sorted list tuple dict set".split())


# What the layer description names (`Dropout`, `BatchNorm2d in `Net``, `resnet18 (BatchNorm/Dropout)`).
def _has_dropout(layer: str) -> bool:
    return "Dropout" in layer


def _has_normalisation(layer: str) -> bool:
    return "Norm" in layer


def _normalisation_only(layer: str) -> bool:
    return _has_normalisation(layer) and not _has_dropout(layer)


def _harm(layer: str) -> str:
    """What training mode does to this evaluation, for the layers the model holds."""
    parts = []
    if _has_dropout(layer):
        parts.append("Dropout zeroes activations at random, so outputs vary from run to run")
    if _has_normalisation(layer):
        parts.append("BatchNorm normalises with each batch's statistics and updates its running "
                     "statistics from this data")
    return " and ".join(parts) or "outputs depend on the mode"


def _frozen(layer: str) -> str:
    parts = []
    if _has_dropout(layer):
        parts.append("Dropout off")
    if _has_normalisation(layer):
        parts.append("BatchNorm statistics frozen")
    return ", ".join(parts) or "layers in eval mode"


_RUNNING_STATISTICS = ("running_mean", "running_var", "num_batches_tracked")
_METRIC_METHODS = ("argmax", "max", "topk", "eq")


def _watches_running_statistics(sem: Semantic, loop) -> bool:
    """The file reads a BatchNorm's running statistics (`print(bn.running_mean)`) and the loop
    computes no metric (no `==`, `argmax`, `max`, `topk`, `eq`) and no loss: BatchNorm is run in
    training mode on purpose, to show how its statistics move."""
    if not any(a.attr.value in _RUNNING_STATISTICS and not isinstance(sem.parent(a), cst.AssignTarget)
               for a in sem.index.nodes(cst.Attribute)):
        return False
    for comparison in sem.index.descendants(loop, cst.Comparison):
        if any(isinstance(c.operator, (cst.Equal, cst.NotEqual)) for c in comparison.comparisons):
            return False
    for call in sem.calls_under(loop):
        if method_call(call, *_METRIC_METHODS):
            return False
        name = sem.qualified_name(call.func) or ""
        if api.is_loss_class(name) or name.startswith("torch.nn.functional.") and "loss" in name \
                or sem.values.of(call).kind == LOSS:
            return False
    return True


def _optimized(sem: Semantic, model: cst.Name) -> bool:
    """An optimizer of this file is built over `model.parameters()`."""
    for call in sem.index.nodes(cst.Call):
        name = sem.qualified_name(call.func)
        if name is None or not api.is_optimizer_class(name) or sem.values.of(call).kind != OPTIMIZER:
            continue
        for inner in sem.index.descendants(call, cst.Call):
            if method_call(inner, "parameters", "named_parameters") and \
                    evaluation.same_spelling(inner.func.value, model):
                return True
    return False


def _model_name(func: cst.BaseExpression) -> Optional[cst.Name]:
    """The model a call runs: `model` for `model(x)`, and for one of its parts run on its own,
    `model.classifier(h)` (a network run layer by layer)."""
    if type(func) is cst.Name:
        return func
    if type(func) is cst.Attribute and type(func.value) is cst.Name:
        return func.value
    return None


def _clearly_evaluation(sem: Semantic, call: cst.Call, model: cst.Name, scope) -> Optional[str]:
    if evaluation.certainly_no_grad(sem, call):
        block = _grad_block(sem, call)
        if block is not None and not evaluation.has_backward(sem, block):
            return "under `no_grad`"
    if isinstance(scope, cst.FunctionDef) and evaluation.is_eval_function_name(scope.name.value) \
            and not evaluation.has_backward(sem, scope):
        return f"in `{scope.name.value}()`"
    if sem.method_of(call) is None and not evaluation.has_backward(sem, sem.module) \
            and type(sem.values.of(model).site) is cst.Call:
        # An inference script (not a model's own code): it builds the model and never trains it.
        return "in a file that never trains it"
    return None


def _grad_block(sem: Semantic, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The with-statement or decorated function that makes `node` run under no_grad."""
    child = node
    for ancestor in sem.ancestors(node):
        if type(ancestor) is cst.With and child is ancestor.body:
            if any(sem.values.grad_context(i.item) is not None for i in ancestor.items):
                return ancestor
        elif type(ancestor) is cst.FunctionDef and child is ancestor.body:
            if any(sem.values.grad_context(d.decorator) is not None for d in ancestor.decorators):
                return ancestor
        child = ancestor
    return None


def _any_mode_switch(sem: Semantic) -> bool:
    """Anything in the file that may put a module in eval mode: `.eval()`, `.train(<not True>)`,
    or `.training = ...` (asked for every call in a loop: kept per file)."""
    found = sem.__dict__.get("_tl107_any_mode_switch")
    if found is None:
        found = sem.__dict__["_tl107_any_mode_switch"] = _find_mode_switch(sem)
    return found


def _find_mode_switch(sem: Semantic) -> bool:
    for call in sem.index.nodes(cst.Call):
        if evaluation.is_eval_mode_call(sem, call):
            return True
        if method_call(call, "train") and call.args:
            value = call.args[0].value
            if not (isinstance(value, cst.Name) and value.value == "True"):
                return True
    for attribute in sem.index.nodes(cst.Attribute):
        if attribute.attr.value == "training":
            parent = sem.parent(attribute)
            if isinstance(parent, cst.AssignTarget):
                return True
    return False


def _passed_along_before(sem: Semantic, name: str, scope, loop) -> bool:
    """`name` is handed to a call before `loop` in `scope` that may switch its mode: not torch's
    own, and not a function of this file (nothing in this file switches modes: the caller has
    checked `_any_mode_switch`)."""
    for call in sem.index.descendants(scope, cst.Call):
        if not evaluation.before(sem, call, loop):
            continue
        for arg in call.args:
            if isinstance(arg.value, cst.Name) and arg.value.value == name:
                if not sem.is_torch(call, "torch.*") and not sem.resolve_local_function(call, call):
                    return True
    return False


def _first_in_loop(sem: Semantic, node: cst.Call, model: cst.Name, loop) -> cst.Call:
    """The first call in `loop` that runs `model` or a part of it holding Dropout/BatchNorm: one
    finding per loop, also when the network is run layer by layer."""
    for call in sem.index.descendants(loop, cst.Call):
        if call is node or not evaluation.before(sem, call, node):
            continue
        if evaluation.same_spelling(call.func, node.func):
            return call
        runs = _model_name(call.func)
        if runs is not None and runs.value == model.value and evaluation.stochastic_layer_of(sem, call.func):
            return call
    return node


def _insertion_point(sem: Semantic, call: cst.Call, loop) -> Optional[cst.CSTNode]:
    """The innermost of the evaluation loop and the no_grad block around the call: the statement
    before which `model.eval()` goes."""
    block = _grad_block(sem, call)
    if isinstance(block, cst.With) and sem.index.contains(loop, block):
        return block
    return loop
