"""TL006: activation cached on the module in forward."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import autograd, training
from torchlint.analysis.value import LOSS
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


class ActivationCachedOnModule(Rule):
    code = "TL006"
    name = "activation-cached-on-module"
    summary = "Tensor computed in `forward` stored on the module without `.detach()`"
    fix_availability = "sometimes"
    triggers = ("self.",)
    node_types = (cst.Assign, cst.AnnAssign, cst.Call)
    confirmation_module = "tl006"
    severity_docs = """
An **error** when a read of the stored attribute reaches the backward of a later step
(`previous = model.last` then a loss on `previous`): that backward fails with `Trying to backward
through the graph a second time`. A **warning** otherwise: the graph and its saved activations
stay alive on the module until the attribute is overwritten, and a list attribute (or a value
computed from its previous value, such as a running average) keeps every call's graph: memory
that grows with the number of calls.
"""
    docs = """
## What it does
Flags, inside `nn.Module.forward`, `self.attr = t`, `self.attr[k] = t`, `out, self.attr = ...` and
`self.attr.append(t)` where `t` is a tensor computed in this forward — from a submodule call
(`self.fc(x)`, `self.lstm(x, h)`), a torch function or tensor method applied to the inputs, or
arithmetic on those — without `.detach()`.

## Why is this bad?
The stored tensor holds on to its `grad_fn`, and through it to every activation autograd saved for
this call: the memory is not freed when the step ends but only when the attribute is overwritten,
and a list attribute grows by one graph per call. If a later loss uses the cached tensor, backward
walks into the previous call's graph, whose buffers were already freed, and torch 2.13 raises
`RuntimeError: Trying to backward through the graph a second time (or directly access saved
tensors after they have already been freed).` This is the classic RNN bug of carrying the hidden
state across batches without detaching it.

## Example
```python
class LM(nn.Module):
    def forward(self, x):
        out, self.hidden = self.lstm(x, self.hidden)
        self.last_logits = self.head(out)
        return self.last_logits
```

Use instead:
```python
class LM(nn.Module):
    def forward(self, x):
        out, hidden = self.lstm(x, self.hidden)
        self.hidden = tuple(h.detach() for h in hidden)
        logits = self.head(out)
        self.last_logits = logits.detach()
        return logits
```

## Fix safety
No fix either where any read of the attribute reaches a backward: detaching it would change what
is trained (measured on torch 2.13: the style transfer recipe with `self.loss = F.mse_loss(...).detach()`
raises `element 0 of tensors does not require grad and does not have a grad_fn`). Otherwise the
fix appends `.detach()` to the stored value (`self.f = t` becomes `self.f = t.detach()`, also
for `self.f[k] = t` and `self.f.append(t)`) and is unsafe: code that deliberately backpropagates
through the cached tensor (truncated BPTT across calls, a loss on a stored attention map) stops
receiving gradients. There is no fix for tuple targets (`out, self.h = self.rnn(x)`), nor where
the same `forward` reads the attribute again after storing it (`self.attn = softmax(s); return
self.attn @ v`): the output is computed from the stored tensor, and detaching it would stop the
gradient of everything before it.

The tensor may come from a same-file helper (`self.attn = masked_softmax(scores, lens)`) or be
one element of a tuple target (`Y, self.state = self.rnn(X, state)`, where `self.rnn` is a
module passed to `__init__`; `Y, self.moving_mean, self.moving_var = batch_norm(...)`).

Not flagged: non-tensors (`x.shape`, `x.size(0)`, flags, strings, `None` to clear a cache),
an attribute that the program reads after the forward and backpropagates in the same step (a
backward written after the read, in any function of the file): a loss module's `self.loss =
F.mse_loss(...)` summed into the total loss, as the neural style transfer recipe does (`score =
sum(sl.loss for sl in style_losses); score.backward()`), unless some read carries it into a
later step's backward; the same loss module when nothing in its file reads the attribute (its
reader is in another file: a `forward` that stores a loss in an attribute named for a loss and
returns its input unchanged); key/value caches filled
under `if use_cache:` (generation runs under `no_grad`), re-storing the same attribute moved to
a device (`self.m = self.m.to(x.device)`),
values already detached (`.detach()`, `.detach().cpu()`, `.item()`, `.clone().detach()`), buffer
updates under `torch.no_grad()` (running statistics), `register_buffer(...)` calls, attributes
assigned a module or an `nn.Parameter`, and unannotated inputs stored as they are (their type is
unknown).

## References
- https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory
- https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html
"""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if autograd.forward_method(sem, node) is None:
            return
        if type(node) is cst.Call:
            self._check_append(node, ctx)
            return
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        if node.value is None or _fills_inference_cache(sem, node):
            return
        assigned = None
        for target in targets:
            for element, value, path in autograd.assigned_pairs(target, node.value):
                attribute = _cached_attribute(element)
                if attribute is None or path is None:
                    continue
                if assigned is None:
                    assigned = sem.values.of(node.value)
                stored = sem.values.element_of(assigned, path)
                if not autograd.caches_graph(stored) or _loss_for_backward(sem, stored, attribute):
                    continue
                if value is not None and _restores(value, attribute):
                    continue  # `self.m = self.m.to(x.device)`: its graph was stored where it was made
                whole = value if value is not None else node.value
                self._report(element, attribute, whole, value is not None and len(targets) == 1, ctx)

    def _check_append(self, call: cst.Call, ctx: RuleContext) -> None:
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "append" and len(call.args) == 1):
            return
        attribute = autograd.self_attribute(func.value)
        if attribute is None or call.args[0].keyword is not None or call.args[0].star:
            return
        value = call.args[0].value
        sem = ctx.semantic
        stored = sem.values.of(value)
        if not autograd.caches_graph(stored) or _loss_for_backward(sem, stored, attribute) \
                or _fills_inference_cache(sem, call):
            return
        self._report(call, attribute, value, True, ctx, appended=True)

    def _report(self, node, attribute: cst.Attribute, value, whole_value: bool, ctx: RuleContext,
                appended: bool = False) -> None:
        """`whole_value`: the store's own value expression is known (not one element of a tuple
        target), so `.detach()` can be appended to it, unless the forward reads it back or some
        read of the attribute reaches a backward (detaching would change what is trained)."""
        sem = ctx.semantic
        name = attribute.attr.value
        read_later = _read_later_in_forward(sem, attribute)
        reads = _reads(sem, attribute)
        backpropagated = any(training.flows_into_backward(sem, read) for read in reads)
        chained = _chains_calls(sem, value, name)
        fixable = whole_value and not read_later and not backpropagated
        shown = ctx.short(value, 40)
        if appended:
            what = f"`self.{name}.append({shown})` in `forward` keeps every call's autograd graph alive"
            advice = f"append `{_detached_text(ctx.code(value), value)}`"
            if read_later:
                advice += f" and compute this forward's output from the local value, not from `self.{name}`"
        elif chained:
            what = (f"`self.{name}`, computed in `forward` from its previous value, chains every call's "
                    f"autograd graph onto the last")
            advice = f"update `self.{name}` from a detached value (or under `torch.no_grad()`)"
        elif whole_value and not read_later:
            what = f"`{ctx.short(node, 40)} = {shown}` in `forward` keeps this call's autograd graph alive"
            advice = f"store `{_detached_text(ctx.code(value), value)}`"
        else:
            what = f"`self.{name}`, assigned from `{shown}` in `forward`, keeps this call's autograd graph alive"
            advice = "detach it before storing it on the module"
            if read_later:
                advice = (f"keep the tensor in a local variable for this forward's output and store "
                          f"its `.detach()` in `self.{name}`")
        if _carried_into_later_step(sem, reads):
            # Read back into the loss of a later step (the same step's backward is `_loss_for_backward`).
            harm = ("the later step's backward that reads it fails with 'Trying to backward through "
                    "the graph a second time'")
            severity = Severity.ERROR
        elif appended or chained:
            harm = "its memory grows with every call"
            severity = Severity.WARNING
        else:
            harm = "its memory is not freed until the attribute is overwritten"
            severity = Severity.WARNING
        message = f"{what} on the module ({harm}); {advice}"
        fix = None
        if fixable:
            text = _detached_text(ctx.code(value), value)
            fix = FixSpec("Store `.detach()` of the value", (Replace(value, text),),
                          applicability=Applicability.UNSAFE)
        ctx.report(node, message, fix, severity=severity)


def _reads(sem, attribute: cst.Attribute) -> list:
    """Every read of an attribute spelled like `attribute` (`self.loss`, `sl.loss`, `model.h`)
    other than the store itself."""
    name = attribute.attr.value
    return [read for read in sem.index.nodes(cst.Attribute)
            if read.attr.value == name and read is not attribute and not autograd.is_store(sem, read)]


def _chains_calls(sem, value: cst.BaseExpression, name: str) -> bool:
    """The stored value is computed from the attribute's previous value (`self.avg = 0.9 *
    self.avg + 0.1 * h.mean()`, `Y, self.mean = bn(X, self.mean)`): each call's graph is linked
    to the previous call's, so the chain grows for as long as the module runs."""
    return any(read.attr.value == name and autograd.self_attribute(read) is not None
               for read in sem.index.descendants(value, cst.Attribute))


def _loss_for_backward(sem, stored, attribute: cst.Attribute) -> bool:
    """An attribute the program reads back and backpropagates in the same step: read after the
    forward and backpropagated by a backward written after the read, as a loss module's
    `self.loss = F.mse_loss(...)` summed into the total loss (`style_score += sl.loss`, `score =
    sum(sl.loss for sl in style_losses); score.backward()`, the PyTorch neural style transfer
    tutorial). Its graph is the current one, which
    that backward frees: no leak, and detaching it would stop training. (An activation read
    back into a later step's loss is the bug itself: its graph was freed by the previous
    backward.)"""
    reads = _reads(sem, attribute)
    if not reads and _exposes_its_loss(sem, stored, attribute):
        return True
    return any(training.flows_into_backward(sem, read, after=True) for read in reads) \
        and not _carried_into_later_step(sem, reads)


def _exposes_its_loss(sem, stored, attribute: cst.Attribute) -> bool:
    """A loss module of the style-transfer kind whose reader lives in another file: `forward`
    stores a loss in `self.loss` (an attribute named for a loss) and returns its input unchanged,
    so the module exists to hand that loss to the caller's closure, which sums and backpropagates
    it. Nothing in this file reads it; each call overwrites it, so one graph at most is kept."""
    if stored.kind != LOSS or "loss" not in attribute.attr.value.lower():
        return False
    function = sem.function_of(attribute)
    if function is None or len(function.params.params) < 2:
        return False
    given = function.params.params[1].name.value
    returns = [r for r in sem.index.descendants(function, cst.Return) if sem.function_of(r) is function]
    return bool(returns) and all(isinstance(r.value, cst.Name) and r.value.value == given for r in returns)


def _carried_into_later_step(sem, reads) -> bool:
    """Some read reaches a backward only one written before it (`previous = model.last` after
    `loss.backward()`, then `loss = loss + f(previous)` in the next iteration): the graph it
    holds was freed by the step that made it."""
    return any(training.flows_into_backward(sem, read) and not training.flows_into_backward(sem, read, after=True)
               for read in reads)


def _read_later_in_forward(sem, attribute: cst.Attribute) -> bool:
    """Whether the same `forward` reads `self.<name>` again after storing it
    (`self.attn = softmax(s); return self.attn @ v`): its output is computed from the stored
    tensor, so detaching the store would cut the gradient of everything before it. No fix then."""
    function = sem.function_of(attribute)
    statement = next((a for a in sem.ancestors(attribute)
                      if isinstance(a, (cst.BaseSmallStatement, cst.BaseCompoundStatement))), attribute)
    name = attribute.attr.value
    here = sem.index.order[attribute]
    for read in sem.index.nodes(cst.Attribute):
        if read.attr.value != name or autograd.self_attribute(read) is None or sem.index.contains(statement, read):
            continue  # `Y, self.m = bn(X, self.m)` reads the old value before the store
        if sem.index.order[read] > here and sem.function_of(read) is function and \
                not autograd.is_store(sem, read):
            return True
    return False


def _fills_inference_cache(sem, node: cst.CSTNode) -> bool:
    """Inside `if use_cache:` (any condition naming a cache): a key/value cache for generation,
    which runs under `no_grad` (measured on rasbt/LLMs-from-scratch: every `use_cache=True` call
    is inside `torch.no_grad()`)."""
    child = node
    for ancestor in sem.ancestors(node):
        if type(ancestor) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            return False
        if type(ancestor) in (cst.If, cst.IfExp) and child is not ancestor.test and _names_a_cache(sem, ancestor.test):
            return True
        child = ancestor
    return False


def _names_a_cache(sem, test: cst.CSTNode) -> bool:
    names = [test] if isinstance(test, (cst.Name, cst.Attribute)) else list(
        sem.index.descendants(test, (cst.Name, cst.Attribute)))
    for name in names:
        spelled = name.value if isinstance(name, cst.Name) else name.attr.value
        if "cache" in spelled.lower():
            return True
    return False


def _restores(value: cst.BaseExpression, attribute: cst.Attribute) -> bool:
    """`value` is the same attribute, moved or cast (`self.m.to(device)`, `self.m.float()`)."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        value = value.func.value
    found = autograd.self_attribute(value)
    return found is not None and found.attr.value == attribute.attr.value


def _cached_attribute(target: cst.BaseExpression) -> Optional[cst.Attribute]:
    """`self.attr` for targets `self.attr` and `self.attr[k]`."""
    if type(target) is cst.Subscript:
        target = target.value
    return autograd.self_attribute(target)


def _detached_text(code: str, value: cst.BaseExpression) -> str:
    if isinstance(value, _ATOMS) and not value.lpar:
        return f"{code}.detach()"
    if value.lpar:
        return f"{code}.detach()"
    return f"({code}).detach()"
