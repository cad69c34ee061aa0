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
]
