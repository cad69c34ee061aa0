"""TL129: logits of a BCEWithLogitsLoss model thresholded at 0.5."""

from torchlint.verify.case import Case

_SETUP = """\
import torch
import torch.nn as nn

model = nn.Linear(1, 1).to(DEVICE)
with torch.no_grad():
    model.weight.fill_(1.0)
    model.bias.zero_()
criterion = nn.BCEWithLogitsLoss()
x = torch.tensor([[0.2], [0.4], [0.6], [-1.0]], device=DEVICE)
y = torch.tensor([[1.0], [1.0], [1.0], [0.0]], device=DEVICE)
criterion(model(x), y).backward()
"""

CASES = [
    Case(
        rule="TL129",
        title="logits > 0.5 predicts positive only above probability 0.62",
        bad=_SETUP + """\
preds = (model(x) > 0.5).float()
accuracy = (preds == y).float().mean().item()
""",
        good=_SETUP + """\
preds = (model(x) > 0).float()
accuracy = (preds == y).float().mean().item()
""",
        bad_line=12,
        probe="value_compare",
        expect={"left": "accuracy", "op": "<", "right": "1.0", "show": ["preds.flatten().tolist()"]},
    ),
]
