"""TL003: a loss tensor (with its autograd graph) kept across loop iterations."""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from torchlint.analysis import evaluation, training
from torchlint.analysis.semantic import method_call_in
from torchlint.analysis.value import AG_GRAPH, GRAD_OFF, GRAD_UNKNOWN, LOADER, LOSS, MODULE, TENSOR_KINDS
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

# (kind, container, grown elements, statement)
Growth = Tuple[str, cst.BaseExpression, List[cst.BaseExpression], cst.CSTNode]
# Iterables that look like data (a training or evaluation loop), not like heads or loss terms.
_DATA_WORDS = ("loader", "dataset", "batches", "epoch", "tqdm", "data", "iterator", "steps")


_GROWING_METHODS = frozenset(("append", "extend"))  # the list growth `_growth` recognises

class LossKeptAcrossIterations(Rule):
    code = "TL003"
    name = "loss-kept-across-iterations"
    summary = "Loss tensor (or model output) stored or summed across iterations keeps every autograd graph alive"
    fix_availability = "sometimes"
    triggers = ("append", "extend", "+")
    node_types = (cst.Call, cst.AugAssign, cst.Assign)
    called_names = _GROWING_METHODS
    confirmation_module = "tl003"
    default_severity = Severity.WARNING
    severity_docs = """
A **warning**: keeping each iteration's loss with its graph (`total += loss`,
`losses.append(loss)`) holds every iteration's autograd graph and saved activations; the harm is
memory that grows with the number of iterations and the model's size, up to running out of
memory on a long run. Model outputs collected over a whole DataLoader are a warning too: the
memory grows with the dataset's size, which the code does not show (the torch 2.13 case below
keeps 3 MiB over 20 small batches; the issue's encoder kept 278 MB over 10), so whether it runs
out is a matter of scale.
"""
    docs = """
## What it does
Flags, inside a loop, `xs.append(t)`, `xs.extend([t])`, `xs += [t]`, `d[k].append(t)`,
`acc += t` and `acc = acc + t` where `t` is a loss tensor: the result of a loss criterion (an
instance of a `torch.nn.*Loss` class, or a `torch.nn.functional` loss such as `cross_entropy`,
`mse_loss`, `nll_loss`, `l1_loss`, `binary_cross_entropy*`), a name on which `.backward()` is
called, arithmetic on those (`loss / accum_steps`), or a call of a function of the same file
whose every `return` gives one (`def loss_function(...): ...; return bce + kld`).

Also flags model outputs collected the same way (`features.append(encoder(batch))`,
`total += model(x)`) in a loop over batches (a DataLoader or dataset, through `enumerate` or
`tqdm` too, or an iterable named like data) that runs no backward pass, with autograd on: the
appended value certainly carries a graph (the output of an `nn` layer, a torchvision model or a
module class of this file or project, or arithmetic and `.cpu()` on it). This is feature
extraction or inference outside an evaluation-named function; inside one, or after
`model.eval()`, TL106 reports the model call instead.

## Why is this bad?
A loss tensor holds its autograd graph. Storing it keeps every iteration's graph alive; in an
evaluation loop without `torch.no_grad()` that graph holds every iteration's activations.
Measured on torch 2.13: 200 iterations of a small MLP retained 813 MiB of saved tensors with
`losses.append(loss)` and 4 MiB with `losses.append(loss.item())`. `total += loss` builds one
ever-growing graph instead (11 → 1404 autograd nodes). This is the PyTorch FAQ's "Don't
accumulate history across your training loop". Note that `.cpu()` alone does not detach.
A model output collected without `no_grad` holds the same: its graph and every activation the
forward saved, for a backward that never comes. Measured on torch 2.13 (the confirmation case):
20 batches of a small MLP's outputs kept 3.16 MiB of saved tensors alive; none under `no_grad`.

## Example
```python
losses, total = [], 0.0
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    losses.append(loss)
    total += loss
```

Use instead:
```python
losses, total = [], 0.0
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    losses.append(loss.detach())
    total += loss.item()
```

For model outputs: an extraction loop in a script or in `extract()` / `main()` without
`torch.no_grad()`, where no backward ever uses the collected outputs:
```python
features = []
for batch in loader:
    features.append(encoder(batch))
features = torch.cat(features)
```

Use instead:
```python
features = []
with torch.no_grad():
    for batch in loader:
        features.append(encoder(batch))
features = torch.cat(features)
```

Not flagged: `.item()`, `float(t)`, `.detach()` (also `.detach().cpu()`), `.tolist()`, `.data`;
calls that do not grow a container (`writer.add_scalar("loss", loss, step)`); code under
`torch.no_grad()`; per-iteration containers (also a list made afresh in each iteration of an
outer loop that holds only losses an inner loop has already backpropagated); and loss terms
summed over heads in a loop without a
backward pass whose sum is then returned or backpropagated (`total = 0; for h in heads: total +=
F.mse_loss(h(x), y); total.backward()`). For model outputs also: outputs of a callee the analysis
cannot see (`model = make_encoder()`); code run without grad by a decorator, a caller's
`no_grad` block seen in the file, or `torch.set_grad_enabled(False)`; a model frozen whole
(`model.requires_grad_(False)`, or `requires_grad = False` for each of its parameters; note that
`model.eval()` alone does not turn autograd off); collected outputs that are backpropagated
after the loop (`torch.cat(outs).sum().backward()`, or the function's result in a caller): a
gradient over a whole sequence is meant; loops that train, loops over time steps (`for t in
range(T)`), and a module's own methods (an RNN unrolled in `forward`).

## Fix safety
`xs.append(loss)` becomes `xs.append(loss.detach())`: safe, the stored values are the same,
only the graph is dropped. No fix is offered for collected model outputs: `.detach()` or
`no_grad` changes what a caller gets (outputs without `requires_grad`). `total += loss` becomes `total += loss.item()`: unsafe, the
accumulator becomes a Python float instead of a tensor.

## References
- https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory
- https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html
"""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        growth = self._growth(node)
        if growth is None:
            return
        kind, container, elements, statement = growth
        sem = ctx.semantic
        if kind == "accumulate" and sem.values.lexical_grad_mode(node) == GRAD_OFF:
            return  # a sum computed under no_grad records no graph (an appended loss keeps its own)
        loops = sem.enclosing_loops(node)
        if not loops:
            return
        losses = [e for e in elements if training.is_loss_tensor(sem, e)]
        if not losses:
            self._check_outputs(node, ctx, kind, container, elements, statement, loops[0])
            return
        loop = loops[0]
        root = _root_name(container)
        if root is not None and root.value != "self":
            if _reset_every_iteration(sem, loop, root, statement, kind):
                return  # a fresh container every iteration
            if kind == "append" and _each_backpropagated(sem, loop, losses) and any(
                    _reset_every_iteration(sem, outer, root, statement, kind) for outer in loops[1:]):
                return  # at most one outer iteration's losses, each graph already freed by backward
            if not training.backward_calls_under(sem, loop.body):
                use = _graph_use(sem, root, node)
                # Loss terms summed to be backpropagated after the loop are intended; summed to
                # be returned, they are intended unless the loop runs over data (an eval loop).
                if use == "backward" or (use == "return" and not _is_data_loop(ctx, loop)):
                    return
        loss = losses[0]
        written = ctx.short(statement if kind != "append" else node, 50)
        value = ctx.short(loss, 30)
        if kind == "append":
            message = (f"`{written}` keeps each iteration's autograd graph alive; "
                       f"store `{_method(ctx, loss, 'item')}` or `{_method(ctx, loss, 'detach')}`")
            fix = FixSpec(f"Store `{_method(ctx, loss, 'detach')}`",
                          tuple(Replace(e, _method(ctx, e, "detach")) for e in losses))
        else:
            message = (f"`{written}` chains every iteration's autograd graph into one that keeps "
                       f"growing; accumulate `{_method(ctx, loss, 'item')}` instead of `{value}`")
            fix = FixSpec(f"Accumulate `{_method(ctx, loss, 'item')}`",
                          (Replace(loss, _method(ctx, loss, "item")),), Applicability.UNSAFE)
        ctx.report(node if kind == "append" else statement, message, fix)

    def _check_outputs(self, node: cst.CSTNode, ctx: RuleContext, kind: str, container: cst.BaseExpression,
                       elements: List[cst.BaseExpression], statement: cst.CSTNode, loop: cst.CSTNode) -> None:
        """Model outputs (tensors that certainly carry a graph) collected across the iterations of
        a loop over batches that runs no backward, with autograd on: an inference loop outside
        any evaluation-named function (those, and loops after `model.eval()`, are TL106's)."""
        sem = ctx.semantic
        kept = [e for e in elements if _graph_carrying(sem, e)]
        if not kept:
            return
        if sem.values.grad_mode(node) in (GRAD_OFF, GRAD_UNKNOWN) or sem.values.lexical_grad_mode(node) is not None:
            return  # no_grad / inference_mode here, a decorator, or a caller running it without grad
        if not _batch_loop(sem, ctx, loop) or evaluation.has_backward(sem, loop):
            return  # a loop over time steps or heads (an RNN unrolled), or a training loop
        root = _root_name(container)
        if root is None or root.value == "self":
            return
        scope = evaluation.scope_body(sem, node)
        if isinstance(scope, cst.FunctionDef):
            if evaluation.is_eval_function_name(scope.name.value) or evaluation.is_framework_hook(scope.name.value):
                return  # TL106 reports the model call of an evaluation function
            if sem.class_of_method(scope) is not None and sem.is_module_class(sem.class_of_method(scope)):
                return  # a module's own method: its outputs go on to a caller's backward
        if _switched_before(sem, scope, loop):
            return  # after `model.eval()` (TL106's), or `torch.set_grad_enabled(False)` by hand
        value = kept[0]
        model_call = _model_call(sem, value)
        if model_call is not None and evaluation.entirely_frozen(sem, model_call.func):
            return
        if _reset_every_iteration(sem, loop, root, statement, kind):
            return
        use = _graph_use(sem, root, node)
        if use == "backward" or (use == "return" and _result_backpropagated(sem, scope)):
            return  # a gradient through the whole sequence is meant
        made = ctx.short(model_call if model_call is not None else value, 30)
        if kind == "append":
            message = (f"`{root.value}` keeps the autograd graph of every `{made}` output across iterations of a "
                       "loop that runs no backward: memory grows with every batch; wrap the loop in "
                       f"`torch.no_grad()` or store `{_method(ctx, value, 'detach')}`")
        else:
            message = (f"`{ctx.short(statement, 40)}` chains the autograd graph of every `{made}` output into one "
                       "that grows with every batch of a loop that runs no backward; wrap the loop in "
                       f"`torch.no_grad()` or add `{_method(ctx, value, 'detach')}`")
        ctx.report(node if kind == "append" else statement, message, severity=Severity.WARNING)

    def _growth(self, node: cst.CSTNode) -> Optional[Growth]:
        """(kind, container, grown elements, statement) for list/accumulator growth."""
        if type(node) is cst.Call:
            if not method_call_in(node, _GROWING_METHODS) or len(node.args) != 1:
                return None
            arg = node.args[0]
            if arg.keyword is not None or arg.star:
                return None
            container = node.func.value
            if node.func.attr.value == "append":
                return "append", container, [arg.value], node
            if isinstance(arg.value, (cst.List, cst.Tuple)):
                return "append", container, _elements(arg.value), node
            return None
        if type(node) is cst.AugAssign:
            if not isinstance(node.operator, cst.AddAssign):
                return None
            if isinstance(node.value, (cst.List, cst.Tuple)):
                return "append", node.target, _elements(node.value), node
            return "accumulate", node.target, [node.value], node
        if isinstance(node, cst.Assign):
            if len(node.targets) != 1 or type(node.targets[0].target) is not cst.Name:
                return None
            target = node.targets[0].target
            value = node.value
            if type(value) is not cst.BinaryOperation or type(value.operator) is not cst.Add:
                return None
            for same, other in ((value.left, value.right), (value.right, value.left)):
                if isinstance(same, cst.Name) and same.value == target.value:
                    return "accumulate", target, [other], node
        return None


def _elements(expr: cst.BaseExpression) -> List[cst.BaseExpression]:
    return [e.value for e in expr.elements if isinstance(e, cst.Element)]


def _method(ctx: RuleContext, expr: cst.BaseExpression, method: str) -> str:
    code = ctx.code(expr).strip()
    simple = isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or expr.lpar
    return f"{code}.{method}()" if simple else f"({code}).{method}()"


def _root_name(expr: cst.BaseExpression) -> Optional[cst.Name]:
    while isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    return expr if isinstance(expr, cst.Name) else None


def _each_backpropagated(sem, loop: cst.CSTNode, losses: List[cst.BaseExpression]) -> bool:
    """Every appended loss is a name whose `.backward()` the same loop body calls
    (`loss.backward(); step_losses.append(loss)`): backward frees its saved tensors."""
    backpropagated = {c.func.value.value for c in training.backward_calls_under(sem, loop.body)
                      if isinstance(c.func, cst.Attribute) and isinstance(c.func.value, cst.Name)}
    return all(isinstance(e, cst.Name) and e.value in backpropagated for e in losses)


def _reset_every_iteration(sem, loop: cst.CSTNode, name: cst.Name, growth: cst.CSTNode, kind: str) -> bool:
    """Whether nothing grown in an earlier iteration reaches `growth`.

    A sum (`acc += t`) is rebound by every growth, so it is enough that every definition of
    `acc` reaching it is a fresh value (`acc = 0` before the loop, a reset at the top of the
    iteration or at its end on every path) and none an accumulation (`acc += t`, `acc = acc +
    t`, this growth itself through the loop's back edge). A list grows in place, so only a
    fresh list made in this iteration before the append clears it. A reset on some iterations
    only (`if i % k == 0: acc = 0`) lets the previous iteration's value reach: still growing."""
    definitions = sem.values.flow.reaching_at(growth, name.value)
    if not definitions:
        return False
    for definition in definitions:
        if definition.statement is growth or definition.kind == "augassign":
            return False  # `acc += t` carried over from the previous iteration
        node = definition.target if definition.target is not None else definition.statement
        if kind == "append" and not sem.index.contains(loop.body, node):
            return False  # the list made before the loop is appended to in every iteration
        value = definition.value
        if value is not None and _mentions(sem, value, name.value):
            return False  # `acc = acc + t` grows, it does not reset
    return True


def _graph_carrying(sem, expr: cst.BaseExpression) -> bool:
    """A tensor that certainly carries an autograd graph and is not a loss (a model's output,
    arithmetic on it, `.cpu()` of it): `.detach()`, `.item()`, `.tolist()`, `.cpu().numpy()`
    and outputs of unknown callees are not."""
    value = sem.values.of(expr)
    return value.kind in TENSOR_KINDS and value.kind != LOSS and value.autograd == AG_GRAPH


_BATCH_WORDS = ("loader", "dataset", "batches", "data", "iterator")


def _batch_loop(sem, ctx: RuleContext, loop: cst.CSTNode) -> bool:
    """A `for` loop over a DataLoader (or a dataset, possibly through `enumerate`/`tqdm`), or over
    an iterable named like data (`for x in test_loader`, `for batch in batches`)."""
    if not isinstance(loop, cst.For):
        return False
    iterable = loop.iter
    while isinstance(iterable, cst.Call) and iterable.args and isinstance(iterable.func, (cst.Name, cst.Attribute)) \
            and ctx.code(iterable.func).strip().rsplit(".", 1)[-1] in ("enumerate", "tqdm", "iter", "zip"):
        iterable = iterable.args[0].value
    if sem.values.of(iterable).kind == LOADER:
        return True
    text = ctx.code(iterable).lower()
    return any(word in text for word in _BATCH_WORDS)


def _switched_before(sem, scope: cst.CSTNode, loop: cst.CSTNode) -> bool:
    """Grad mode switched by hand (`torch.set_grad_enabled(...)`) in the function, or a model
    switched to eval mode before the loop; for top-level code, by the statements run before the
    loop (a function defined in the script is not run by being defined)."""
    if isinstance(scope, cst.Module):
        here = sem.index.order[loop]
        parts = [s for s in scope.body if sem.index.order[s] < here
                 and not isinstance(s, (cst.FunctionDef, cst.ClassDef)) and not sem.index.contains(s, loop)]
        parts.append(loop)
    else:
        parts = [scope]
    for part in parts:
        if evaluation.mentions_grad_switch(sem, part):
            return True
        if any(evaluation.before(sem, receiver, loop) for receiver in evaluation.eval_mode_receivers(sem, part)):
            return True
    return False


def _model_call(sem, expr: cst.BaseExpression, depth: int = 0) -> Optional[cst.Call]:
    """The module call whose output `expr` is or is built from (`encoder(batch)`, also through
    names bound to it, a few assignments deep), or None."""
    for node in [expr, *sem.index.descendants(expr, cst.Call)]:
        if isinstance(node, cst.Call) and sem.values.of(node.func).kind == MODULE:
            return node
    root = _root_name(expr)
    if root is None or depth >= 3:
        return None
    for definition in sem.values.flow.reaching_at(root, root.value) or ():
        if definition.value is not None:
            found = _model_call(sem, definition.value, depth + 1)
            if found is not None:
                return found
    return None


def _result_backpropagated(sem, scope: cst.CSTNode) -> bool:
    """A call in this file of the function `scope` whose result reaches a backward pass."""
    if not isinstance(scope, cst.FunctionDef):
        return False
    name = scope.name.value
    for call in sem.index.nodes(cst.Call):
        func = call.func
        spelled = func.value if isinstance(func, cst.Name) else (func.attr.value if isinstance(func, cst.Attribute) else None)
        if spelled == name and training.flows_into_backward(sem, call):
            return True
    return False


def _is_data_loop(ctx: RuleContext, loop: cst.CSTNode) -> bool:
    if isinstance(loop, cst.While):
        return True
    text = ctx.code(loop.iter).lower()
    return any(word in text for word in _DATA_WORDS)


def _mentions(sem, node: cst.CSTNode, name: str) -> bool:
    if isinstance(node, cst.Name):
        return node.value == name
    return any(isinstance(n, cst.Name) and n.value == name for n in sem.index.descendants(node, cst.Name))


def _graph_use(sem, root: cst.Name, node: cst.CSTNode) -> Optional[str]:
    """"backward" when the container/accumulator is backpropagated (directly or through a name
    built from it) in the function holding `node`, "return" when it is returned (directly or
    through such a name), else None."""
    scope = sem.scopes.scope_of(node)
    derived = training.derived_names(sem, scope, {root.value})
    calls = sem.index.descendants(scope, cst.Call) if not isinstance(scope, cst.Module) \
        else sem.index.nodes(cst.Call)
    for call in calls:
        target = training.backward_target(sem, call)
        if target is not None and any(_mentions(sem, target, n) for n in derived):
            return "backward"
    if derived & training.backwarded_names(sem, scope):
        return "backward"
    for ret in sem.index.descendants(scope, cst.Return):
        if ret.value is not None and sem.scopes.scope_of(ret) is scope and \
                any(_mentions(sem, ret.value, n) for n in derived):
            return "return"
    return None
