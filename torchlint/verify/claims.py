"""Popular claims about PyTorch that are false, each with a case that refutes it.

For a claim, `bad` is the code the claim says misbehaves and `good` is a positive control that
really does misbehave in the way the probe looks for, so the probe is shown able to see it. A
claim is REFUTED when the probe sees no harm in `bad` and sees it in the control.
"""

from __future__ import annotations

from typing import Iterable, List, Optional

from torchlint.verify.case import Case

CLAIMS = [
    Case(
        rule="CLAIM-001",
        title=".numpy() fails on non-contiguous tensors",
        bad="""\
import torch

matrix = torch.arange(12.0, device=DEVICE).reshape(3, 4)
transposed = matrix.cpu().t()
assert not transposed.is_contiguous()
array = transposed.numpy()
same_values = array.tolist() == transposed.tolist()
""",
        good="""\
import torch

matrix = torch.arange(12.0, device=DEVICE).reshape(3, 4).requires_grad_()
transposed = matrix.cpu().t()
array = transposed.numpy()
""",
        bad_line=0,
        probe="raises",
        expect={"exc": "Exception", "match": "",
                "show": ["transposed.is_contiguous()", "transposed.stride()", "array.strides",
                         "same_values"]},
    ),
    Case(
        rule="CLAIM-002",
        title="nn.Conv2d and nn.Linear reject non-contiguous input",
        bad="""\
import torch
import torch.nn as nn

conv = nn.Conv2d(3, 8, kernel_size=3, padding=1).to(DEVICE)
linear = nn.Linear(6, 4).to(DEVICE)
images = torch.randn(2, 5, 5, 3, device=DEVICE).permute(0, 3, 1, 2)
features = torch.randn(6, 3, device=DEVICE).t()
assert not images.is_contiguous() and not features.is_contiguous()
conv_out = conv(images)
linear_out = linear(features)
conv_matches = torch.allclose(conv_out, conv(images.contiguous()), rtol=1e-3, atol=1e-3)
linear_matches = torch.allclose(linear_out, linear(features.contiguous()), rtol=1e-3, atol=1e-3)
""",
        # what really rejects such input: .view()
        good="""\
import torch

images = torch.randn(2, 5, 5, 3, device=DEVICE).permute(0, 3, 1, 2)
flat = images.view(2, -1)
""",
        bad_line=0,
        probe="raises",
        expect={"exc": "Exception", "match": "",
                "show": ["images.is_contiguous()", "images.stride()", "features.stride()",
                         "conv_out.shape", "conv_matches", "linear_matches"]},
    ),
    Case(
        rule="CLAIM-003",
        title="`x += 1` sets x.grad_fn to None and cuts the graph",
        bad="""\
import torch

w = torch.randn(3, device=DEVICE, requires_grad=True)
x = w * 2
x += 1
x.sum().backward()
w_grad = w.grad.tolist()
""",
        # what does cut the graph: detach()
        good="""\
import torch

w = torch.randn(3, device=DEVICE, requires_grad=True)
x = (w * 2).detach()
x += 1
""",
        bad_line=0,
        probe="value_compare",
        expect={"left": "x.grad_fn", "op": "is", "right": "None",
                "show": ["x._version", "x.requires_grad", "w_grad"]},
    ),
    Case(
        rule="CLAIM-004",
        title="AdamW uses less memory than Adam",
        bad="""\
import torch
import torch.nn as nn


def state_bytes(optimizer):
    return sum(t.numel() * t.element_size()
               for state in optimizer.state.values() for t in state.values() if torch.is_tensor(t))


def bytes_after_one_step(optimizer_class, **kwargs):
    model = nn.Linear(256, 256).to(DEVICE)
    optimizer = optimizer_class(model.parameters(), lr=1e-3, **kwargs)
    model(torch.randn(8, 256, device=DEVICE)).sum().backward()
    optimizer.step()
    return state_bytes(optimizer)


param_bytes = (256 * 256 + 256) * 4
adam_bytes = bytes_after_one_step(torch.optim.Adam)
candidate = "AdamW"
candidate_bytes = bytes_after_one_step(torch.optim.AdamW, weight_decay=0.01)
""",
        # an optimizer that really keeps less state than Adam: SGD with momentum (one buffer)
        good="""\
import torch
import torch.nn as nn


def state_bytes(optimizer):
    return sum(t.numel() * t.element_size()
               for state in optimizer.state.values() for t in state.values() if torch.is_tensor(t))


def bytes_after_one_step(optimizer_class, **kwargs):
    model = nn.Linear(256, 256).to(DEVICE)
    optimizer = optimizer_class(model.parameters(), lr=1e-3, **kwargs)
    model(torch.randn(8, 256, device=DEVICE)).sum().backward()
    optimizer.step()
    return state_bytes(optimizer)


param_bytes = (256 * 256 + 256) * 4
adam_bytes = bytes_after_one_step(torch.optim.Adam)
candidate = "SGD(momentum=0.9)"
candidate_bytes = bytes_after_one_step(torch.optim.SGD, momentum=0.9)
""",
        bad_line=0,
        probe="value_compare",
        expect={"left": "candidate_bytes", "op": "<", "right": "adam_bytes",
                "show": ["candidate", "param_bytes"]},
    ),
    Case(
        rule="CLAIM-005",
        title="DataLoader workers put batches on the GPU",
        bad="""\
import torch
from torch.utils.data import DataLoader, TensorDataset

dataset = TensorDataset(torch.randn(16, 3), torch.arange(16))
loader = DataLoader(dataset, batch_size=4, num_workers=1, timeout=20)
batches = iter(loader)
inputs, labels = next(batches)
""",
        # a batch that is on another device because the training loop moved it there (on a
        # CPU-only machine "meta" stands in for the accelerator)
        good="""\
import torch
from torch.utils.data import DataLoader, TensorDataset

dataset = TensorDataset(torch.randn(16, 3), torch.arange(16))
loader = DataLoader(dataset, batch_size=4, num_workers=1, timeout=20)
batches = iter(loader)
inputs, labels = next(batches)
target = DEVICE if DEVICE != "cpu" else OTHER_DEVICE
inputs, labels = inputs.to(target), labels.to(target)
""",
        bad_line=0,
        probe="value_compare",
        expect={"left": "inputs.device.type", "op": "!=", "right": "'cpu'",
                "show": ["loader.num_workers", "type(batches).__name__", "labels.device.type",
                         "inputs.is_pinned()"]},
    ),
    Case(
        rule="CLAIM-006",
        title="device moves must happen outside torch.no_grad()",
        # the data and the model are moved inside no_grad; training then gets its gradients
        bad="""\
import torch
import torch.nn as nn

target = DEVICE if DEVICE != "cpu" else OTHER_DEVICE
model = nn.Linear(4, 2)
x = torch.randn(3, 4)
with torch.no_grad():
    model = model.to(target)
    x_moved = x.to(target)
loss = model(x_moved).sum()
loss.backward()
leaf = model.weight
""",
        # what the claim gets right: a tensor that requires grad, moved inside no_grad, is a new
        # tensor with no link back to its source, so no gradient reaches the source
        good="""\
import torch

target = DEVICE if DEVICE != "cpu" else OTHER_DEVICE
leaf = torch.randn(4, 2, requires_grad=True)
bias = torch.zeros(2, device=target, requires_grad=True)
x = torch.randn(3, 4, device=target)
with torch.no_grad():
    moved = leaf.to(target)
loss = (x @ moved + bias).sum()
loss.backward()
linked = leaf.to(target)
""",
        bad_line=0,
        probe="value_compare",
        expect={"left": "leaf.grad", "op": "is", "right": "None",
                "show": ["model.weight.device", "x_moved.requires_grad", "leaf.is_leaf",
                         "moved.requires_grad", "moved.grad_fn", "bias.grad is None",
                         "linked.grad_fn"]},
    ),
]


def all_claims(ids: Optional[Iterable[str]] = None) -> List[Case]:
    if ids is None:
        return list(CLAIMS)
    prefixes = tuple(i.upper() for i in ids)
    return [claim for claim in CLAIMS if claim.rule.startswith(prefixes)]
