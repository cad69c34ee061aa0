"""TL008: hard-coded CUDA in code that chooses its device at run time.

The harm is on a run without CUDA, which the case models with its own condition: on a CPU run
`use_cuda` is False. With a CPU-only torch build `.cuda()` then raises `Torch not compiled with
CUDA enabled`; where CUDA exists but the run chose the CPU (the CPU child on a GPU machine), the
hard-coded tensor lands on the GPU and meets CPU tensors. A CUDA run (`use_cuda` True) shows no
harm by design, so the case runs on the CPU only.
"""

from torchlint.verify.case import Case

_EXPECT = {"exc": "Exception",
           "match": ["Torch not compiled with CUDA enabled", "No CUDA GPUs are available",
                     "Found no NVIDIA driver", "Expected all tensors to be on the same device"],
           "show": ["device", "model.weight.device"]}

CASES = [
    Case(
        rule="TL008",
        title=".cuda() in a script that picks its device with torch.cuda.is_available()",
        bad="""\
import torch
import torch.nn as nn

use_cuda = torch.cuda.is_available() and DEVICE == "cuda"
device = torch.device("cuda" if use_cuda else "cpu")
model = nn.Linear(4, 4).to(device)
mask = torch.ones(4).cuda()
out = model(torch.randn(2, 4, device=device)) * mask
""",
        good="""\
import torch
import torch.nn as nn

use_cuda = torch.cuda.is_available() and DEVICE == "cuda"
device = torch.device("cuda" if use_cuda else "cpu")
model = nn.Linear(4, 4).to(device)
mask = torch.ones(4).to(device)
out = model(torch.randn(2, 4, device=device)) * mask
""",
        bad_line=7,
        probe="raises",
        expect=_EXPECT,
        devices=("cpu",),
    ),
    Case(
        rule="TL008",
        title='device="cuda" in a function that takes its device as a parameter',
        bad="""\
import torch
import torch.nn as nn


def make_noise(n, device):
    return torch.randn(n, 4, device="cuda")


device = torch.device("cuda" if torch.cuda.is_available() and DEVICE == "cuda" else "cpu")
model = nn.Linear(4, 4).to(device)
out = model(make_noise(2, device))
""",
        good="""\
import torch
import torch.nn as nn


def make_noise(n, device):
    return torch.randn(n, 4, device=device)


device = torch.device("cuda" if torch.cuda.is_available() and DEVICE == "cuda" else "cpu")
model = nn.Linear(4, 4).to(device)
out = model(make_noise(2, device))
""",
        bad_line=6,
        probe="raises",
        expect=_EXPECT,
        devices=("cpu",),
    ),
]
