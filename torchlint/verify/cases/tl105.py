"""TL105: reading .grad of a non-leaf tensor."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL105",
        title=".grad of a converted copy of a leaf is None",
        bad="""\
import torch

x = torch.randn(5, device=DEVICE, dtype=torch.float64)
w = torch.randn(5, device=DEVICE, requires_grad=True).double()
loss = (w * x).sum()
loss.backward()
grad = w.grad
""",
        good="""\
import torch

x = torch.randn(5, device=DEVICE, dtype=torch.float64)
w = torch.randn(5, device=DEVICE, dtype=torch.float64, requires_grad=True)
loss = (w * x).sum()
loss.backward()
grad = w.grad
""",
        bad_line=7,
        probe="warns",
        expect={"category": "UserWarning",
                "match": "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed",
                "show": ["w.is_leaf", "grad is None"]},
    ),
    Case(
        rule="TL105",
        title=".grad of an intermediate result (w * 2) is None without retain_grad()",
        bad="""\
import torch

w = torch.randn(5, device=DEVICE, requires_grad=True)
y = w * 2
(y * y).sum().backward()
grad = y.grad
""",
        good="""\
import torch

w = torch.randn(5, device=DEVICE, requires_grad=True)
y = w * 2
y.retain_grad()
(y * y).sum().backward()
grad = y.grad
""",
        bad_line=6,
        probe="warns",
        expect={"category": "UserWarning",
                "match": "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed",
                "show": ["y.is_leaf", "grad is None"]},
    ),
]
