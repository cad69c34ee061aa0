"""TL126: a 0-dim tensor as a dict key raises KeyError."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL126",
        title="idx2word[logits.argmax()] raises KeyError: tensors hash by identity",
        bad="""\
import torch

idx2word = {i: w for i, w in enumerate(["<pad>", "cat", "dog"])}
logits = torch.tensor([0.1, 2.0, 0.3], device=DEVICE)
word = idx2word[logits.argmax()]
""",
        good="""\
import torch

idx2word = {i: w for i, w in enumerate(["<pad>", "cat", "dog"])}
logits = torch.tensor([0.1, 2.0, 0.3], device=DEVICE)
word = idx2word[logits.argmax().item()]
""",
        bad_line=5,
        probe="raises",
        expect={"exc": "KeyError", "match": "tensor(1"},
    ),
]
