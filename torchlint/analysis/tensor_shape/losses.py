"""The input/target contracts of the losses, as data:

- CrossEntropy / NLL: input (N, C) takes class indices (N,) or class probabilities (N, C); a
  target with an extra size-1 dimension, (N, 1), raises `0D or 1D target tensor expected,
  multi-target not supported`;
- BCE / BCEWithLogits: input and target of the same size, else ValueError;
- MSE / L1 / SmoothL1 / Huber: shapes that differ broadcast; (N, 1) against (N,) silently gives an
  N×N loss (a UserWarning only), so the model learns the mean of the targets.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.tensor_shape import dims as D
from torchlint.analysis.tensor_shape import ops

CLASS_INDEX = {"CrossEntropyLoss": "cross_entropy", "NLLLoss": "nll_loss"}
SAME_SIZE = {"BCELoss": "binary_cross_entropy", "BCEWithLogitsLoss": "binary_cross_entropy_with_logits"}
BROADCASTING = {"MSELoss": "mse_loss", "L1Loss": "l1_loss", "SmoothL1Loss": "smooth_l1_loss", "HuberLoss": "huber_loss"}
_FUNCTIONAL = {v: k for table in (CLASS_INDEX, SAME_SIZE, BROADCASTING) for k, v in table.items()}


def loss_class(sem, call: cst.Call) -> Optional[str]:
    """`CrossEntropyLoss` for `criterion(out, y)` with `criterion = nn.CrossEntropyLoss()`, or for
    `F.cross_entropy(out, y)`."""
    qualified = sem.qualified_name(call.func) or ""
    if qualified.startswith("torch.nn.functional."):
        return _FUNCTIONAL.get(qualified.rsplit(".", 1)[-1])
    value = sem.values.of(call.func)
    if value.kind != "criterion":
        return None
    site = getattr(value, "site", None)
    if not isinstance(site, cst.Call):
        return None
    name = (sem.qualified_name(site.func) or "").rsplit(".", 1)[-1]
    return name if name in CLASS_INDEX or name in SAME_SIZE or name in BROADCASTING else None


def check(loss: str, output: D.Shape, target: D.Shape, batch_sizes=()) -> Optional[str]:
    """Why `loss(output, target)` fails or trains wrongly, or None. `batch_sizes`: the batch
    sizes that certainly occur (N takes each)."""
    if output is None or target is None:
        return None
    if loss in CLASS_INDEX:
        if len(output) == 2 and len(target) == 2 and target[1] == 1 and D.same(output[1], 1) is False:
            return (f"{loss} takes class indices of shape (N,) for an (N, C) input, and this target has an extra "
                    f"dimension of size 1: the forward raises `RuntimeError: 0D or 1D target tensor expected, "
                    f"multi-target not supported`; pass `target.squeeze(1)` or build the labels as (N,)")
        found = _class_index_sizes(loss, output, target)
        for size in () if found else batch_sizes or ():  # a batch of the size the code fixes
            found = _class_index_sizes(loss, _at(output, size), _at(target, size))
            if found:
                break
        return found
    if loss in SAME_SIZE:
        if len(output) != len(target) or any(D.same(a, b) is False for a, b in zip(output, target)):
            hint = "use `output.squeeze(1)` or `target.unsqueeze(1).float()`" if (
                _one_extra(output, target) or _one_extra(target, output)) else "give both the same shape"
            raised = ("`ValueError: Target size (...) must be the same as input size (...)`"
                      if loss == "BCEWithLogitsLoss" else
                      "`ValueError: Using a target size (...) that is different to the input size (...)`")
            return f"{loss} needs the input and target of the same size: it raises {raised}; {hint}"
        return None
    if loss in BROADCASTING:
        if _one_extra(output, target):
            return (f"{loss} of an (N, 1) output against an (N,) target broadcasts to an N×N loss (torch only warns "
                    f"`Using a target size that is different to the input size`): every prediction is compared "
                    f"with every sample's target, so the model learns their mean; use `output.squeeze(1)` or "
                    f"`target.view(-1, 1)`")
        for size in batch_sizes or ():
            a, b = _at(output, size), _at(target, size)
            joined = ops.broadcast(a, b)
            if isinstance(joined, str):
                return (f"{loss} of a {D.shape_text(a)} output against a {D.shape_text(b)} target cannot broadcast "
                        f"({joined}) at a batch of {size}: it raises `RuntimeError: The size of tensor a ... must "
                        f"match the size of tensor b`; the model's output and the target need the same shape")
    return None


def _class_index_sizes(loss: str, output: D.Shape, target: D.Shape) -> Optional[str]:
    """Class indices for an (N, C, d1, ...) input are (N, d1, ...); a target with as many
    dimensions as the input holds class probabilities. Torch's errors measured on torch 2.13."""
    if len(output) < 2 or len(target) == len(output):
        return None
    shown = f"{D.shape_text(output)} input and a {D.shape_text(target)} target"
    if len(target) == len(output) - 1:
        if D.same(output[0], target[0]) is False:
            return (f"{loss} of a {shown}: the batch sizes differ, so it raises `ValueError: Expected input "
                    f"batch_size ({D.text(output[0])}) to match target batch_size ({D.text(target[0])})`")
        if any(D.same(a, b) is False for a, b in zip(output[2:], target[1:])):
            return (f"{loss} of a {shown}: class indices for an (N, C, d1, ...) input are (N, d1, ...), so it "
                    f"raises `RuntimeError: size mismatch (got input: [...], target: [...])`")
        return None
    if len(output) > 2 and len(target) != 1:
        return (f"{loss} of a {shown}: class indices for a {len(output)}-D input are {len(output) - 1}-D (N, d1, ...), "
                f"so it raises `RuntimeError: only batches of spatial targets supported ({len(output) - 1}D tensors) "
                f"but got targets of dimension: {len(target)}`")
    return None


def _at(shape: D.Shape, size: int) -> D.Shape:
    """The shape with the batch symbol N set to `size`."""
    batch = D.symbol("N")
    return tuple(size if d == batch else d for d in shape)


def _one_extra(longer: D.Shape, shorter: D.Shape) -> bool:
    """`longer` is `shorter` with a trailing size-1 dimension: (N, 1) against (N,)."""
    return len(longer) == len(shorter) + 1 and longer[-1] == 1 and len(shorter) >= 1 and all(
        D.same(a, b) is not False for a, b in zip(longer, shorter))
