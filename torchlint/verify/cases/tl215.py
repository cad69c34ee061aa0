"""TL215: torchvision's pretrained= keyword. torchvision cannot be installed beside the pinned CPU
torch: where it is missing the case is SOURCE-CHECKED (the static part runs, the warning was read
in torchvision 0.29.1's sources); where it is installed the snippets run."""

from torchlint.analysis.api_changes import BY_API
from torchlint.verify.case import Case

_CHECK = BY_API["torchvision.models.*(pretrained=)"].check

CASES = [
    Case(
        rule="TL215",
        title="resnet18(pretrained=False) warns that pretrained is deprecated; weights=None does not",
        bad="""\
import torch
import torchvision

model = torchvision.models.resnet18(pretrained=False)
""",
        good="""\
import torch
import torchvision

model = torchvision.models.resnet18(weights=None)
""",
        bad_line=4,
        probe="warns",
        expect={"category": "UserWarning", "match": _CHECK.match},
        requires=("torchvision",),
        source=_CHECK.source,
    ),
]
