"""TL114: sigmoid outputs fed to CrossEntropyLoss."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL114",
        title="CrossEntropyLoss on sigmoid outputs shrinks the gradient",
        bad="""\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
criterion = nn.CrossEntropyLoss()
logits = torch.randn(16, 10, device=DEVICE, requires_grad=True)
target = torch.randint(0, 10, (16,), device=DEVICE)
loss = criterion(torch.sigmoid(logits), target)
loss.backward()
reference = torch.autograd.grad(F.cross_entropy(logits, target), logits)[0]
grad_ratio = logits.grad.norm().item() / reference.norm().item()
""",
        good="""\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
criterion = nn.CrossEntropyLoss()
logits = torch.randn(16, 10, device=DEVICE, requires_grad=True)
target = torch.randint(0, 10, (16,), device=DEVICE)
loss = criterion(logits, target)
loss.backward()
reference = torch.autograd.grad(F.cross_entropy(logits, target), logits)[0]
grad_ratio = logits.grad.norm().item() / reference.norm().item()
""",
        bad_line=9,
        probe="value_compare",
        # the gradient w.r.t. the logits against the one of the loss on the logits
        expect={"left": "grad_ratio", "op": "<", "right": "0.5", "show": ["loss.item()"]},
    ),
]
