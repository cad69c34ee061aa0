"""TL007: a DataLoader batch reaches a model (or its loss) that was moved to another device."""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from torchlint.analysis import device_state, devices
from torchlint.analysis.semantic import Semantic
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext
from torchlint.positions import code_for_node


class BatchNotOnModelDevice(Rule):
    code = "TL007"
    name = "batch-not-on-model-device"
    summary = "DataLoader batch reaches a model moved to another device without being moved itself"
    fix_availability = "none"
    triggers = ("DataLoader",)
    cross_file_triggers = True
    node_types = (cst.Call,)
    confirmation_module = "tl007"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: the batch stays on the CPU while the model was moved, so the forward
(or the loss) raises `Expected all tensors to be on the same device` on the first batch
wherever the model's device is an accelerator, which is what the move is for.
"""
    docs = """
## What it does
In a loop over a `torch.utils.data.DataLoader`, flags a batch element that reaches a model call
unmoved while the model was certainly moved to a device that may be an accelerator
(`model = Net().cuda()`, `model.to(device)` with `device` possibly CUDA), and a batch element
(usually the target) that reaches the loss together with that model's output:

- the loop target itself, unpacked (`x, y = batch`), indexed (`batch["input_ids"]`), wrapped in
  `Variable(...)` or reshaped (`x.view(-1, 784)`), with no move on the way;
- the loader is a `DataLoader(...)` (a name or `self.attr` bound only to one, a parameter
  annotated `DataLoader`, or one every same-file caller passes) whose `collate_fn` moves nothing
  and whose dataset is not built from moved tensors;
- the model is moved on every path to the call (not in one branch only), it is not wrapped
  in `DataParallel`/`DistributedDataParallel`, which scatter their inputs themselves, and its
  class (when it is defined in the file) does not move its input in `forward`.

Silent when the element is moved anywhere on the way (`data = data.to(device)`,
`.cuda(non_blocking=True)`, `x = to_device(x)`, a dict or list comprehension of moves), when it
is handed to a helper or a bare `batch.to(device)` first (which may move it in place), and in
code whose framework moves batches (Lightning `*_step` methods and files using Lightning,
`accelerator.prepare`, Ignite or the Hugging Face `Trainer`).

## Why is this bad?
DataLoader batches are CPU tensors (worker processes only load and collate; see claim
CLAIM-005). A model whose parameters are on the GPU cannot take them: the first forward fails
with `RuntimeError: Expected all tensors to be on the same device, but found at least two
devices, cuda:0 and cpu!` (an `nn.Conv2d` says `Input type (torch.FloatTensor) and weight type
(torch.cuda.FloatTensor) should be the same`). Moving the input but not the target fails the
same way in the loss. With `device = "cuda" if torch.cuda.is_available() else "cpu"` the script
works on the author's laptop and fails on the first machine with a GPU. Measured on torch 2.13
with the meta device standing in for the GPU:
`Tensor on device meta is not on the expected device cpu!`.

## Example
```python
model = Net().to(device)
for data, target in train_loader:
    output = model(data)
    loss = criterion(output, target)
```

Use instead:
```python
model = Net().to(device)
for data, target in train_loader:
    data, target = data.to(device), target.to(device)
    output = model(data)
    loss = criterion(output, target)
```

## Fix safety
No fix: which device name to use and where the move belongs (in the loop, in a `collate_fn`,
a prefetcher) is the author's choice.

## References
- https://pytorch.org/docs/stable/data.html#memory-pinning
- https://pytorch.org/tutorials/beginner/blitz/cifar10_tutorial.html#training-on-gpu
- https://pytorch.org/docs/stable/generated/torch.nn.DataParallel.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        func = node.func
        if not any(device_state.is_loader_loop(sem, loop) for loop in sem.enclosing_loops(node)):
            return  # batches come only from a loop over a DataLoader around the call
        if device_state.is_loss_call(sem, node):
            self._check_loss(node, ctx, sem)
            return
        if not _is_model_spelling(func) or not device_state.has_parameters(sem, func):
            return
        move = _model_move(sem, func)
        if move is None or device_state.module_moves_its_inputs(sem, func):
            return
        self._report_unmoved(
            node, device_state.iter_call_arguments(node), move, ctx,
            lambda spelled, suggestion: (
                f"`{ctx.short(func, 30)}` was moved by {_move_text(ctx, move)}: forward fails with "
                f"`Expected all tensors to be on the same device` — move it first: `{suggestion}`"))

    def _check_loss(self, node: cst.Call, ctx: RuleContext, sem: Semantic) -> None:
        arguments = list(device_state.iter_call_arguments(node))
        output = next(((a, found) for a in arguments
                       if (found := device_state.model_output_move(sem, a)) is not None), None)
        if output is None:
            return
        output_expr, (model_call, move) = output
        self._report_unmoved(
            node, [a for a in arguments if a is not output_expr], move, ctx,
            lambda spelled, suggestion: (
                f"`{ctx.short(output_expr, 30)}` is the output of `{ctx.short(model_call.func, 30)}`, moved by "
                f"{_move_text(ctx, move)}: the loss fails with `Expected all tensors to be on the same "
                f"device` — move it too: `{suggestion}`"))

    def _report_unmoved(self, node: cst.Call, values, move, ctx: RuleContext, consequence) -> None:
        """Report the first of `values` that is a DataLoader batch nothing moved, unless a
        framework moves batches itself; `consequence(spelled, suggested move)` ends the message."""
        sem = ctx.semantic
        for value in values:
            found = _unmoved_batch(sem, value, node)
            if found is None:
                continue
            element, spelled = found
            if _framework_moves_batches(sem, node):
                return
            ctx.report(
                node,
                f"`{spelled}` comes unmoved from `{ctx.short(element.loader, 30)}` (a CPU batch) but "
                + consequence(spelled, _suggested_move(ctx, sem, spelled, move)),
            )
            return


def _is_model_spelling(func: cst.BaseExpression) -> bool:
    """`model(...)` or `self.model(...)`: the spellings whose device the analysis can follow."""
    if isinstance(func, cst.Name):
        return True
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"


def _model_move(sem: Semantic, model: cst.BaseExpression) -> Optional[cst.Call]:
    return device_state.model_device_move(sem, model)


def _unmoved_batch(sem: Semantic, value: cst.BaseExpression, use: cst.Call) -> Optional[Tuple[
        device_state.BatchElement, str]]:
    """The unmoved DataLoader batch element `value` is, with how to name it, when nothing before
    `use` in its loop may have moved it."""
    element = device_state.unmoved_batch_element(sem, value)
    if element is None or device_state.batch_touched_before(sem, element, use):
        return None
    return element, code_for_node(sem.module, value)


def _framework_moves_batches(sem: Semantic, node: cst.CSTNode) -> bool:
    return device_state.batches_moved_by_framework(sem, node)


def _move_text(ctx: RuleContext, move: cst.Call) -> str:
    """The move as the message quotes it, in backticks, followed by where another project file
    defines its device: "`model.to(device)` (`device`, config.py:3)"."""
    statement = ctx.semantic.statement_of(move)
    quoted = ctx.short(statement, 50) if isinstance(statement, (cst.Assign, cst.Expr)) else ctx.short(move, 50)
    origin = device_state.device_origin(ctx.semantic, move)
    if origin is None:
        return f"`{quoted}`"
    return f"`{quoted}` (`{ctx.short(devices.device_argument(ctx.semantic, move), 30)}`, {origin})"


def _suggested_move(ctx: RuleContext, sem: Semantic, spelled: str, move: cst.Call) -> str:
    """`data = data.to(device)` with the model's own device spelling (or `.cuda()` when that is
    how the model was moved); `.to(device)` alone for an element that is not a plain name."""
    argument = devices.device_argument(sem, move)
    method = f".{move.func.attr.value}()" if move.func.attr.value in devices.DEVICE_MOVE_METHODS \
        or argument is None else f".to({ctx.short(argument, 30)})"
    return f"{spelled} = {spelled}{method}" if spelled.isidentifier() else method


__all__ = ["BatchNotOnModelDevice"]
