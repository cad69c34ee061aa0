"""TL303: a convolution or pooling window larger than the spatial size that reaches it."""

from __future__ import annotations

from torchlint.rules.shape_rule import ShapeRule


class WindowLargerThanInput(ShapeRule):
    code = "TL303"
    name = "window-larger-than-input"
    summary = "A kernel or pooling window larger than the feature map that reaches it: the forward raises"
    confirmation_module = "tl303"
    severity_docs = """
Always an **error**: the layer raises (`Kernel size can't be greater than actual input size`,
`Output size is too small`) at the first batch.
"""
    docs = """
## What it does
Follows the spatial size of the program's input through the forward and flags the convolution or
pooling layer (or `F.max_pool2d`-style call) whose window no longer fits: each convolution
without padding and each pooling shrinks the feature map, and with a smaller input (MNIST's
28×28 instead of 32×32) or one more layer it reaches zero.

## Why is this bad?
The model builds and the data loads; the first forward raises `RuntimeError: Calculated padded
input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size can't be greater than actual
input size`, naming no layer.

## Example
```python
# MNIST 1×28×28 -> conv 5×5 -> 24 -> pool -> 12 -> conv 5×5 -> 8 -> pool -> 4 -> conv 5×5: fails
self.conv3 = nn.Conv2d(32, 64, 5)
```

Use instead:
```python
self.conv3 = nn.Conv2d(32, 64, 3, padding=1)
```

## Fix safety
No fix: padding, a smaller kernel or dropping a pooling layer change the architecture.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.Conv2d.html
- https://pytorch.org/docs/stable/generated/torch.nn.MaxPool2d.html
"""


__all__ = ["WindowLargerThanInput"]
