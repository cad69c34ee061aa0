"""TL216: calls of torch callables that the installed torch rejects with TypeError.

The first case is the signature table's check: its bad snippet must raise TypeError at a keyword
the table says `nn.Conv2d` does not take, and the table made from the installed torch must equal
the stored `signatures.json` (else REFUTED, with the entries that differ). The next is the
API-change table's `verbose=` entry (REFUTED if this torch accepts `verbose=` again); the others
are the misspellings and sibling keywords of the issue, each raising TypeError on this torch."""

from torchlint.analysis.api_changes import BY_API
from torchlint.verify.case import Case

_VERBOSE = BY_API["torch.optim.lr_scheduler.*(verbose=)"]
_TENSOR_DATASET = BY_API["torch.utils.data.TensorDataset(data_tensor=)"]

_MODEL = """\
import torch
import torch.nn as nn

model = nn.Linear(4, 2)
"""


def _typeerror(title: str, bad: str, good: str, line: int, match: str) -> Case:
    return Case(rule="TL216", title=title, bad=_MODEL + bad, good=_MODEL + good,
                bad_line=_MODEL.count("\n") + line, probe="raises",
                expect={"exc": "TypeError", "match": match}, devices=("cpu",))


CASES = [
    Case(
        rule="TL216",
        title="the signature table matches the installed torch; nn.Conv2d(3, 16, kernel=3) raises TypeError",
        bad="import torch.nn as nn\n\nconv = nn.Conv2d(3, 16, kernel=3)\n",
        good="import torch.nn as nn\n\nconv = nn.Conv2d(3, 16, kernel_size=3)\n",
        bad_line=3,
        probe="signature_table",
        expect={"match": "unexpected keyword argument 'kernel'"},
        devices=("cpu",),
    ),
    Case(
        rule="TL216",
        title=f"{_VERBOSE.api}: removed in {_VERBOSE.changed_in} (deprecated in {_VERBOSE.deprecated_in}); "
              f"{_VERBOSE.replacement}",
        bad=_VERBOSE.check.snippet,
        good=_VERBOSE.check.replacement_snippet,
        bad_line=_VERBOSE.check.line,
        probe="api_change",
        expect={"api": _VERBOSE.api, "outcome": _VERBOSE.outcome, "error": _VERBOSE.error_type,
                "match": _VERBOSE.check.match},
        devices=("cpu",),
    ),
    Case(
        rule="TL216",
        title=f"{_TENSOR_DATASET.api}: changed in {_TENSOR_DATASET.changed_in}; {_TENSOR_DATASET.replacement}",
        bad=_TENSOR_DATASET.check.snippet,
        good=_TENSOR_DATASET.check.replacement_snippet,
        bad_line=_TENSOR_DATASET.check.snippet.count("\n"),
        probe="api_change",
        expect={"api": _TENSOR_DATASET.api, "outcome": _TENSOR_DATASET.outcome,
                "error": _TENSOR_DATASET.error_type, "match": _TENSOR_DATASET.check.match},
        devices=("cpu",),
    ),
    _typeerror("AdamW(..., momentum=0.9): SGD's keyword",
               "opt = torch.optim.AdamW(model.parameters(), lr=1e-3, momentum=0.9)\n",
               "opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999))\n",
               1, "unexpected keyword argument 'momentum'"),
    _typeerror("DataLoader(..., num_worker=2)",
               "from torch.utils.data import DataLoader, TensorDataset\n"
               "loader = DataLoader(TensorDataset(torch.randn(4, 4)), batch_size=2, num_worker=0)\n",
               "from torch.utils.data import DataLoader, TensorDataset\n"
               "loader = DataLoader(TensorDataset(torch.randn(4, 4)), batch_size=2, num_workers=0)\n",
               2, "unexpected keyword argument 'num_worker'"),
    _typeerror("nn.LSTM(..., num_layer=2): checked against the overload RNNBase enforces",
               "lstm = nn.LSTM(4, 8, num_layer=2)\n", "lstm = nn.LSTM(4, 8, num_layers=2)\n",
               1, "unexpected keyword argument 'num_layer'"),
    _typeerror("torch.jit.trace() without its arguments",
               "traced = torch.jit.trace()\n", "traced = torch.jit.trace(model, torch.randn(1, 4))\n",
               1, "missing 1 required positional argument: 'func'"),
    _typeerror("clip_grad_norm_(..., norm=2)",
               "model(torch.randn(3, 4)).sum().backward()\n"
               "total = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm=2)\n",
               "model(torch.randn(3, 4)).sum().backward()\n"
               "total = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type=2)\n",
               2, "unexpected keyword argument 'norm'"),
]
