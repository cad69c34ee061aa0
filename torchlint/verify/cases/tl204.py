"""TL204: `.cuda(async=True)` / `.to(..., async=True)`: not Python since 3.7."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL204",
        title="target.to(DEVICE, async=True) in a PyTorch 0.3 data loop",
        bad="""\
import torch

batches = [(torch.randn(4, 3), torch.randint(0, 2, (4,))) for _ in range(2)]
for images, target in batches:
    target = target.to(DEVICE, async=True)
    images = images.to(DEVICE)
""",
        good="""\
import torch

batches = [(torch.randn(4, 3), torch.randint(0, 2, (4,))) for _ in range(2)]
for images, target in batches:
    target = target.to(DEVICE, non_blocking=True)
    images = images.to(DEVICE)
""",
        bad_line=5,
        probe="syntax_error",
        expect={"match": "invalid syntax", "show": ["target.device"]},
    ),
]
