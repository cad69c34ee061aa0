"""TL124: a loss copied into a new tensor and backpropagated: its gradient is cut."""

from torchlint.verify.case import Case

_SETUP = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
generator = nn.Linear(4, 4).to(DEVICE)
feature = nn.Linear(4, 4).to(DEVICE)
x = torch.randn(8, 4, device=DEVICE)
hr = torch.randn(8, 4, device=DEVICE)
sr = generator(x)
perceptual = (feature(sr) - feature(hr)).pow(2).mean()
"""

CASES = [
    Case(
        rule="TL124",
        title="torch.Tensor([perceptual]) added to the loss: the feature layer gets no gradient",
        bad=_SETUP + """\
loss = (sr - hr).pow(2).mean() + torch.Tensor([perceptual]).to(DEVICE)
loss.backward()
no_gradient = feature.weight.grad is None
""",
        good=_SETUP + """\
loss = (sr - hr).pow(2).mean() + perceptual
loss.backward()
no_gradient = feature.weight.grad is None
""",
        bad_line=11,
        probe="value_compare",
        expect={"left": "no_gradient", "op": "==", "right": "True", "show": ["loss.item()"]},
    ),
]
