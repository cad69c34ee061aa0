"""TL208: the non-underscore nn.init names and F.upsample*."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL208",
        title="nn.init.xavier_uniform (no underscore) warns on every call",
        bad="""\
import torch
import torch.nn as nn

layer = nn.Linear(4, 4).to(DEVICE)
nn.init.xavier_uniform(layer.weight)
""",
        good="""\
import torch
import torch.nn as nn

layer = nn.Linear(4, 4).to(DEVICE)
nn.init.xavier_uniform_(layer.weight)
""",
        bad_line=5,
        probe="warns",
        expect={"category": "FutureWarning", "match": "is now deprecated in favor of",
                "show": ["layer.weight.abs().max().item()"]},
    ),
    Case(
        rule="TL208",
        title="F.upsample_bilinear warns; interpolate(align_corners=True) gives the same values",
        bad="""\
import torch
import torch.nn.functional as F

x = torch.randn(1, 2, 3, 3, device=DEVICE)
y = F.upsample_bilinear(x, scale_factor=2)
same = torch.equal(y, F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True))
""",
        good="""\
import torch
import torch.nn.functional as F

x = torch.randn(1, 2, 3, 3, device=DEVICE)
y = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)
same = torch.equal(y, F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True))
""",
        bad_line=5,
        probe="warns",
        expect={"category": "UserWarning", "match": "is deprecated. Use `nn.functional.interpolate`",
                "show": ["same"]},
    ),
]
