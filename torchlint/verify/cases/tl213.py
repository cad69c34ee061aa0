"""TL213: checkpoint without use_reentrant runs the reentrant variant."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL213",
        title="checkpoint(block, x) without use_reentrant: the first block of a net fed plain data gets no gradient",
        bad="""\
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

block = nn.Linear(4, 4).to(DEVICE)
head = nn.Linear(4, 2).to(DEVICE)
x = torch.randn(8, 4, device=DEVICE)
h = checkpoint(block, x)
head(h).pow(2).mean().backward()
untrained = block.weight.grad is None
""",
        good="""\
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

block = nn.Linear(4, 4).to(DEVICE)
head = nn.Linear(4, 2).to(DEVICE)
x = torch.randn(8, 4, device=DEVICE)
h = checkpoint(block, x, use_reentrant=False)
head(h).pow(2).mean().backward()
untrained = block.weight.grad is None
""",
        bad_line=8,
        probe="value_compare",
        expect={"left": "untrained", "op": "==", "right": "True",
                "show": ["head.weight.grad is not None"]},
    ),
    Case(
        rule="TL213",
        title="checkpoint without use_reentrant warns on every call",
        bad="""\
import torch
from torch.utils.checkpoint import checkpoint

x = torch.randn(3, requires_grad=True, device=DEVICE)
y = checkpoint(torch.sin, x)
""",
        good="""\
import torch
from torch.utils.checkpoint import checkpoint

x = torch.randn(3, requires_grad=True, device=DEVICE)
y = checkpoint(torch.sin, x, use_reentrant=True)
""",
        bad_line=5,
        probe="warns",
        expect={"category": "UserWarning", "match": "the use_reentrant parameter should be passed explicitly"},
    ),
]
