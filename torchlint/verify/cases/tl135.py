"""TL135: zero_grad() then step() with no backward in between changes nothing."""

from torchlint.verify.case import Case

_SETUP = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
generator = nn.Linear(2, 4).to(DEVICE)
discriminator = nn.Linear(4, 1).to(DEVICE)
adversarial_loss = nn.BCEWithLogitsLoss()
optimizer_G = torch.optim.Adam(generator.parameters(), lr=0.1)
before = generator.weight.detach().clone()
valid = torch.ones(8, 1, device=DEVICE)
optimizer_G.zero_grad()
g_loss = adversarial_loss(discriminator(generator(torch.randn(8, 2, device=DEVICE))), valid)
"""

_LOOP = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
generator = nn.Linear(2, 4).to(DEVICE)
discriminator = nn.Linear(4, 1).to(DEVICE)
adversarial_loss = nn.BCEWithLogitsLoss()
optimizer_G = torch.optim.Adam(generator.parameters(), lr=0.1)
before = generator.weight.detach().clone()
valid = torch.ones(8, 1, device=DEVICE)
for i in range(4):
    optimizer_G.zero_grad()
    g_loss = adversarial_loss(discriminator(generator(torch.randn(8, 2, device=DEVICE))), valid)
    if i % 2 == 0:
"""

CASES = [
    Case(
        rule="TL135",
        title="the generator's step without g_loss.backward(): its weights do not move",
        bad=_SETUP + """\
optimizer_G.step()
unchanged = torch.equal(before, generator.weight.detach())
""",
        good=_SETUP + """\
g_loss.backward()
optimizer_G.step()
unchanged = torch.equal(before, generator.weight.detach())
""",
        bad_line=13,
        probe="value_compare",
        expect={"left": "unchanged", "op": "==", "right": "True"},
    ),
    Case(
        rule="TL135",
        title="zero_grad() at the top of the loop, the step under a condition: the generator never moves",
        bad=_LOOP + """\
        optimizer_G.step()
unchanged = torch.equal(before, generator.weight.detach())
""",
        good=_LOOP + """\
        g_loss.backward()
        optimizer_G.step()
unchanged = torch.equal(before, generator.weight.detach())
""",
        bad_line=15,
        probe="value_compare",
        expect={"left": "unchanged", "op": "==", "right": "True"},
    ),
]
