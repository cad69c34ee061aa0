"""TL307: a `transforms.Normalize` with another number of channels than the images have."""

from __future__ import annotations

from torchlint.rules.shape_rule import ShapeRule


class NormalizeChannels(ShapeRule):
    code = "TL307"
    name = "normalize-channels"
    summary = "`transforms.Normalize` with a mean/std per channel that the images do not have: the first batch raises"
    confirmation_module = "tl307"
    triggers = ("Normalize",)
    cross_file_triggers = False
    severity_docs = """
Always an **error**: the first sample raises `The size of tensor a (1) must match the size of
tensor b (3) at non-singleton dimension 0`.
"""
    docs = """
## What it does
Follows a torchvision dataset's images through its `transforms.Compose([...])` (MNIST is 1
channel, CIFAR10 3, `Grayscale()` makes 1) and flags a `transforms.Normalize(mean, std)` whose
mean has neither one value nor one per channel.

## Why is this bad?
Swapping CIFAR10 for MNIST (or adding `Grayscale()`) keeps the three-channel statistics
`((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))`; the first `next(iter(loader))` raises inside the
DataLoader worker.

## Example
```python
transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
trainset = torchvision.datasets.MNIST(root="./data", transform=transform)
```

Use instead:
```python
transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
```

## Fix safety
No fix: the right statistics depend on the data.

## References
- https://pytorch.org/vision/stable/generated/torchvision.transforms.Normalize.html
"""


__all__ = ["NormalizeChannels"]
