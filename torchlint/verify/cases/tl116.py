"""TL116: .numpy() on a tensor that requires grad raises."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL116",
        title="model output .cpu().numpy() raises: Can't call numpy() on Tensor that requires grad",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 2).to(DEVICE)
out = model(torch.randn(3, 4, device=DEVICE))
scores = out.cpu().numpy()
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 2).to(DEVICE)
out = model(torch.randn(3, 4, device=DEVICE))
scores = out.detach().cpu().numpy()
""",
        bad_line=6,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "Can't call numpy() on Tensor that requires grad"},
    ),
]
