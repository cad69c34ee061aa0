"""TL113: `nn.BatchNorm2d` after `nn.Flatten`/`nn.Linear` (or `BatchNorm1d` after `Conv2d`) in a
Sequential: the first batch raises ValueError."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis import silent
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext

_EXPECTED = {frozenset({2, 3}): "2D or 3D", frozenset({4}): "4D", frozenset({5}): "5D"}


class BatchNormRankMismatch(Rule):
    code = "TL113"
    name = "batchnorm-rank-mismatch"
    summary = "BatchNorm of the wrong rank in a Sequential (`BatchNorm2d` after `Linear`): ValueError at first batch"
    fix_availability = "none"
    default_severity = Severity.ERROR
    severity_docs = """
Always an **error**: the BatchNorm raises `ValueError: expected 4D input (got 2D input)` (or its
rank's twin) at the first batch.
"""
    triggers = ("BatchNorm",)
    node_types = (cst.Call,)
    confirmation_module = "tl113"
    docs = """
## What it does
In an `nn.Sequential(...)` built in the file, follows the rank of the tensor from layer to layer
where the layers fix it, and flags a BatchNorm that cannot take it:

- after `nn.Flatten()` (default `start_dim=1`: the output is `(N, features)`), and any layers
  that keep the rank (`nn.Linear`, activations, `nn.Dropout`, `nn.BatchNorm1d`), a
  `BatchNorm2d` (4-D only) or `BatchNorm3d` (5-D only);
- where no input could work, batched or not: after `nn.Conv1d` (2-D or 3-D output) a
  `BatchNorm2d`/`BatchNorm3d`; after `nn.Conv2d` (3-D or 4-D) a `BatchNorm3d`; after
  `nn.Conv3d` (4-D or 5-D) a `BatchNorm1d`;
- where only an unbatched input could work by accident: a `BatchNorm2d`/`BatchNorm3d` whose
  `num_features` is the `out_features` of the `nn.Linear` before it, and a `BatchNorm1d`
  (`BatchNorm2d`) whose `num_features` is the `out_channels` of the `nn.Conv2d` (`nn.Conv3d`)
  before it: the size the author means to normalise sits in the dimension a batched tensor of
  the layer's rank puts it, and the BatchNorm rejects that rank.

`BatchNorm1d` after `nn.Linear` (it takes `(N, C)` and `(N, C, L)`) and a Sequential holding a
layer of unknown type between the two are not flagged.

## Why is this bad?
Measured on torch 2.13: `nn.BatchNorm2d(8)` on a `(4, 8)` tensor raises `ValueError: expected
4D input (got 2D input)`; `nn.BatchNorm1d(8)` on `(4, 8, 5, 5)` raises `expected 2D or 3D input
(got 4D input)`; `nn.BatchNorm3d(8)` on a 4-D tensor `expected 5D input (got 4D input)`. The
model builds fine and fails at its first forward pass, often after the dataset has been loaded
and preprocessed.

## Example
```python
head = nn.Sequential(nn.Flatten(), nn.Linear(512, 128), nn.BatchNorm2d(128), nn.ReLU())
```

Use instead:
```python
head = nn.Sequential(nn.Flatten(), nn.Linear(512, 128), nn.BatchNorm1d(128), nn.ReLU())
```

## Fix safety
No fix: whether the layer should be `BatchNorm1d` or the features should keep their spatial
dimensions is the author's choice.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.BatchNorm1d.html
- https://pytorch.org/docs/stable/generated/torch.nn.BatchNorm2d.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if not sem.is_torch(node, "torch.nn.Sequential", "torch.nn.modules.container.Sequential"):
            return
        for call, layer, ranks, previous, how in silent.batchnorm_rank_mismatch(sem, node):
            got = " or ".join(f"{r}D" for r in sorted(ranks))
            expected = _EXPECTED.get(silent.BATCHNORM_RANKS[layer], "other")
            after = f" after `{ctx.short(previous, 30)}`" if previous is not None else ""
            right = f"BatchNorm{max(1, max(ranks) - 2)}d"  # the one a batch of that rank takes
            ctx.report(
                call,
                f"`{ctx.short(call, 30)}`{after} gets {got} input but takes only {expected}: the first "
                f"forward raises `ValueError: expected {expected} input (got {max(ranks)}D input)`; "
                f"use `nn.{right}`",
                severity=Severity.ERROR)


__all__ = ["BatchNormRankMismatch"]
