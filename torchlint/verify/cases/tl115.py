"""TL115: a comparison with NaN never holds."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL115",
        title="loss == float('nan') is False for a NaN loss: the divergence check never fires",
        bad="""\
import torch

loss = torch.log(torch.tensor(-1.0, device=DEVICE))
diverged = False
if loss == float("nan"):
    diverged = True
""",
        good="""\
import torch

loss = torch.log(torch.tensor(-1.0, device=DEVICE))
diverged = False
if torch.isnan(loss):
    diverged = True
""",
        bad_line=5,
        probe="value_compare",
        expect={"left": "diverged", "op": "is", "right": "False", "show": ["loss.item()"]},
    ),
]
