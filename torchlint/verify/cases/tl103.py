"""TL103: calling module.forward(x) directly skips the module's hooks."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL103",
        title="model.forward(x) called directly: forward hooks never fire",
        bad="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(DEVICE)
seen = []
model.register_forward_hook(lambda module, args, output: seen.append(output.shape))
x = torch.randn(3, 4, device=DEVICE)
for _ in range(3):
    out = model.forward(x)
hook_calls = len(seen)
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(DEVICE)
seen = []
model.register_forward_hook(lambda module, args, output: seen.append(output.shape))
x = torch.randn(3, 4, device=DEVICE)
for _ in range(3):
    out = model(x)
hook_calls = len(seen)
""",
        bad_line=9,
        probe="hooks_skipped",
        expect={"name": "model", "show": ["hook_calls"]},
    ),
]
