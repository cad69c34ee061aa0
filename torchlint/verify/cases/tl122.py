"""TL122: log(softmax(x)) and log(sum(exp(x))) leave float range."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL122",
        title="torch.log(torch.softmax(x, 0)) of logits [1e4, 0, -1e4] is [0, -inf, -inf]; log_softmax is finite",
        bad="""\
import torch

logits = torch.tensor([1e4, 0.0, -1e4], device=DEVICE)
y = torch.log(torch.softmax(logits, 0))
infinite = torch.isinf(y).any().item()
""",
        good="""\
import torch

logits = torch.tensor([1e4, 0.0, -1e4], device=DEVICE)
y = torch.log_softmax(logits, 0)
infinite = torch.isinf(y).any().item()
""",
        bad_line=4,
        probe="value_compare",
        expect={"left": "infinite", "op": "==", "right": "True", "show": ["y.tolist()"]},
    ),
    Case(
        rule="TL122",
        title="torch.log(torch.sum(torch.exp(x), 1)) of [[1000, 1000]] is inf; logsumexp is 1000.69",
        bad="""\
import torch

scores = torch.tensor([[1000.0, 1000.0]], device=DEVICE)
y = torch.log(torch.sum(torch.exp(scores), 1))
infinite = torch.isinf(y).any().item()
""",
        good="""\
import torch

scores = torch.tensor([[1000.0, 1000.0]], device=DEVICE)
y = torch.logsumexp(scores, 1)
infinite = torch.isinf(y).any().item()
""",
        bad_line=4,
        probe="value_compare",
        expect={"left": "infinite", "op": "==", "right": "True", "show": ["y.tolist()"]},
    ),
]
