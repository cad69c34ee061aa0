"""TL306: a recurrent or attention layer built with `batch_first=False` fed batches that put the
batch first."""

from __future__ import annotations

from torchlint.rules.shape_rule import ShapeRule


class BatchFirstMismatch(ShapeRule):
    code = "TL306"
    name = "batch-first-mismatch"
    summary = "An RNN/LSTM/GRU or attention layer reads (sequence, batch, ...) but is fed batch-first data: samples mix"
    confirmation_module = "tl306"
    triggers = ("LSTM", "GRU", "RNN", "Attention", "Transformer")
    severity_docs = """
Always an **error**: the layer runs its recurrence (or attention) across the samples of the
batch instead of along each sequence, so every output mixes samples; nothing raises, unless a
hidden state built for the batch is passed with the input (`h0 = torch.zeros(layers, x.size(0),
hidden)`), in which case the first forward raises `Expected hidden[0] size ...`.
"""
    docs = """
## What it does
Follows a `DataLoader`'s batches (which always put the batch first: `(N, L, F)`, or `(N, L)`
token ids through an `nn.Embedding`) into the model's forward and flags an `nn.RNN`, `nn.LSTM`,
`nn.GRU`, `nn.MultiheadAttention` or `nn.Transformer*Layer` built with the default
`batch_first=False` that receives them without a `transpose`/`permute` in between.

## Why is this bad?
With `batch_first=False` the layer reads its input as (sequence, batch, features). Fed (batch,
sequence, features) it treats the batch as time: the hidden state carries from one sample to the
next, each "sequence" is one time step of every sample, and the shapes still fit, so nothing
raises. The model trains, badly, and its predictions for a sample change with the other samples
in the batch. Where the forward passes a hidden state built for the batch (`h0 =
torch.zeros(num_layers, x.size(0), hidden_size)`), the layer expects `(num_layers, L, hidden)`
instead and torch raises `Expected hidden[0] size (2, 28, 128), got [2, 100, 128]` (measured on
torch 2.13) for every batch size but the sequence length.

## Example
```python
loader = DataLoader(TensorDataset(torch.randn(1000, 20, 8), labels), batch_size=32)
self.lstm = nn.LSTM(8, 64)            # batch_first=False
out, _ = self.lstm(x)                 # x: (32, 20, 8)
```

Use instead:
```python
self.lstm = nn.LSTM(8, 64, batch_first=True)
```

## Fix safety
No fix: the code after the layer (`out[:, -1]` against `out[-1]`) has to follow the layout.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.LSTM.html
"""


__all__ = ["BatchFirstMismatch"]
