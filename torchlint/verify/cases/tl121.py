"""TL121: log(1 + x) and exp(x) - 1 lose a small x."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL121",
        title="torch.log(1 + x) is exactly 0 for x = 1e-8 in float32; log1p keeps x",
        bad="""\
import torch

x = torch.full((1,), 1e-8, device=DEVICE)
y = torch.log(1 + x)
""",
        good="""\
import torch

x = torch.full((1,), 1e-8, device=DEVICE)
y = torch.log1p(x)
""",
        bad_line=4,
        probe="value_compare",
        expect={"left": "y", "op": "==", "right": "0.0", "show": ["x.item()"]},
    ),
    Case(
        rule="TL121",
        title="torch.exp(x) - 1 is exactly 0 for x = 1e-8 in float32; expm1 keeps x",
        bad="""\
import torch

x = torch.full((1,), 1e-8, device=DEVICE)
y = torch.exp(x) - 1
""",
        good="""\
import torch

x = torch.full((1,), 1e-8, device=DEVICE)
y = torch.expm1(x)
""",
        bad_line=4,
        probe="value_compare",
        expect={"left": "y", "op": "==", "right": "0.0", "show": ["x.item()"]},
    ),
    Case(
        rule="TL121",
        title="torch.log(1 + torch.exp(t)) at t = 100 is inf with a NaN gradient; F.softplus(t) is 100",
        bad="""\
import torch
import torch.nn.functional as F

t = torch.full((1,), 100.0, device=DEVICE, requires_grad=True)
y = torch.log(1 + torch.exp(t))
y.sum().backward()
""",
        good="""\
import torch
import torch.nn.functional as F

t = torch.full((1,), 100.0, device=DEVICE, requires_grad=True)
y = F.softplus(t)
y.sum().backward()
""",
        bad_line=5,
        probe="value_compare",
        expect={"left": "y", "op": "==", "right": "float('inf')", "show": ["t.grad.item()"]},
    ),
]
