"""TL202: `Variable(x, volatile=True)` no longer switches autograd off."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL202",
        title="evaluation through Variable(x, volatile=True) still builds a graph",
        bad="""\
import torch
import torch.nn as nn
from torch.autograd import Variable

model = nn.Linear(4, 3).to(DEVICE)
images = torch.randn(8, 4, device=DEVICE)
inputs = Variable(images, volatile=True)
out = model(inputs)
""",
        good="""\
import torch
import torch.nn as nn
from torch.autograd import Variable

model = nn.Linear(4, 3).to(DEVICE)
images = torch.randn(8, 4, device=DEVICE)
with torch.no_grad():
    inputs = Variable(images)
    out = model(inputs)
""",
        bad_line=7,
        probe="builds_graph",
        expect={"name": "out", "show": ["out.requires_grad"]},
    ),
]
