"""What a criterion is given (TL108 softmax into CrossEntropyLoss/NLLLoss, TL109 sigmoid into
BCELoss, TL114 sigmoid into CrossEntropyLoss/NLLLoss, from the input's grad_fn) and what it
returns (tracked for TL003), for loss modules and the torch.nn.functional losses. Also
remembers which tensors were computed under no_grad, for TL104."""

from __future__ import annotations

import weakref
from typing import Any, Dict, Optional

from torchlint.runtime.frames import Site
from torchlint.runtime.graph import producer

SOFTMAX_LOSSES = {"CrossEntropyLoss": "CrossEntropyLoss", "NLLLoss": "NLLLoss",
                  "cross_entropy": "F.cross_entropy", "nll_loss": "F.nll_loss"}
SIGMOID_LOSSES = {"BCELoss": "BCELoss", "binary_cross_entropy": "F.binary_cross_entropy"}
FUNCTIONAL_LOSSES = (
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss", "gaussian_nll_loss", "ctc_loss",
    "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss", "multi_margin_loss",
    "multilabel_margin_loss", "multilabel_soft_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
)


class Losses:
    def __init__(self, session) -> None:
        self.session = session
        self._no_grad: Dict[int, Any] = {}  # id -> (weakref, site) of tensors computed under no_grad
        self._sigmoid: Dict[Any, Any] = {}  # (path, line) -> (calls, predictions, saturated, first call)

    def before_loss(self, name: str, args: tuple, kwargs: dict, site: Optional[Site]) -> None:
        prediction = args[0] if args else kwargs.get("input")
        if prediction is None or site is None:
            return
        made_by = producer(prediction)
        if made_by is None:
            return
        if name in SOFTMAX_LOSSES and made_by.startswith("SoftmaxBackward"):
            self._report_softmax(SOFTMAX_LOSSES[name], prediction, site)
        elif name in SIGMOID_LOSSES and made_by.startswith("SigmoidBackward"):
            self._report_sigmoid(SIGMOID_LOSSES[name], prediction, site)
        elif name in SOFTMAX_LOSSES and made_by.startswith("SigmoidBackward"):
            self._report_sigmoid_into_softmax_loss(SOFTMAX_LOSSES[name], prediction, site)

    def _report_softmax(self, loss: str, prediction: Any, site: Site) -> None:
        import torch

        with torch.no_grad():
            values = prediction.detach().float()
            low, high = float(values.min()), float(values.max())
            rows = float(values.sum(dim=-1 if values.dim() < 2 else 1).mean()) if values.dim() else float(values)
        expects = "log-probabilities" if "NLL" in loss.upper() else "logits"
        fix = "pass `log_softmax`'s output" if expects != "logits" else "drop the softmax and pass the logits"
        self.session.observe(
            "TL108", site,
            f"{loss} is given softmax probabilities but expects {expects}: the loss cannot approach 0 and its "
            f"gradient is squashed; {fix}",
            f"the input's grad_fn is SoftmaxBackward0; its values lie in [{low:.3g}, {high:.3g}] and sum to "
            f"{rows:.3g} along the class dimension")

    def _report_sigmoid_into_softmax_loss(self, loss: str, prediction: Any, site: Site) -> None:
        import torch

        with torch.no_grad():
            values = prediction.detach().float()
            low, high = float(values.min()), float(values.max())
        expects = "log-probabilities" if "NLL" in loss.upper() else "logits"
        self.session.observe(
            "TL114", site,
            f"{loss} is given sigmoid outputs but expects {expects}: the loss cannot approach 0 and its gradient "
            "is squashed; pass the logits",
            f"the input's grad_fn is SigmoidBackward0; its values lie in [{low:.3g}, {high:.3g}]")

    def _report_sigmoid(self, loss: str, prediction: Any, site: Site) -> None:
        """Reported once a batch really saturates: a sigmoid into BCELoss whose outputs never reach
        exactly 0 or 1 computes the same loss and gradient as BCEWithLogitsLoss (it ran without harm)."""
        import torch

        with torch.no_grad():
            values = prediction.detach()
            saturated = int(((values == 0) | (values == 1)).sum())
        key = (site.path, site.line)
        calls, seen, hits, first = self._sigmoid.get(key, (0, 0, 0, 0))
        calls, seen, hits = calls + 1, seen + values.numel(), hits + saturated
        first = first or (calls if saturated else 0)
        self._sigmoid[key] = (calls, seen, hits, first)
        if not hits:
            return
        observation = self.session.observe(
            "TL109", site,
            f"{loss} is given sigmoid outputs: at |logit| above ~17 the sigmoid rounds to 0 or 1 and the "
            "gradient vanishes; use `BCEWithLogitsLoss` on the logits", "")
        if observation is not None:
            observation.evidence = (f"the input's grad_fn is SigmoidBackward0; {hits} of {seen} predictions over "
                                    f"{calls} calls were exactly 0 or 1 (first in call {first}): their gradient "
                                    "through the sigmoid is 0")

    def after_loss(self, output: Any, site: Optional[Site], args: tuple = ()) -> None:
        import torch

        if not isinstance(output, torch.Tensor):
            return
        if output.grad_fn is not None:
            self.session.retention.track_loss(output, site)
            return
        if not torch.is_grad_enabled():
            self.mark_no_grad(output, site)
            return
        for value in args:  # a loss on an output computed under no_grad has no graph either
            origin = self.no_grad_origin(value) if isinstance(value, torch.Tensor) else None
            if origin is not None:
                self.mark_no_grad(output, origin)
                return

    # -- TL104 ------------------------------------------------------------------------------------------
    def mark_no_grad(self, tensor: Any, site: Optional[Site]) -> None:
        if len(self._no_grad) > 10_000:
            self._no_grad = {k: v for k, v in self._no_grad.items() if v[0]() is not None}
        try:
            self._no_grad[id(tensor)] = (weakref.ref(tensor), site)
        except TypeError:
            pass

    def no_grad_origin(self, tensor: Any) -> Optional[Site]:
        entry = self._no_grad.get(id(tensor))
        if entry is not None and entry[0]() is tensor:
            return entry[1]
        return None
