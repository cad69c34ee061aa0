"""TL307: three-channel Normalize statistics on one-channel images."""

from torchlint.verify.case import Case

_PIPELINE = """\
import torch
from torchvision import datasets, transforms

transform = transforms.Compose([transforms.ToTensor(), {normalize}])
mnist = datasets.MNIST("data", train=True, download=True, transform=transform)
image, label = mnist[0]
"""

CASES = [
    Case(
        rule="TL307",
        title="Normalize((0.5, 0.5, 0.5), ...) on MNIST's 1-channel images",
        bad=_PIPELINE.format(normalize="transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))"),
        good=_PIPELINE.format(normalize="transforms.Normalize((0.1307,), (0.3081,))"),
        bad_line=4,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "doesn't match the broadcast shape [3, 28, 28]"},
        requires=("torchvision",),
        source="torchvision 0.29.1 torchvision/transforms/_functional_tensor.py normalize: `tensor.sub_(mean)` with mean viewed (3, 1, 1) on a (1, 28, 28) image; the same sub_ on torch 2.13 raises `output with shape [1, 28, 28] doesn't match the broadcast shape [3, 28, 28]`",
    ),
]
