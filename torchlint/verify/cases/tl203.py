"""TL203: `backward(retain_variables=True)`, an argument PyTorch 0.4 removed."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL203",
        title="d_loss.backward(retain_variables=True) in a GAN step",
        bad="""\
import torch
import torch.nn as nn

D = nn.Linear(4, 1).to(DEVICE)
x = torch.randn(8, 4, device=DEVICE)
d_loss = D(x).sigmoid().mean()
d_loss.backward(retain_variables=True)
""",
        good="""\
import torch
import torch.nn as nn

D = nn.Linear(4, 1).to(DEVICE)
x = torch.randn(8, 4, device=DEVICE)
d_loss = D(x).sigmoid().mean()
d_loss.backward(retain_graph=True)
""",
        bad_line=7,
        probe="raises",
        expect={"exc": "TypeError", "match": "unexpected keyword argument 'retain_variables'",
                "show": ["D.weight.grad is None"]},
    ),
]
