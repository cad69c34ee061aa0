"""TL102: a tensor stored as a plain attribute is not moved with the module.

The model is moved to the accelerator when there is one (DEVICE "cuda"), else to the meta
stand-in (OTHER_DEVICE on a CPU machine); the input is created there too.
"""

from torchlint.verify.case import Case

_MODEL = """\
import torch
import torch.nn as nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        {line}

    def forward(self, x):
        return self.proj(x) * self.weights


target = DEVICE if DEVICE != "cpu" else OTHER_DEVICE
model = Scaled().to(target)
x = torch.randn(2, 4, device=target)
out = model(x)
"""

CASES = [
    Case(
        rule="TL102",
        title="tensor attribute stays on the CPU after model.to(device)",
        bad=_MODEL.format(line="self.weights = torch.linspace(0.5, 2.0, 4)"),
        good=_MODEL.format(line='self.register_buffer("weights", torch.linspace(0.5, 2.0, 4))'),
        bad_line=9,
        probe="raises",
        expect={"exc": "RuntimeError",
                "match": ["Expected all tensors to be on the same device",
                          "is not on the expected device"],
                "show": ["model.proj.weight.device", "model.weights.device"]},
    ),
    Case(
        rule="TL102",
        title="tensor attribute keeps float32 after model.double()",
        bad=_MODEL.format(line="self.weights = torch.linspace(0.5, 2.0, 4)").replace(
            'target = DEVICE if DEVICE != "cpu" else OTHER_DEVICE\nmodel = Scaled().to(target)\n'
            "x = torch.randn(2, 4, device=target)\nout = model(x)\n",
            "model = Scaled().to(DEVICE).double()\nout = model(torch.randn(2, 4, device=DEVICE, dtype=torch.float64))\n"
            "weights_dtype = model.weights.dtype\n"),
        good=_MODEL.format(line='self.register_buffer("weights", torch.linspace(0.5, 2.0, 4))').replace(
            'target = DEVICE if DEVICE != "cpu" else OTHER_DEVICE\nmodel = Scaled().to(target)\n'
            "x = torch.randn(2, 4, device=target)\nout = model(x)\n",
            "model = Scaled().to(DEVICE).double()\nout = model(torch.randn(2, 4, device=DEVICE, dtype=torch.float64))\n"
            "weights_dtype = model.weights.dtype\n"),
        bad_line=9,
        probe="value_compare",
        expect={"left": "str(weights_dtype)", "op": "!=", "right": "str(model.proj.weight.dtype)",
                "show": ["out.dtype"]},
    ),
]
