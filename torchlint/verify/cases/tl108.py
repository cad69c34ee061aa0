"""TL108: softmax output fed to CrossEntropyLoss."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL108",
        title="CrossEntropyLoss on softmax probabilities shrinks the gradient",
        bad="""\
import torch
import torch.nn as nn
import torch.nn.functional as F

criterion = nn.CrossEntropyLoss()
logits = torch.randn(16, 10, device=DEVICE, requires_grad=True)
target = torch.randint(0, 10, (16,), device=DEVICE)
loss = criterion(F.softmax(logits, dim=1), target)
loss.backward()
grad_norm = logits.grad.norm().item()
reference = torch.autograd.grad(F.cross_entropy(logits, target), logits)[0]
grad_ratio = grad_norm / reference.norm().item()
""",
        good="""\
import torch
import torch.nn as nn
import torch.nn.functional as F

criterion = nn.CrossEntropyLoss()
logits = torch.randn(16, 10, device=DEVICE, requires_grad=True)
target = torch.randint(0, 10, (16,), device=DEVICE)
loss = criterion(logits, target)
loss.backward()
grad_norm = logits.grad.norm().item()
reference = torch.autograd.grad(F.cross_entropy(logits, target), logits)[0]
grad_ratio = grad_norm / reference.norm().item()
""",
        bad_line=8,
        probe="value_compare",
        # gradient w.r.t. the logits against the one of the loss on the logits
        expect={"left": "grad_ratio", "op": "<", "right": "0.5", "show": ["loss.item()"]},
    ),
    Case(
        rule="TL108",
        title="nll_loss on softmax probabilities instead of log-probabilities shrinks the gradient",
        bad="""\
import torch
import torch.nn.functional as F

logits = torch.randn(16, 10, device=DEVICE, requires_grad=True)
target = torch.randint(0, 10, (16,), device=DEVICE)
loss = F.nll_loss(F.softmax(logits, dim=1), target)
loss.backward()
reference = torch.autograd.grad(F.cross_entropy(logits, target), logits)[0]
grad_ratio = logits.grad.norm().item() / reference.norm().item()
""",
        good="""\
import torch
import torch.nn.functional as F

logits = torch.randn(16, 10, device=DEVICE, requires_grad=True)
target = torch.randint(0, 10, (16,), device=DEVICE)
loss = F.nll_loss(F.log_softmax(logits, dim=1), target)
loss.backward()
reference = torch.autograd.grad(F.cross_entropy(logits, target), logits)[0]
grad_ratio = logits.grad.norm().item() / reference.norm().item()
""",
        bad_line=6,
        probe="value_compare",
        # the gradient w.r.t. the logits against the one of the correct loss (cross-entropy)
        expect={"left": "grad_ratio", "op": "<", "right": "0.5", "show": ["loss.item()"]},
    ),
]
