"""TL132: random data augmentation applied while the script evaluates: each evaluation sees a
random variant of every image, so the metric is noisy and biased.

torchvision's transforms are modules (since 0.8): the global forward hooks see a random one
(`Random*`, `ColorJitter`, `RandAugment`, `AutoAugment`, `TrivialAugmentWide`, `AugMix`,
`ElasticTransform` of `torchvision.transforms`) run whenever the main thread loads a sample (a
DataLoader without workers; torchvision 0.2-0.7 wrote them as plain objects, which no hook sees).
A call counts as part of an evaluation when autograd is off (the loop runs under
`no_grad`/`inference_mode`) or when the model the script called last is in eval(). Each such call
is checked, up to `CHECKS` times per transform, by applying the transform a second time to the
same input with the random state saved and restored (torch's, Python's and NumPy's, so the
script's own sequence of random numbers is unchanged): a different result is the harm.

The transform's construction line is not observable (a transform has no parameters to register):
the related lines are the lines of the user's files that construct its class (`RandomCrop(`), so
the static finding on one of them is the one confirmed. Evidence for a static finding only
(`confirms_only`): test-time augmentation and pseudo-labelling under `no_grad` are deliberate, and
only the static rule knows which dataset is for evaluation. Those lines are the ones the run watched.
"""

from __future__ import annotations

import random
import re
import sys
import weakref
from typing import Any, Dict, List, Optional, Tuple

RANDOM_EXTRA = frozenset({"ColorJitter", "RandAugment", "AutoAugment", "TrivialAugmentWide", "AugMix",
                          "ElasticTransform"})
CHECKS = 8


def is_random_transform(cls: type) -> bool:
    module = getattr(cls, "__module__", "") or ""
    return module.startswith("torchvision.transforms") and (cls.__name__.startswith("Random")
                                                           or cls.__name__ in RANDOM_EXTRA)


class Augmentation:
    def __init__(self, session) -> None:
        self.session = session
        # transform -> [checks, differing]
        self._checked: "weakref.WeakKeyDictionary[Any, List[int]]" = weakref.WeakKeyDictionary()
        self._lines: Dict[str, Tuple[Tuple[str, int], ...]] = {}

    def transform_ran(self, module: Any, args: tuple, output: Any) -> None:
        import torch

        context = self._evaluation(torch)
        if context is None or not args:
            return
        try:
            counts = self._checked.setdefault(module, [0, 0])
        except TypeError:
            return
        if counts[0] >= CHECKS or counts[1]:
            return
        name = type(module).__name__
        lines = self._construction_lines(name)
        self.session.watch("TL132", lines)
        counts[0] += 1
        again = _second_draw(torch, module, args)
        if again is None or _same(torch, again, output):
            return
        counts[1] += 1
        site = self.session.frames.site(sys._getframe(1))
        observation = self.session.observe(
            "TL132", site,
            f"`{name}` runs on the data of an evaluation: each evaluation sees a random variant of every image, so "
            "the metric is noisy and biased; use deterministic transforms (`Resize`, `CenterCrop`) for test and "
            "validation data",
            f"`{name}` ran while loading data {context}; applied a second time to the same input (the random "
            f"state saved and restored) it gave a different result (call {counts[0]} of those checked)",
            related=lines)
        if observation is not None:
            observation.confirms_only = True

    def _evaluation(self, torch: Any) -> Optional[str]:
        if not torch.is_grad_enabled():
            return "with autograd off (an evaluation under no_grad)"
        model = self.session.main_model()
        if model is not None and not model.training:
            return f"while `{type(model).__name__}`, the model called last, is in eval()"
        return None

    def _construction_lines(self, name: str) -> Tuple[Tuple[str, int], ...]:
        found = self._lines.get(name)
        if found is None:
            found = self._lines[name] = self.session.lines_matching(re.compile(rf"\b{re.escape(name)}\s*\("))
        return found


def _second_draw(torch: Any, module: Any, args: tuple) -> Any:
    """The transform applied once more to the same input, every random state as it was after."""
    cpu = torch.get_rng_state()
    python = random.getstate()
    numpy = sys.modules.get("numpy")
    numpy_state = numpy.random.get_state() if numpy is not None else None
    try:
        return type(module).forward(module, *args)
    except Exception:  # noqa: BLE001 - the second draw is ours: no result, no evidence
        return None
    finally:
        torch.set_rng_state(cpu)
        random.setstate(python)
        if numpy_state is not None:
            numpy.random.set_state(numpy_state)


def _same(torch: Any, a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.equal(a, b))
    if hasattr(a, "tobytes") and hasattr(b, "tobytes"):  # PIL images, NumPy arrays
        return getattr(a, "size", None) == getattr(b, "size", None) and a.tobytes() == b.tobytes()
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b):
        return all(_same(torch, x, y) for x, y in zip(a, b))
    return True  # nothing to compare: no evidence of randomness
