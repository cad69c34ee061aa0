"""TL110: an out-of-place tensor operation as a statement does nothing."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL110",
        title="F.dropout as a statement applies no dropout",
        bad="""\
import torch
import torch.nn.functional as F

h = torch.ones(1000, device=DEVICE)
F.dropout(h, 0.5, True)
dropped = (h == 0).sum().item()
""",
        good="""\
import torch
import torch.nn.functional as F

h = torch.ones(1000, device=DEVICE)
h = F.dropout(h, 0.5, True)
dropped = (h == 0).sum().item()
""",
        bad_line=5,
        probe="value_compare",
        # the number of zeroed elements in train mode: about 500 when dropout is applied
        expect={"left": "dropped", "op": "==", "right": "0"},
    ),
    Case(
        rule="TL110",
        title="x.to(device) as a statement leaves the batch where it was: the model on the other device fails",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 2).to(OTHER_DEVICE)
x = torch.randn(3, 4, device=DEVICE)
x.to(OTHER_DEVICE)
out = model(x)
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 2).to(OTHER_DEVICE)
x = torch.randn(3, 4, device=DEVICE)
x = x.to(OTHER_DEVICE)
out = model(x)
""",
        bad_line=6,
        probe="raises",
        expect={"exc": "RuntimeError",
                "match": ["is not on the expected device", "Expected all tensors to be on the same device"]},
    ),
]
