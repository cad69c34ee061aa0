"""TL113: a BatchNorm of the wrong dimensionality raises at the first batch."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL113",
        title="BatchNorm2d after Flatten/Linear gets 2-D features: ValueError",
        bad="""\
import torch
import torch.nn as nn

head = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.BatchNorm2d(16), nn.ReLU()).to(DEVICE)
out = head(torch.randn(4, 4, 4, 4, device=DEVICE))
""",
        good="""\
import torch
import torch.nn as nn

head = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.BatchNorm1d(16), nn.ReLU()).to(DEVICE)
out = head(torch.randn(4, 4, 4, 4, device=DEVICE))
""",
        bad_line=4,
        probe="raises",
        expect={"exc": "ValueError", "match": "expected 4D input (got 2D input)"},
    ),
    Case(
        rule="TL113",
        title="BatchNorm1d after Conv2d gets 4-D maps: ValueError",
        bad="""\
import torch
import torch.nn as nn

body = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm1d(16), nn.ReLU()).to(DEVICE)
out = body(torch.randn(2, 3, 8, 8, device=DEVICE))
""",
        good="""\
import torch
import torch.nn as nn

body = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.ReLU()).to(DEVICE)
out = body(torch.randn(2, 3, 8, 8, device=DEVICE))
""",
        bad_line=4,
        probe="raises",
        expect={"exc": "ValueError", "match": "expected 2D or 3D input (got 4D input)"},
    ),
]
