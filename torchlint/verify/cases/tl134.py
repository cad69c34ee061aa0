"""TL134: model.eval() inside the training loop without train(): later batches train in eval mode."""

from torchlint.verify.case import Case

_HEAD = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.5), nn.Linear(16, 2)).to(DEVICE)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [torch.randn(8, 4, device=DEVICE) for _ in range(4)]
modes = []
for step, x in enumerate(batches):
    if step % 2 == 0:
        model.eval()
        with torch.no_grad():
            model(x)
"""
_TAIL = """\
    modes.append(model.training)
    optimizer.zero_grad()
    model(x).pow(2).mean().backward()
    optimizer.step()
trained_in_eval = modes.count(False)
"""

CASES = [
    Case(
        rule="TL134",
        title="eval() every other batch without train(): every batch after the first trains in eval mode",
        bad=_HEAD + _TAIL,
        good=_HEAD + "        model.train()\n" + _TAIL,
        bad_line=11,
        probe="value_compare",
        expect={"left": "trained_in_eval", "op": ">", "right": "0", "show": ["modes"]},
    ),
]
