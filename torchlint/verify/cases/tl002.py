"""TL002: optimizer.step() in a loop with backward() and no zero_grad()."""

from torchlint.verify.case import Case

# The loss is linear in the weights, so every iteration's fresh gradient is identical: a loop
# that resets gradients sees the same gradient twice (ratio 1), one that does not sees 2x.
CASES = [
    Case(
        rule="TL002",
        title="gradients accumulate across iterations without zero_grad()",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 1).to(DEVICE)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4, device=DEVICE)
grads = []
for step in range(2):
    loss = model(x).mean()
    loss.backward()
    opt.step()
    grads.append(model.weight.grad.clone())
g1, g2 = grads
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 1).to(DEVICE)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4, device=DEVICE)
grads = []
for step in range(2):
    opt.zero_grad()
    loss = model(x).mean()
    loss.backward()
    opt.step()
    grads.append(model.weight.grad.clone())
g1, g2 = grads
""",
        bad_line=11,
        probe="grads_accumulate",
        expect={"first": "g1", "second": "g2", "ratio": 2.0},
    ),
]
