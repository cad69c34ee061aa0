"""Memory per step: bytes of saved tensors held by live autograd graphs (CPU and CUDA), and
`torch.cuda.memory_allocated()` when the script uses CUDA; a steady growth with its slope.

Saved tensors are seen through `torch.autograd.graph.saved_tensors_hooks`. With hooks
installed, autograd no longer checks whether a saved tensor was modified in place before
backward uses it (measured on torch 2.13: `b = a.sigmoid(); b.add_(1); b.sum().backward()`
raises without hooks and silently computes a wrong gradient with them). So the unpack hook
restores that check itself — same condition, same message — or `torchlint run` would hide the
very error TL001 is about.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from torchlint.runtime.graph import mib

_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")


class _Packed:
    """What the graph holds instead of the saved tensor. It keeps `t.detach()` (same storage and
    version counter): keeping `t` itself would close a reference cycle through C++ that the
    garbage collector cannot see (graph -> _Packed -> t -> grad_fn -> graph)."""

    __slots__ = ("tensor", "version", "producer", "output_nr", "__weakref__")

    def __init__(self, tensor: Any, version: int, producer: Optional[type], output_nr: int) -> None:
        self.tensor = tensor
        self.version = version
        self.producer = producer
        self.output_nr = output_nr


def modified_message(packed: _Packed, current_version: int) -> str:
    """torch's own message for a saved tensor modified in place (torch 2.13 wording)."""
    tensor = packed.tensor
    try:
        kind = tensor.type()
    except Exception:  # noqa: BLE001
        kind = type(tensor).__name__
    shape = ", ".join(str(size) for size in tensor.shape)
    which = ""
    if packed.producer is not None:
        which = f", which is output {packed.output_nr} of {_BACKWARD_SUFFIX.sub('', packed.producer.__name__)}"
    import torch

    if torch.is_anomaly_enabled():
        hint = ("the backtrace further above shows the operation that failed to compute its gradient. The "
                "variable in question was changed in there or anywhere later. Good luck!")
    else:
        hint = ("enable anomaly detection to find the operation that failed to compute its gradient, with "
                "torch.autograd.set_detect_anomaly(True, check_nan=False).")
    return ("one of the variables needed for gradient computation has been modified by an inplace "
            f"operation: [{kind} [{shape}]]{which}, is at version {current_version}; expected version "
            f"{packed.version} instead. Hint: {hint}")


@dataclass
class Sample:
    step: int
    saved_bytes: int
    saved_tensors: int
    cuda_allocated: Optional[int] = None


@dataclass
class Growth:
    measure: str  # "saved tensors" or "CUDA allocated"
    slope: float  # bytes per step
    first: int
    last: int
    steps: Tuple[int, int]


class Memory:
    """The saved-tensor hooks and the per-step samples."""

    def __init__(self) -> None:
        self._live: "weakref.WeakSet[_Packed]" = weakref.WeakSet()
        self.samples: List[Sample] = []
        self.enabled = True
        # bytes packed while `measuring` (for "saved tensors per batch" of one forward)
        self.measuring = 0
        self.measured = 0
        self._hooks = None

    # -- hooks ------------------------------------------------------------------------------------
    def pack(self, tensor: Any) -> Any:
        if not self.enabled:
            return tensor
        grad_fn = tensor.grad_fn
        packed = _Packed(tensor.detach(), tensor._version, type(grad_fn) if grad_fn is not None else None,
                         tensor.output_nr if grad_fn is not None else 0)
        self._live.add(packed)
        if self.measuring:
            try:
                self.measured += tensor.numel() * tensor.element_size()
            except Exception:  # noqa: BLE001
                pass
        return packed

    @staticmethod
    def unpack(packed: Any) -> Any:
        if type(packed) is not _Packed:
            return packed
        tensor = packed.tensor
        version = tensor._version
        if version != packed.version:
            raise RuntimeError(modified_message(packed, version))
        return tensor

    def install(self) -> bool:
        import torch

        try:
            self._hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)
            self._hooks.__enter__()
        except Exception:  # noqa: BLE001 - hooks disabled in this process (e.g. by torch.compile)
            self._hooks = None
            return False
        return True

    def uninstall(self) -> None:
        if self._hooks is not None:
            try:
                self._hooks.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 - the stack was changed under us; nothing to restore
                pass
            self._hooks = None

    # -- samples ----------------------------------------------------------------------------------
    def live(self) -> Tuple[int, int]:
        """(bytes of distinct storages, number of saved tensors) still held by live graphs."""
        from torchlint.runtime.graph import storage_key_bytes

        storages: Dict[Tuple[str, int], int] = {}
        packed = list(self._live)
        for item in packed:
            found = storage_key_bytes(item.tensor)
            if found is not None:
                storages[found[0]] = found[1]
        return sum(storages.values()), len(packed)

    def sample(self, step: int) -> None:
        import torch

        saved_bytes, saved_count = self.live()
        allocated = None
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            allocated = int(torch.cuda.memory_allocated())
        self.samples.append(Sample(step, saved_bytes, saved_count, allocated))

    def growth(self, min_steps: int = 5, min_bytes: int = 1024 * 1024) -> Optional[Growth]:
        """A steady growth over the samples: a positive least-squares slope, at least 80 % of the
        step-to-step changes non-negative, and at least `min_bytes` gained."""
        if len(self.samples) < min_steps:
            return None
        use_cuda = all(s.cuda_allocated is not None for s in self.samples)
        values = [(s.step, s.cuda_allocated if use_cuda else s.saved_bytes) for s in self.samples]
        xs = [float(x) for x, _ in values]
        ys = [float(y) for _, y in values]  # type: ignore[arg-type]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        denominator = sum((x - mean_x) ** 2 for x in xs)
        if denominator == 0:
            return None
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / denominator
        rising = sum(1 for a, b in zip(ys, ys[1:]) if b >= a)
        if slope <= 0 or rising < 0.8 * (len(ys) - 1) or ys[-1] - ys[0] < min_bytes:
            return None
        return Growth("CUDA allocated" if use_cuda else "saved tensors", slope, int(ys[0]), int(ys[-1]),
                      (values[0][0], values[-1][0]))

    def describe_growth(self, growth: Growth) -> str:
        return (f"{growth.measure} grew from {mib(growth.first)} to {mib(growth.last)} over steps "
                f"{growth.steps[0]}–{growth.steps[1]} ({mib(growth.slope)} per step)")

