"""TL303: a kernel larger than the feature map that reaches it."""

from torchlint.verify.case import Case

_NET = """\
import torch
import torch.nn as nn

features = nn.Sequential(
    nn.Conv2d(1, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
    {last},
).to(DEVICE)
out = features(torch.randn(8, 1, 28, 28, device=DEVICE))
"""

CASES = [
    Case(
        rule="TL303",
        title="a third 5×5 conv on MNIST's 4×4 maps: kernel larger than the input",
        bad=_NET.format(last="nn.Conv2d(32, 64, 5)"),
        good=_NET.format(last="nn.Conv2d(32, 64, 3, padding=1)"),
        bad_line=7,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "Kernel size can't be greater than actual input size"},
    ),
]
