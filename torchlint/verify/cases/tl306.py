"""TL306: an LSTM built with batch_first=False fed (batch, sequence, features) mixes samples."""

from torchlint.verify.case import Case

_MODEL = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(64, 20, 8), torch.zeros(64)), batch_size=16)
lstm = nn.LSTM(8, 32{batch_first}).to(DEVICE)
for x, y in loader:
    x = x.to(DEVICE)
    out, _ = lstm(x)
    changed = x.clone()
    changed[0] += 1.0
    out_changed, _ = lstm(changed)
    leak = (out_changed[1] - out[1]).abs().max().item()
    break
"""

_WITH_STATE = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(28, 128, 2{batch_first})
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        h0 = torch.zeros(2, x.size(0), 128, device=x.device)
        c0 = torch.zeros(2, x.size(0), 128, device=x.device)
        out, _ = self.lstm(x, (h0, c0))
        return self.fc(out[:, -1, :])


loader = DataLoader(TensorDataset(torch.randn(64, 28, 28), torch.zeros(64)), batch_size=16)
model = RNN().to(DEVICE)
for images, labels in loader:
    outputs = model(images.to(DEVICE))
"""

CASES = [
    Case(
        rule="TL306",
        title="LSTM(batch_first=False) fed DataLoader batches: sample 1's output depends on sample 0",
        bad=_MODEL.format(batch_first=""),
        good=_MODEL.format(batch_first=", batch_first=True"),
        bad_line=7,
        probe="value_compare",
        expect={"left": "leak", "op": ">", "right": "1e-6"},
    ),
    Case(
        rule="TL306",
        title="LSTM(batch_first=False) fed MNIST rows with h0 built for the batch: the forward raises",
        bad=_WITH_STATE.format(batch_first=""),
        good=_WITH_STATE.format(batch_first=", batch_first=True"),
        bad_line=9,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "Expected hidden[0] size (2, 28, 128), got [2, 16, 128]"},
    ),
]
