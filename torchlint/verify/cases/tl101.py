"""TL101: submodules kept in a plain list are not registered with the module."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL101",
        title="two of three nn.Linear layers in a plain list: parameters() sees 2 tensors of 6",
        bad="""\
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 4) for _ in range(2)]
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.out(x)


model = MLP().to(DEVICE)
n_params = len(list(model.parameters()))
n_state = len(model.state_dict())
""",
        good="""\
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.out(x)


model = MLP().to(DEVICE)
n_params = len(list(model.parameters()))
n_state = len(model.state_dict())
""",
        bad_line=8,
        probe="value_compare",
        expect={"left": "n_params", "op": "<", "right": "6",
                "show": ["n_state", "model.layers[0].weight.device"]},
    ),
    Case(
        rule="TL101",
        title="a plain list of layers called like a module: TypeError 'list' object is not callable",
        bad="""\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)]

    def forward(self, x):
        return self.layers(x)


out = Net().to(DEVICE)(torch.randn(3, 4, device=DEVICE))
""",
        good="""\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))

    def forward(self, x):
        return self.layers(x)


out = Net().to(DEVICE)(torch.randn(3, 4, device=DEVICE))
""",
        bad_line=8,
        probe="raises",
        expect={"exc": "TypeError", "match": "'list' object is not callable"},
    ),
]
