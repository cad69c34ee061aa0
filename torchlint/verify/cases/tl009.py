"""TL009: a half-precision input fed to a float32 model outside autocast."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL009",
        title="x.half() into a float32 nn.Linear",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 2).to(DEVICE)
x = torch.randn(3, 4, device=DEVICE)
y = model(x.half())
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 2).to(DEVICE).half()
x = torch.randn(3, 4, device=DEVICE)
y = model(x.half())
""",
        bad_line=6,
        probe="raises",
        expect={"exc": "RuntimeError",
                "match": ["mat1 and mat2 must have the same dtype", "should be the same"],
                "show": ["model.weight.dtype", "y.dtype"]},
    ),
    Case(
        rule="TL009",
        title="bfloat16 input into a float32 nn.Linear; under autocast it runs",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 2).to(DEVICE)
x = torch.randn(3, 4, device=DEVICE)
y = model(x.to(torch.bfloat16))
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 2).to(DEVICE)
x = torch.randn(3, 4, device=DEVICE)
with torch.autocast(device_type=DEVICE, dtype=torch.bfloat16):
    y = model(x.to(torch.bfloat16))
""",
        bad_line=6,
        probe="raises",
        expect={"exc": "RuntimeError",
                "match": ["mat1 and mat2 must have the same dtype", "should be the same"],
                "show": ["model.weight.dtype", "y.dtype"]},
    ),
]
