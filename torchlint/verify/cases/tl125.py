"""TL125: an Adam built inside the batch loop starts from empty state at every step."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL125",
        title="Adam built inside the batch loop: after 5 batches its state has seen 1 step",
        bad="""\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 2).to(DEVICE)
batches = [(torch.randn(8, 4, device=DEVICE), torch.randn(8, 2, device=DEVICE)) for _ in range(5)]
for x, y in batches:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    optimizer.zero_grad()
    (model(x) - y).pow(2).mean().backward()
    optimizer.step()
steps = optimizer.state[model.weight]["step"]
""",
        good="""\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 2).to(DEVICE)
batches = [(torch.randn(8, 4, device=DEVICE), torch.randn(8, 2, device=DEVICE)) for _ in range(5)]
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for x, y in batches:
    optimizer.zero_grad()
    (model(x) - y).pow(2).mean().backward()
    optimizer.step()
steps = optimizer.state[model.weight]["step"]
""",
        bad_line=8,
        probe="value_compare",
        expect={"left": "steps", "op": "==", "right": "1"},
    ),
]
