"""TL305: a loss whose input and target shapes do not fit its contract."""

from __future__ import annotations

from torchlint.rules.shape_rule import ShapeRule


class LossTargetShape(ShapeRule):
    code = "TL305"
    name = "loss-target-shape"
    summary = "A loss whose input and target shapes do not fit: it raises, or broadcasts to an N×N loss"
    confirmation_module = "tl305"
    severity_docs = """
Always an **error**: `CrossEntropyLoss`/`NLLLoss` with (N, 1) targets and `BCELoss` /
`BCEWithLogitsLoss` of (N, 1) against (N,) raise at the first batch; `MSELoss`/`L1Loss` of (N, 1)
against (N,) raise nothing and train the model towards the mean target.
"""
    docs = """
## What it does
Where the model's output shape is known (the program feeds it a known input) and the target comes
from the same batch (a classification dataset's labels are (N,), a `TensorDataset`'s tensors
keep their shapes, through `.view(-1, 1)`, `.unsqueeze(1)`, `.float()`), checks the loss's
contract:

- `CrossEntropyLoss` / `NLLLoss` (and `F.cross_entropy`, `F.nll_loss`): an (N, C) input takes
  (N,) class indices; an (N, 1) target raises;
- `BCELoss` / `BCEWithLogitsLoss`: input and target of the same size;
- `MSELoss`, `L1Loss`, `SmoothL1Loss`, `HuberLoss`: an (N, 1) output against (N,) targets.

## Why is this bad?
The classification cases raise (`0D or 1D target tensor expected, multi-target not supported`,
`Using a target size (torch.Size([64])) that is different to the input size
(torch.Size([64, 1]))`). The regression case does not: the (N, 1) and (N,) tensors broadcast to
N×N, torch only warns, and every prediction is pulled towards every sample's target, so the
model learns the mean.

## Example
```python
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
loader = DataLoader(TensorDataset(X, y), batch_size=32)   # y: torch.randn(1000)
loss = nn.MSELoss()(model(xb), yb)
```

Use instead:
```python
loss = nn.MSELoss()(model(xb).squeeze(1), yb)
```

## Fix safety
No fix: which side to reshape is the author's choice.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html
- https://pytorch.org/docs/stable/generated/torch.nn.MSELoss.html
"""


__all__ = ["LossTargetShape"]
