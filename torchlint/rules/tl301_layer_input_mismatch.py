"""TL301: a layer whose input does not fit its definition (`Linear` in_features, conv
in_channels, BatchNorm num_features, LayerNorm shape, RNN input_size, attention embed_dim)."""

from __future__ import annotations

from torchlint.rules.shape_rule import ShapeRule


class LayerInputMismatch(ShapeRule):
    code = "TL301"
    name = "layer-input-mismatch"
    summary = "A layer or tensor op gets an input that does not fit its definition: the first forward raises"
    fix_availability = "sometimes"
    confirmation_module = "tl301"
    severity_docs = """
Always an **error**: the input the program feeds reaches the layer with a size it was not built
for, and the first forward raises (`mat1 and mat2 shapes cannot be multiplied`, `expected input
... to have 3 channels`, `running_mean should contain 32 elements not 64`). Where a dimension is
unknown nothing is reported.
"""
    docs = """
## What it does
Follows the shape of what the program feeds a model through its `forward`, layer by layer, and
flags the layer whose input does not fit its definition:

- `nn.Linear(in_features, ...)` whose input's last dimension differs (after a `flatten` that no
  longer gives the number the author wrote);
- `nn.ConvNd(in_channels, ...)` fed another number of channels;
- `nn.BatchNormNd(num_features)`, `nn.GroupNorm`, `nn.LayerNorm(normalized_shape)` over other
  sizes; `nn.InstanceNormNd(..., affine=True)` likewise;
- `nn.LSTM`/`GRU`/`RNN(input_size, ...)`, `nn.MultiheadAttention(embed_dim, ...)` and the
  `nn.Transformer*Layer(d_model, ...)` fed another feature size;
- `nn.LSTMCell`/`GRUCell`/`RNNCell` and `nn.LSTM`/`GRU`/`RNN` given a hidden state whose size
  does not fit them (`hidden0 has inconsistent hidden_size: got 51, expected 64`);
- a layer fed a tensor of a rank it does not take (`BatchNorm2d` after `Flatten`, `Dropout2d` on
  a 1-D tensor);
- a tensor op whose arguments do not fit the tensor it is given: a `dim` out of range
  (`torch.flatten(x, 4)` of a 4-D tensor, `F.log_softmax(x, 4)`), `flatten` from a later to an
  earlier dim, `F.max_pool2d` of a 2-D tensor or padded by more than half its window.

The input comes from the data pipeline (a torchvision dataset and its transforms, a
`TensorDataset`, a `DataLoader` batch), a tensor built with literal sizes (`torch.randn(1, 3, 32,
32)`), or `summary(model, (3, 32, 32))`, in this file or the model's file; a script's own
top-level tensor ops are checked on the tensors it builds. A model nothing known
feeds is checked for every input size: only a mismatch that no input height or width can avoid
is reported (a channel count that does not chain, a `Linear` no flattened size can reach).

## Why is this bad?
This is the first error after changing a working model: a kernel size, a channel count, the
image size, MNIST swapped for CIFAR10, a pooling layer removed. The model builds, the data loads,
and the first batch raises, often after minutes of setup, with a message that names neither the
layer nor the cause.

## Example
```python
trainset = torchvision.datasets.CIFAR10(root="./data", transform=transforms.ToTensor())
...
self.conv1 = nn.Conv2d(3, 6, 5)
self.pool = nn.MaxPool2d(2, 2)
self.conv2 = nn.Conv2d(6, 16, 3)   # was 5
self.fc1 = nn.Linear(16 * 5 * 5, 120)
```
`fc1` gets 16×6×6 = 576 features: CIFAR10 3×32×32 → conv1 6×28×28 → pool 6×14×14 → conv2
16×12×12 → pool 16×6×6 → flatten 576.

Use instead:
```python
self.fc1 = nn.Linear(16 * 6 * 6, 120)   # or nn.LazyLinear(120)
```

## Fix safety
Where the input size is exact, an unsafe fix writes the size the layer gets, as the flattened
map's factors where the shapes show them (`nn.Linear(16 * 6 * 6, 120)`): it makes the model run,
but whether the architecture is what the author meant (or the data should be resized instead) is
the author's call, and a checkpoint saved for the old size no longer loads. No fix where another
input of the program fits the layer as it is, or where the size is a constructor parameter.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.Linear.html
- https://pytorch.org/docs/stable/generated/torch.nn.Conv2d.html
"""


__all__ = ["LayerInputMismatch"]
