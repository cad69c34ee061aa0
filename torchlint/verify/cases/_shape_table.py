"""Confirmation cases built from the layer shape table (`torchlint.analysis.tensor_shape.contracts`):
every entry is run over a grid of constructor arguments and inputs.

Each grid row becomes one TL301 case. The snippet feeds the layer a random input and flattens its
output into `nn.Linear(F, 2)`, where F is what the static formula says each sample has (`good`)
or F + 1 (`bad`). The static half of `--verify` checks that the analyzer flags the bad `Linear`
and not the good one (so the analyzer computed F from the entry); the runtime half runs both on
the installed torch, so the good one runs and the bad one raises only if the real layer's output
has exactly F values per sample. A formula that disagrees with torch therefore fails its case.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from torchlint.analysis.tensor_shape import contracts as C
from torchlint.analysis.tensor_shape import dims as D
from torchlint.verify.case import Case

# (layer, constructor arguments as written, input shape, input is integer indices)
GRID: List[Tuple[str, str, Tuple[int, ...]]] = [
    ("Conv1d", "4, 6, 3", (2, 4, 20)),
    ("Conv1d", "4, 6, 5, stride=2, padding=1, dilation=2", (2, 4, 31)),
    ("Conv2d", "3, 6, 5", (2, 3, 32, 32)),
    ("Conv2d", "3, 8, 3, stride=2, padding=1", (2, 3, 28, 28)),
    ("Conv2d", "3, 8, (3, 5), stride=(1, 2), padding=(1, 0)", (2, 3, 17, 23)),
    ("Conv2d", "3, 8, 3, padding='same'", (2, 3, 15, 15)),
    ("Conv2d", "3, 8, 3, padding='valid', dilation=2", (2, 3, 15, 15)),
    ("Conv3d", "2, 4, 3, padding=1, stride=2", (2, 2, 9, 10, 11)),
    ("ConvTranspose1d", "4, 2, 4, stride=2, padding=1", (2, 4, 9)),
    ("ConvTranspose2d", "8, 4, 2, stride=2", (2, 8, 7, 7)),
    ("ConvTranspose2d", "8, 4, 3, stride=2, padding=1, output_padding=1", (2, 8, 7, 9)),
    ("ConvTranspose3d", "2, 2, 3, stride=2", (1, 2, 3, 4, 5)),
    ("MaxPool1d", "3", (2, 4, 20)),
    ("MaxPool2d", "2, 2", (2, 3, 28, 28)),
    ("MaxPool2d", "3, stride=2, padding=1", (2, 3, 15, 15)),
    ("MaxPool2d", "3, stride=2, ceil_mode=True", (2, 3, 14, 14)),
    ("MaxPool2d", "2, dilation=2", (2, 3, 11, 11)),
    ("MaxPool3d", "2", (1, 2, 6, 7, 8)),
    ("AvgPool1d", "4, stride=2", (2, 3, 21)),
    ("AvgPool2d", "2", (2, 3, 13, 13)),
    ("AvgPool2d", "3, stride=2, padding=1, ceil_mode=True", (2, 3, 10, 10)),
    ("AvgPool3d", "2", (1, 2, 6, 6, 6)),
    ("AdaptiveAvgPool1d", "5", (2, 3, 17)),
    ("AdaptiveAvgPool2d", "(1, 1)", (2, 8, 13, 13)),
    ("AdaptiveAvgPool2d", "(4, None)", (2, 8, 13, 9)),
    ("AdaptiveAvgPool3d", "2", (1, 2, 5, 5, 5)),
    ("AdaptiveMaxPool1d", "3", (2, 3, 17)),
    ("AdaptiveMaxPool2d", "(3, 2)", (2, 3, 11, 11)),
    ("AdaptiveMaxPool3d", "2", (1, 2, 5, 5, 5)),
    ("Linear", "20, 7", (2, 20)),
    ("Linear", "6, 3", (2, 5, 6)),
    ("BatchNorm1d", "6", (4, 6)),
    ("BatchNorm1d", "6", (4, 6, 5)),
    ("BatchNorm2d", "3", (2, 3, 5, 5)),
    ("BatchNorm3d", "2", (2, 2, 3, 3, 3)),
    ("InstanceNorm1d", "4", (2, 4, 7)),
    ("InstanceNorm2d", "3, affine=True", (2, 3, 5, 5)),
    ("InstanceNorm3d", "2", (2, 2, 3, 3, 3)),
    ("LayerNorm", "8", (2, 5, 8)),
    ("LayerNorm", "(5, 8)", (2, 5, 8)),
    ("GroupNorm", "2, 6", (2, 6, 4, 4)),
    ("Embedding", "50, 8", (2, 7)),
    ("RNN", "10, 12", (5, 3, 10)),
    ("GRU", "10, 12, num_layers=2, bidirectional=True", (5, 3, 10)),
    ("LSTM", "10, 12, batch_first=True", (3, 5, 10)),
    ("LSTM", "10, 12, bidirectional=True, proj_size=4", (5, 3, 10)),
    ("LSTMCell", "10, 12", (3, 10)),
    ("GRUCell", "10, 7", (3, 10)),
    ("RNNCell", "10, 5, nonlinearity='relu'", (3, 10)),
    ("MultiheadAttention", "16, 4", (5, 3, 16)),
    ("MultiheadAttention", "16, 2, batch_first=True", (3, 5, 16)),
    ("TransformerEncoderLayer", "16, 4, dim_feedforward=32", (5, 3, 16)),
    ("TransformerDecoderLayer", "16, 4, dim_feedforward=32", (5, 3, 16)),
    ("Flatten", "", (2, 3, 4, 5)),
    ("Flatten", "2", (2, 3, 4, 5)),
    ("Flatten", "0, 2", (2, 3, 4, 5)),
    ("Unflatten", "1, (4, 5)", (2, 20)),
    ("Upsample", "scale_factor=2", (2, 3, 5, 6)),
    ("Upsample", "size=(7, 9)", (2, 3, 5, 6)),
    ("PixelShuffle", "2", (2, 8, 3, 4)),
    ("ZeroPad2d", "(1, 2, 3, 4)", (2, 3, 5, 5)),
    ("ZeroPad1d", "2", (2, 3, 5)),
    ("ReflectionPad2d", "1", (2, 3, 5, 5)),
    ("ReflectionPad1d", "(1, 2)", (2, 3, 5)),
    ("ReplicationPad2d", "2", (2, 3, 5, 5)),
    ("ReplicationPad1d", "1", (2, 3, 5)),
] + [(name, "0.5" if "Dropout" in name else ("1" if name in ("Softmax", "LogSoftmax", "Softmin") else ""), (2, 3, 4))
     for name in C.IDENTITY_LAYERS if name not in ("Threshold",)] + [("Threshold", "0.1, 0.0", (2, 3, 4))]

_PAIRS = {name for name, contract in C.LAYERS.items() if contract.returns_pair}


def _static_features(layer: str, arguments: str, shape: Tuple[int, ...]) -> Optional[int]:
    """What the analyzer's formula says each sample of the layer's output holds (flattened from
    dim 1), read through the analyzer itself on the good snippet's text."""
    import libcst as cst

    from torchlint.analysis.tensor_shape.modules import NoNames, evaluate

    contract = C.LAYERS[layer]
    call = cst.parse_expression(f"f({arguments})")
    positional, keywords = [], {}
    for argument in call.args:
        value = evaluate(NoNames(), argument.value, {}, 0)
        if argument.keyword is not None:
            keywords[argument.keyword.value] = value
        else:
            positional.append(value)
    bound = {} if contract.parameters and contract.parameters[0][0] == "*" else contract.bind(positional, keywords)
    if bound is None:
        return None
    out = contract.apply(bound, shape)
    if out is None or isinstance(out, C.Misfit) or len(out) < 2 or not all(D.is_known(d) for d in out):
        return None
    return D.product(out[1:])


def _snippet(layer: str, arguments: str, shape: Tuple[int, ...], features: int) -> str:
    indices = layer == "Embedding"
    if indices:
        make = f"torch.randint(0, 50, {shape}, device=DEVICE)"
    else:
        make = f"torch.randn({', '.join(str(d) for d in shape)}, device=DEVICE)"
    first = "        y = self.layer(x, x, x)\n" if layer == "MultiheadAttention" else (
        "        y = self.layer(x, x)\n" if layer == "TransformerDecoderLayer" else "        y = self.layer(x)\n")
    pick = "        y = y[0]\n" if layer in _PAIRS else ""
    return f"""\
import torch
import torch.nn as nn


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear({features}, 2)
        self.layer = nn.{layer}({arguments})

    def forward(self, x):
{first}{pick}        return self.fc(torch.flatten(y, 1))


model = Probe().to(DEVICE)
out = model({make})
"""


def cases() -> List[Case]:
    found = []
    for layer, arguments, shape in GRID:
        features = _static_features(layer, arguments, shape)
        if features is None:
            continue
        title = f"shape table: nn.{layer}({arguments}) on {'×'.join(map(str, shape))} gives {features} values per sample"
        found.append(Case(
            rule="TL301",
            title=title,
            bad=_snippet(layer, arguments, shape, features + 1),
            good=_snippet(layer, arguments, shape, features),
            bad_line=8,
            probe="raises",
            expect={"exc": "RuntimeError", "match": "mat1 and mat2 shapes cannot be multiplied"},
        ))
    return found


def missing_rows() -> List[str]:
    """Grid rows the static formula cannot size (a table entry that lost its formula)."""
    return [f"{layer}({arguments})" for layer, arguments, shape in GRID
            if _static_features(layer, arguments, shape) is None]
