"""TL132: random augmentation in an evaluation set's transforms. torchvision cannot be installed
beside the pinned CPU torch: where it is missing the case is SOURCE-CHECKED (the static part
runs; `RandomResizedCrop.forward` draws new crop parameters with `torch.randint`/`torch.empty().
uniform_` on every call, read in torchvision 0.29.1's transforms.py); where it is installed the
snippets run."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL132",
        title="RandomResizedCrop in the test transform: two evaluations of one image differ",
        bad="""\
import torch
from torchvision import transforms

test_transform = transforms.Compose([
    transforms.RandomResizedCrop(4),
])
image = torch.arange(3 * 8 * 8, dtype=torch.float32).reshape(3, 8, 8)
torch.manual_seed(0)
first = test_transform(image)
second = test_transform(image)
differs = (first - second).abs().max().item()
""",
        good="""\
import torch
from torchvision import transforms

test_transform = transforms.Compose([
    transforms.Resize(6),
    transforms.CenterCrop(4),
])
image = torch.arange(3 * 8 * 8, dtype=torch.float32).reshape(3, 8, 8)
torch.manual_seed(0)
first = test_transform(image)
second = test_transform(image)
differs = (first - second).abs().max().item()
""",
        bad_line=5,
        probe="value_compare",
        expect={"left": "differs", "op": ">", "right": "0"},
        requires=("torchvision",),
        source="torchvision 0.29.1 torchvision/transforms/transforms.py: RandomResizedCrop.get_params "
               "samples the area and aspect ratio with torch.empty(1).uniform_ and the offset with "
               "torch.randint at every forward",
    ),
]
