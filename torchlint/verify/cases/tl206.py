"""TL206: `size_average=` / `reduce=` on torch losses."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL206",
        title="nn.MSELoss(size_average=False) warns on every construction",
        bad="""\
import torch
import torch.nn as nn

x = torch.randn(8, 4, device=DEVICE)
y = torch.randn(8, 4, device=DEVICE)
criterion = nn.MSELoss(size_average=False)
loss = criterion(x, y)
summed = (x - y).pow(2).sum()
""",
        good="""\
import torch
import torch.nn as nn

x = torch.randn(8, 4, device=DEVICE)
y = torch.randn(8, 4, device=DEVICE)
criterion = nn.MSELoss(reduction="sum")
loss = criterion(x, y)
summed = (x - y).pow(2).sum()
""",
        bad_line=6,
        probe="warns",
        expect={"category": "UserWarning", "match": "size_average and reduce args will be deprecated",
                "show": ["loss.item()", "summed.item()"]},
    ),
]
