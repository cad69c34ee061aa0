"""TL117: the generator's backward through a `D(fake)` computed before `opt_d.step()` raises."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL117",
        title="GAN step reusing D(fake) after opt_d.step(): modified by an inplace operation",
        bad="""\
import torch
import torch.nn as nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8)).to(DEVICE)
D = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)).to(DEVICE)
crit = nn.BCEWithLogitsLoss()
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
ones = torch.ones(32, 1, device=DEVICE)
zeros = torch.zeros(32, 1, device=DEVICE)
for step in range(3):
    real = torch.randn(32, 8, device=DEVICE)
    fake = G(torch.randn(32, 4, device=DEVICE))
    out = D(fake)
    loss_d = crit(D(real), ones) + crit(out, zeros)
    opt_d.zero_grad()
    loss_d.backward(retain_graph=True)
    opt_d.step()
    loss_g = crit(out, ones)
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
""",
        good="""\
import torch
import torch.nn as nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8)).to(DEVICE)
D = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)).to(DEVICE)
crit = nn.BCEWithLogitsLoss()
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
ones = torch.ones(32, 1, device=DEVICE)
zeros = torch.zeros(32, 1, device=DEVICE)
before = [p.detach().clone() for p in G.parameters()]
for step in range(3):
    real = torch.randn(32, 8, device=DEVICE)
    fake = G(torch.randn(32, 4, device=DEVICE))
    loss_d = crit(D(real), ones) + crit(D(fake.detach()), zeros)
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    out = D(fake)
    loss_g = crit(out, ones)
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
assert all(not torch.equal(a, b) for a, b in zip(before, G.parameters()))  # G trained
""",
        bad_line=22,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "one of the variables needed for gradient computation has been "
                                                "modified by an inplace operation"},
    ),
]
