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
        expect={"exc": "RuntimeError", "match": "must match the size of tensor b (3)"},
        requires=("torchvision",),
        source="torchvision 0.29.1 torchvision/transforms/_functional_tensor.py normalize (tensor.sub_(mean).div_(std) with mean of shape (3, 1, 1))",
    ),
]
