"""TL302: a `view`/`reshape` that cannot hold the element count, or folds the batch into the
features."""

from __future__ import annotations

from torchlint.rules.shape_rule import ShapeRule


class ViewBreaksBatch(ShapeRule):
    code = "TL302"
    name = "view-breaks-batch"
    summary = "A view/reshape whose sizes do not fit the tensor: it raises, or mixes samples across the batch"
    confirmation_module = "tl302"
    severity_docs = """
Always an **error**: either the view raises (`shape '[-1, 400]' is invalid for input of size
2304`), or, where the numbers happen to divide, each row holds values of several samples and the
model trains on mixed-up data.
"""
    docs = """
## What it does
Flags a `x.view(...)` / `x.reshape(...)` in a forward whose sizes cannot fit the tensor the
program feeds it:

- `view(-1, K)` where each sample has some other number of values than K: the `-1` is no longer
  the batch;
- `view(x.size(0), ...)` whose other sizes do not multiply to the sample's size;
- a view of a tensor whose whole size is known that asks for a different number of elements.

## Why is this bad?
`x.view(-1, 16 * 5 * 5)` is the classic flatten. After an edit changes the feature maps to
16×6×6, the view no longer describes one sample per row: for most batch sizes torch raises
`shape '[-1, 400]' is invalid for input of size 36864`; where 400 divides the batch's element
count, it silently builds rows out of parts of different samples, and the loss then compares
them with the wrong labels (`Expected input batch_size (92) to match target batch_size (64)`, or
no error at all).

## Example
```python
x = x.view(-1, 16 * 5 * 5)   # each sample is 16×6×6 = 576 now
```

Use instead:
```python
x = torch.flatten(x, 1)      # or x.view(x.size(0), -1)
```

## Fix safety
No fix: the size the next layer expects has to change with it (TL301 says which).

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.view.html
"""


__all__ = ["ViewBreaksBatch"]
