"""TL131: a loss overwritten before its backward contributes no gradient."""

from torchlint.verify.case import Case

_SETUP = """\
import torch
import torch.nn as nn

critic = nn.Linear(4, 1).to(DEVICE)
penalty = nn.Linear(4, 1).to(DEVICE)
real = torch.randn(8, 4, device=DEVICE)
fake = torch.randn(8, 4, device=DEVICE)
mse = nn.MSELoss()
"""

CASES = [
    Case(
        rule="TL131",
        title="d_loss overwritten by the gradient penalty: the critic's own loss gives no gradient",
        bad=_SETUP + """\
d_loss = mse(critic(fake), torch.zeros(8, 1, device=DEVICE))
d_loss = 10 * penalty(real).pow(2).mean()
d_loss.backward()
critic_untrained = critic.weight.grad is None
""",
        good=_SETUP + """\
d_loss = mse(critic(fake), torch.zeros(8, 1, device=DEVICE))
d_loss = d_loss + 10 * penalty(real).pow(2).mean()
d_loss.backward()
critic_untrained = critic.weight.grad is None
""",
        bad_line=9,
        probe="value_compare",
        expect={"left": "critic_untrained", "op": "==", "right": "True"},
    ),
]
