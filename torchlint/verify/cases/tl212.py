"""TL212: `loss.data.numpy()[0]` and `sum(loss)` on the 0-dim tensor a loss is since PyTorch 0.4."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL212",
        title="loss.data.numpy()[0] of a criterion's output (PyTorch 0.3 style)",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 3).to(DEVICE)
criterion = nn.CrossEntropyLoss()
x = torch.randn(8, 4, device=DEVICE)
y = torch.randint(0, 3, (8,), device=DEVICE)
loss = criterion(model(x), y)
history = []
history.append(loss.data.cpu().numpy()[0])
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 3).to(DEVICE)
criterion = nn.CrossEntropyLoss()
x = torch.randn(8, 4, device=DEVICE)
y = torch.randint(0, 3, (8,), device=DEVICE)
loss = criterion(model(x), y)
history = []
history.append(loss.data.cpu().item())
""",
        bad_line=10,
        probe="raises",
        expect={"exc": "IndexError", "match": "array is 0-dimensional",
                "show": ["loss.dim()", "history"]},
    ),
    Case(
        rule="TL212",
        title="sum(loss) of a 0-dim loss",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 3).to(DEVICE)
criterion = nn.CrossEntropyLoss()
x = torch.randn(8, 4, device=DEVICE)
y = torch.randint(0, 3, (8,), device=DEVICE)
loss = criterion(model(x), y)
total = sum(loss)
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 3).to(DEVICE)
criterion = nn.CrossEntropyLoss()
x = torch.randn(8, 4, device=DEVICE)
y = torch.randint(0, 3, (8,), device=DEVICE)
loss = criterion(model(x), y)
total = loss.item()
""",
        bad_line=9,
        probe="raises",
        expect={"exc": "TypeError", "match": "iteration over a 0-d tensor",
                "show": ["loss.dim()"]},
    ),
]
