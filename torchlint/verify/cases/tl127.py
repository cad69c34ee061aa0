"""TL127: a shape-changing in-place method on `.data` changes only the alias."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL127",
        title="feature.data.t_() leaves feature (seq, batch): the shape change is lost",
        bad="""\
import torch

feature = torch.randn(5, 4, device=DEVICE, requires_grad=True) * 2
feature.data.t_()
shape = tuple(feature.shape)
""",
        good="""\
import torch

feature = torch.randn(5, 4, device=DEVICE, requires_grad=True) * 2
feature = feature.t()
shape = tuple(feature.shape)
""",
        bad_line=4,
        probe="value_compare",
        expect={"left": "shape", "op": "==", "right": "(5, 4)"},
    ),
]
