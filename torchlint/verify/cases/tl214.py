"""TL214: default_collate through torch.utils.data's private _utils package."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL214",
        title="the private collate module exports nothing in __all__; torch.utils.data exports the same function",
        bad="""\
import torch
import torch.utils.data._utils.collate as source
from torch.utils.data._utils.collate import default_collate

unexported = "default_collate" not in getattr(source, "__all__", ())
same = default_collate is torch.utils.data.default_collate
""",
        good="""\
import torch
import torch.utils.data as source
from torch.utils.data import default_collate

unexported = "default_collate" not in getattr(source, "__all__", ())
same = default_collate is torch.utils.data.default_collate
""",
        bad_line=3,
        probe="value_compare",
        expect={"left": "unexported", "op": "==", "right": "True", "show": ["same", "source.__name__"]},
    ),
]
