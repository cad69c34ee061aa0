"""TL117: a backward pass through a module's output computed before an optimizer step changed that
module's weights in place (the GAN generator loss through a stale `D(fake)`)."""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis import silent, training
from torchlint.analysis.calls import is_true, keyword, method_call
from torchlint.analysis.value import MODULE, identity
from torchlint.finding import Severity
from torchlint.positions import node_ranges
from torchlint.rules.base import Rule, RuleContext

# Methods and attributes whose result carries no graph: what flows through them is not
# backpropagated (`out.detach()`, `out.item()`, `out.data`).
_DETACHING_METHODS = frozenset({"detach", "item", "tolist", "numpy", "detach_", "requires_grad_"})
_DETACHING_ATTRIBUTES = frozenset({"data", "grad", "shape", "dtype", "device", "requires_grad", "grad_fn"})
_DETACHING_FUNCTIONS = frozenset({"float", "int", "bool", "len", "str", "print", "repr", "format", "isinstance"})
_FOLLOWED_DEFINITIONS = ("assign", "augassign", "walrus")
_MAX_NODES = 400  # expressions looked at per backward pass: the walk stays local


class StaleOutputAfterStep(Rule):
    code = "TL117"
    name = "stale-output-after-step"
    summary = "Backward through a module's output computed before an optimizer step changed its weights (GAN `D(fake)`)"
    fix_availability = "none"
    default_severity = Severity.ERROR
    severity_docs = """
Always an **error**: the backward pass raises `RuntimeError: one of the variables needed for
gradient computation has been modified by an inplace operation` (or, when an earlier backward
freed the graph, `Trying to backward through the graph a second time`) on the first batch.
"""
    triggers = ("step(",)
    node_types = (cst.Call,)
    called_names = frozenset(("backward", "manual_backward"))  # check returns at once for any other call
    confirmation_module = "tl117"
    docs = """
## What it does
Flags a backward pass (`loss_g.backward()`, `scaler.scale(loss_g).backward()`,
`torch.autograd.backward(loss_g)`) whose loss is built from the output of a module call
(`out = D(fake)`) that ran before an optimizer step over that module's parameters
(`opt_d.step()`, with `opt_d = Adam(D.parameters())`), with the step between the module call
and the backward pass: the classic GAN step that computes `D(fake)` once, trains D with it, and
then backpropagates the generator loss through the same output.

The loss is followed through assignments in the same function (`loss_g = crit(out, ones)`,
`loss = loss_g + l1`), never through `.detach()`, `.data`, `.item()` or `float(...)`. The module
must be known to be a module and the optimizer known to hold its parameters (built over
`D.parameters()`), and the backward certainly needs its weights as the forward saved them: the
module's input has a graph (`D(G(z))`: a layer saves its weight to compute its input's
gradient), or the module is a Sequential with two or more layers holding parameters. The step
must run whenever the backward pass does (not under an `if` the backward is outside of).

Silent when the module's output is computed again after the step, when only `out.detach()`
reaches the loss, when the step comes after the backward pass (the G step first), when the
optimizer is built over other modules' parameters (`G.parameters()`), and when the callable or
the optimizer's parameters are not known.

## Why is this bad?
`optimizer.step()` updates the parameters in place, which bumps their version counters. The
graph of `out = D(fake)` saved D's weights for its backward pass (a `Linear` saves its weight to
compute the gradient of its input). Measured on torch 2.13: backpropagating through that graph
after `opt_d.step()` raises `RuntimeError: one of the variables needed for gradient computation
has been modified by an inplace operation: [torch.FloatTensor [8, 1]], which is output 0 of
AsStrided, is at version 2; expected version 1 instead` at the first batch (before PyTorch 1.5
the optimizers' updates went unchecked and the generator silently got gradients computed with
D's old weights). A lone `nn.Linear` applied to a batch without grad saves no weight, and the
backward after its step runs. Without `retain_graph=True` on the discriminator's backward the same line
raises `Trying to backward through the graph a second time` instead.

## Example
```python
fake = G(z)
out = D(fake)
loss_d = crit(D(real), ones) + crit(out, zeros)
opt_d.zero_grad()
loss_d.backward(retain_graph=True)
opt_d.step()
loss_g = crit(out, ones)
opt_g.zero_grad()
loss_g.backward()
opt_g.step()
```

Use instead:
```python
fake = G(z)
loss_d = crit(D(real), ones) + crit(D(fake.detach()), zeros)
opt_d.zero_grad()
loss_d.backward()
opt_d.step()
loss_g = crit(D(fake), ones)  # D's output with its updated weights
opt_g.zero_grad()
loss_g.backward()
opt_g.step()
```

Or run the generator's step first, before `opt_d.step()` changes D.

## Fix safety
No fix is offered: recomputing `D(fake)` costs a forward pass, and moving the generator's step
changes what D's update sees; the choice is the author's.

## References
- https://github.com/pytorch/pytorch/issues/39141 (GAN training fails since PyTorch 1.5)
- https://pytorch.org/docs/stable/autograd.html#in-place-correctness-checks
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        func = node.func
        spelled = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None
        if spelled not in ("backward", "manual_backward"):
            return
        sem = ctx.semantic
        target = training.backward_target(sem, node)
        if target is None:
            return
        scope = sem.function_of(node)
        order = sem.index.order
        here = order[node]
        # the steps first: most backward passes have none of a known optimizer before them
        steps = [item for item in _steps(sem, scope) if order[item[0]] < here]
        if not steps:
            return
        forwards = _forwards(sem, target, scope)
        if not forwards:
            return
        for forward, module in forwards:
            begin = order[forward]
            for step, _, owners in steps:
                if not begin < order[step] < here or module not in owners:
                    continue
                if not _runs_between(sem, step, forward, node):
                    continue
                # A notebook is linted as its joined cells: a row of that text is no cell's row.
                where = (lambda n: "") if ctx.path.endswith(".ipynb") else (lambda n: f" (line {_line(sem, n)})")
                freed = _freeing_backward(sem, scope, forward, begin, here)
                if freed is not None:
                    error = (f"`Trying to backward through the graph a second time` (`{ctx.short(freed, 30)}`"
                             f"{where(freed)} freed it)")
                else:
                    error = "`RuntimeError: ... modified by an inplace operation`"
                module_text = ctx.short(forward.func, 20)
                ctx.report(
                    node,
                    f"`{ctx.short(node, 40)}` backpropagates through `{ctx.short(forward, 30)}`{where(forward)}, "
                    f"computed before `{ctx.short(step, 30)}`{where(step)} changed `{module_text}`'s weights in "
                    f"place: it raises {error}; compute `{ctx.short(forward, 30)}` again after the step, or run "
                    "this backward and its step first",
                    severity=Severity.ERROR)
                return


def _line(sem, node: cst.CSTNode) -> int:
    """The line `node` starts on (asked only for the nodes a finding names)."""
    span = node_ranges(sem.module, [node], sem.index).get(node)
    return span[0][0] if span is not None else 0


def _module_identity(sem, call: cst.Call) -> Optional[int]:
    """The construction site (by id) of the module `call` calls, when the value model knows
    the callee is a module (`D(fake)`, `self.netD(x)`)."""
    value = sem.values.of(call.func)
    if value.kind != MODULE:
        return None
    found = identity(value)
    if found is None or isinstance(found, cst.ClassDef):
        return None
    return id(found)


def _forwards(sem, target: cst.BaseExpression, scope) -> List[Tuple[cst.Call, int]]:
    """The module calls whose outputs (with their graphs) the tensor `target` is computed from in
    its own function: calls in the expression, and in the assignments that give its names their
    values, followed back (never through `.detach()`, `.data`, `.item()`)."""
    found: List[Tuple[cst.Call, int]] = []
    seen: Set[int] = set()
    pending: List[cst.CSTNode] = [target]
    looked = 0
    while pending and looked < _MAX_NODES:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        looked += 1
        if isinstance(current, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(current, cst.Attribute):
            if current.attr.value in _DETACHING_ATTRIBUTES:
                continue
            pending.append(current.value)
            continue
        if isinstance(current, cst.Call):
            if method_call(current) and current.func.attr.value in _DETACHING_METHODS:
                continue
            if isinstance(current.func, cst.Name) and current.func.value in _DETACHING_FUNCTIONS:
                continue
            if sem.values.of(current).has_no_graph:
                continue  # made under no_grad, an integer result, ...
            module = _module_identity(sem, current)
            if module is not None and _needs_its_weights(sem, current):
                found.append((current, module))
            if method_call(current):
                pending.append(current.func.value)
            pending.extend(arg.value for arg in current.args)
            continue
        if isinstance(current, cst.Name):
            if sem.scopes.scope_of(current) is not (scope if scope is not None else sem.module) \
                    and sem.function_of(current) is not scope:
                continue
            definitions = sem.values.flow.reaching(current)
            for definition in definitions or ():
                if definition.kind not in _FOLLOWED_DEFINITIONS or definition.value is None:
                    continue
                if sem.function_of(definition.statement) is not scope:
                    continue
                pending.append(definition.value)
                if definition.kind == "augassign":  # `loss += crit(out, ones)`: the old value too
                    for earlier in sem.values.flow.reaching_at(definition.statement, current.value) or ():
                        if earlier.kind in _FOLLOWED_DEFINITIONS and earlier.value is not None \
                                and sem.function_of(earlier.statement) is scope:
                            pending.append(earlier.value)
            continue
        if isinstance(current, (cst.BaseNumber, cst.BaseString)):
            continue
        pending.extend(child for child in current.children if isinstance(child, cst.CSTNode))
    # The forwards of inputs with a graph first (`D(fake)` before `D(real)`): backward needs
    # the module's weights to reach them, whatever the module's depth.
    found.sort(key=lambda item: (not _input_has_graph(sem, item[0]), sem.index.order[item[0]]))
    return found


def _input_has_graph(sem, call: cst.Call) -> bool:
    return any(sem.values.of(arg.value).requires_grad for arg in call.args)


def _needs_its_weights(sem, call: cst.Call) -> bool:
    """A backward through `call`'s output certainly reads the module's weights as the forward
    saved them: its input requires grad (a layer saves its weight to compute the input's
    gradient), or it is a Sequential with two or more layers holding parameters (the gradient
    of the first one's weights passes through the later ones'). Measured on torch 2.13: a lone
    `nn.Linear` on a batch without grad saves no weight, and backward after its step succeeds."""
    if _input_has_graph(sem, call):
        return True
    return _parametric_layers(sem, sem.values.of(call.func), 0) >= 2


def _parametric_layers(sem, value, depth: int) -> int:
    info = value.module
    if info is None or depth > 4:
        return 0
    if info.parts:
        return sum(_parametric_layers(sem, part, depth + 1) for part in info.parts)
    site = value.site
    return 1 if isinstance(site, cst.Call) and silent.parametric_module(sem, site) is not None else 0


def _steps(sem, scope) -> List[Tuple[cst.Call, cst.BaseExpression, frozenset]]:
    """The optimizer steps in `scope` (not in nested functions) whose optimizer's parameters the
    value model knows (`Adam(D.parameters())` updates D)."""
    cache: Dict[int, list] = sem.__dict__.setdefault("_tl117_steps", {})
    key = id(scope) if scope is not None else 0
    found = cache.get(key)
    if found is None:
        found = []
        calls = sem.index.descendants(scope, cst.Call) if scope is not None else sem.index.nodes(cst.Call)
        for call in calls:
            if not method_call(call, "step") or sem.function_of(call) is not scope:
                continue
            optimizer = training.step_optimizer(sem, call)
            if optimizer is None:
                continue
            owners = training.optimizer_owners(sem, optimizer)
            if owners:
                found.append((call, optimizer, owners))
        cache[key] = found
    return found


def _runs_between(sem, step: cst.Call, forward: cst.Call, backward: cst.Call) -> bool:
    """Whenever `backward` runs, `step` has run after `forward`: every block around the step
    that does not also hold the backward pass is a `with` body, or a loop body that also holds
    the forward call (its last pass ran the forward, then the step)."""
    contains = sem.index.contains
    for ancestor in sem.ancestors(step):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.Module)):
            return True
        if not isinstance(ancestor, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            continue
        if contains(ancestor, backward):
            return True
        owner = sem.parent(ancestor)
        if isinstance(owner, cst.With):
            continue
        if isinstance(owner, (cst.For, cst.While)) and owner.body is ancestor and contains(ancestor, forward):
            continue
        return False
    return True


def _freeing_backward(sem, scope, forward: cst.Call, begin: int, end: int) -> Optional[cst.Call]:
    """A backward pass between `forward` and the flagged one, through `forward`'s output,
    without `retain_graph=True`: it freed the graph, so the later backward fails on that instead."""
    calls = sem.index.descendants(scope, cst.Call) if scope is not None else sem.index.nodes(cst.Call)
    order = sem.index.order
    for call in calls:
        if not begin < order[call] < end or not training.is_backward(sem, call):
            continue
        if any(is_true(keyword(call, word)) for word in ("retain_graph", "create_graph", "retain_variables")):
            continue  # (`retain_variables=` is TL203's: once renamed, it keeps the graph)
        target = training.backward_target(sem, call)
        if target is not None and any(f is forward for f, _ in _forwards(sem, target, scope)):
            return call
    return None


__all__ = ["StaleOutputAfterStep"]
