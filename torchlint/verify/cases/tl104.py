"""TL104: .backward() on a result computed under no_grad / inference_mode."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL104",
        title="loss computed under torch.no_grad() then backpropagated",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 1).to(DEVICE)
criterion = nn.MSELoss()
x = torch.randn(8, 4, device=DEVICE)
y = torch.randn(8, 1, device=DEVICE)
with torch.no_grad():
    loss = criterion(model(x), y)
loss.backward()
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 1).to(DEVICE)
criterion = nn.MSELoss()
x = torch.randn(8, 4, device=DEVICE)
y = torch.randn(8, 1, device=DEVICE)
loss = criterion(model(x), y)
loss.backward()
""",
        bad_line=10,
        probe="raises",
        expect={"exc": "RuntimeError",
                "match": "element 0 of tensors does not require grad and does not have a grad_fn",
                "show": ["loss.requires_grad", "loss.grad_fn"]},
    ),
    Case(
        rule="TL104",
        title="loss computed under torch.inference_mode() then backpropagated",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 1).to(DEVICE)
x = torch.randn(8, 4, device=DEVICE)
with torch.inference_mode():
    loss = model(x).pow(2).mean()
loss.backward()
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 1).to(DEVICE)
x = torch.randn(8, 4, device=DEVICE)
loss = model(x).pow(2).mean()
loss.backward()
""",
        bad_line=8,
        probe="raises",
        expect={"exc": "RuntimeError",
                "match": "element 0 of tensors does not require grad and does not have a grad_fn",
                "show": ["loss.requires_grad", "loss.is_inference()"]},
    ),
]
