"""TL109: sigmoid followed by BCELoss instead of BCEWithLogitsLoss."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL109",
        title="BCELoss on a saturated sigmoid gives a zero gradient",
        bad="""\
import torch
import torch.nn as nn

criterion = nn.BCELoss()
logits = torch.tensor([20.0], device=DEVICE, requires_grad=True)
target = torch.tensor([0.0], device=DEVICE)
loss = criterion(torch.sigmoid(logits), target)
loss.backward()
grad = logits.grad.item()
""",
        good="""\
import torch
import torch.nn as nn

criterion = nn.BCEWithLogitsLoss()
logits = torch.tensor([20.0], device=DEVICE, requires_grad=True)
target = torch.tensor([0.0], device=DEVICE)
loss = criterion(logits, target)
loss.backward()
grad = logits.grad.item()
""",
        bad_line=7,
        probe="value_compare",
        # a confidently wrong prediction (logit 20, target 0) must get a gradient
        expect={"left": "grad", "op": "==", "right": "0.0", "show": ["loss.item()"]},
    ),
]
