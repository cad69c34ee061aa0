"""TL304: `torch.cat` / `+` / `@` of tensors whose shapes cannot match."""

from __future__ import annotations

import libcst as cst

from torchlint.rules.shape_rule import ShapeRule


class MismatchedJoin(ShapeRule):
    code = "TL304"
    name = "mismatched-join"
    summary = "`torch.cat`, `+` or `@` of tensors whose shapes cannot match: the forward raises"
    confirmation_module = "tl304"
    node_types = (cst.Call, cst.BinaryOperation, cst.AugAssign)
    severity_docs = """
Always an **error**: the join raises (`Sizes of tensors must match except in dimension 1`, `The
size of tensor a (64) must match the size of tensor b (128) at non-singleton dimension 1`,
`mat1 and mat2 shapes cannot be multiplied`).
"""
    docs = """
## What it does
Flags, in a forward the program feeds with a known input (or any input, where no size can make
them match):

- `torch.cat([a, b], dim=d)` where a dimension other than `d` differs (a U-Net skip whose
  encoder and decoder maps no longer have the same height);
- `a + b`, `a * b`, `x += shortcut` of tensors that cannot broadcast (a residual block whose
  channels or stride changed without a projection on the shortcut);
- `a @ b` / `torch.matmul` whose inner sizes differ.

## Why is this bad?
Each raises at the first batch. In a residual block the usual cause is an edit of the main
path's channels or stride that the identity shortcut does not follow.

## Example
```python
out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))   # 64 -> 128 channels
out += x                                                       # x has 64
```

Use instead:
```python
out += self.shortcut(x)   # nn.Sequential(nn.Conv2d(64, 128, 1, stride), nn.BatchNorm2d(128))
```

## Fix safety
No fix.

## References
- https://pytorch.org/docs/stable/generated/torch.cat.html
- https://pytorch.org/docs/stable/notes/broadcasting.html
"""


__all__ = ["MismatchedJoin"]
