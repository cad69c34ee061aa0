"""TL130: np.mean over a list of losses that require grad raises RuntimeError."""

from torchlint.verify.case import Case

_SETUP = """\
import numpy as np
import torch
import torch.nn as nn

model = nn.Linear(3, 1).to(DEVICE)
criterion = nn.MSELoss()
losses = []
for _ in range(3):
    x = torch.randn(4, 3, device=DEVICE)
    loss = criterion(model(x), torch.zeros(4, 1, device=DEVICE))
    loss.backward()
"""

CASES = [
    Case(
        rule="TL130",
        title="np.mean(losses) of appended losses raises: Can't call numpy() on Tensor that requires grad",
        bad=_SETUP + """\
    losses.append(loss)
average = np.mean(losses)
""",
        good=_SETUP + """\
    losses.append(loss.item())
average = np.mean(losses)
""",
        bad_line=13,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "Can't call numpy() on Tensor that requires grad"},
    ),
]
