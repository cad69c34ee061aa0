"""TL207: `scheduler.step()` at the top of the epoch loop (the PyTorch < 1.1 order)."""

from torchlint.verify.case import Case

_LOOP = """\
import torch
import torch.nn as nn
from torch.optim import lr_scheduler

model = nn.Linear(4, 1).to(DEVICE)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.1)
x = torch.randn(8, 4, device=DEVICE)
lrs = []
for epoch in range(3):
{before}    for batch in range(2):
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
        lrs.append(optimizer.param_groups[0]["lr"])
{after}"""

CASES = [
    Case(
        rule="TL207",
        title="StepLR stepped before the epoch's batches: the first epoch already runs at lr x 0.1",
        bad=_LOOP.format(before="    scheduler.step()\n", after=""),
        good=_LOOP.format(before="", after="    scheduler.step()\n"),
        bad_line=11,
        probe="value_compare",
        expect={"left": "lrs[0]", "op": "not close", "right": "0.1", "show": ["lrs[::2]"]},
    ),
]
