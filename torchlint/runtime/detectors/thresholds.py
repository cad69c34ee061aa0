"""TL129: logits thresholded at 0.5 (`logits > 0.5`, `torch.round(logits)`) where 0 was meant: a
model trained with BCEWithLogitsLoss outputs logits, whose decision boundary is 0 (sigmoid(0) =
0.5), so every logit between 0 and 0.5 is called negative.

The TorchFunctionMode hands each comparison with the float 0.5 (`gt`, `ge`, `lt`, `le`, as `>`,
`>=`, `<`, `<=` reach it) and each `round` to `check`. Values all inside [0, 1] are probabilities
(a sigmoid was applied): no harm. Otherwise the decisions are compared with those at 0 (for
`round`, with `logits > 0`): the elements that differ are the harm, measured on the batch. Every
such line is one the run watched. Evidence for a static finding only (`confirms_only`): `x > 0.5`
on other values (a mask, a score) is no bug, and only the static rule knows the values are the
logits of a BCEWithLogitsLoss model.
"""

from __future__ import annotations

from typing import Any

import torch

COMPARISONS = frozenset({"gt", "ge", "lt", "le"})
_SYMBOL = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


class Thresholds:
    def __init__(self, session) -> None:
        self.session = session

    def check(self, name: str, values: Any, output: Any) -> None:
        if not isinstance(values, torch.Tensor) or not values.is_floating_point() or values.is_meta \
                or not values.numel() or not isinstance(output, torch.Tensor) or output.shape != values.shape:
            return
        site = self.session.site()
        if site is None:
            return
        self.session.watch("TL129", ((site.path, site.line),))
        with torch.no_grad():
            data = values.detach()
            low, high = float(data.min()), float(data.max())
            if low >= 0.0 and high <= 1.0:
                return  # probabilities: 0.5 is their boundary
            if name == "round":
                meant = (data > 0).to(output.dtype)
                wrong = int((output != meant).sum())
                how = "`round()`"
                result = f" gives the classes {_classes(output)}:"
            else:
                meant = getattr(torch, name)(data, 0.0)
                wrong = int((output != meant).sum())
                how = f"`{_SYMBOL[name]} 0.5`"
                result = ":"
        if not wrong:
            return
        observation = self.session.observe(
            "TL129", site,
            f"logits thresholded with {how}: a logit's decision boundary is 0 (sigmoid(0) = 0.5), so logits between "
            "0 and 0.5 are called negative; compare with 0 (or threshold `torch.sigmoid(logits)` at 0.5)",
            f"{how} of {values.numel()} values in [{low:.3g}, {high:.3g}] (outside [0, 1]: logits, not "
            f"probabilities){result} {wrong} decision{'s' if wrong != 1 else ''} differ from those at 0")
        if observation is not None:
            observation.confirms_only = True


def _classes(output: Any) -> str:
    values = sorted({int(v) for v in output.detach().reshape(-1)[:4096].unique().tolist()})
    shown = ", ".join(str(v) for v in values[:8]) + (", ..." if len(values) > 8 else "")
    return "{" + shown + "}"
