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

import math
import re
import time
import weakref
from dataclasses import dataclass
from typing import AbstractSet, Any, Callable, Dict, List, Optional, Tuple

from torchlint.runtime.graph import is_parameter, mib, storage_key_bytes

_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")


class _Packed(list):
    """What the graph holds instead of the saved tensor: `[tensor, version]`, or `[tensor.detach(),
    version, producer, output_nr]` for a tensor with a grad_fn. The detached tensor has the same
    storage and version counter; keeping the tensor itself would close a reference cycle through
    C++ that the garbage collector cannot see (graph -> _Packed -> t -> grad_fn -> graph). A list
    subclass, so that building one runs no Python code; it takes weak references (without a
    callback: nothing of ours runs when a graph frees it, see runtime/interrupt.py)."""

    __slots__ = ("__weakref__",)

    @property
    def tensor(self) -> Any:
        return self[0]

    @property
    def version(self) -> int:
        return self[1]

    @property
    def producer(self) -> Optional[type]:
        return self[2] if len(self) > 2 else None

    @property
    def output_nr(self) -> int:
        return self[3] if len(self) > 3 else 0


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
    """The saved-tensor hooks and the per-step samples.

    The hooks cost a Python call per saved tensor (pack) and per use in backward (unpack): on a
    recurrent model stepping small cells over a sequence that is thousands of calls a step, which
    no amount of care inside the hooks makes cheap (a no-op pair alone costs ~1.25x there). So
    they can be on in one step of every `every` only (steps 1, 1 + every, ...), and always while
    an evaluation call is measured (TL106); in the other steps autograd saves tensors itself and
    makes its own in-place check. `every=None` decides after step 2 (both watched): 1 when the
    hooks cost at most TARGET of the step (PACK_SECONDS per saved tensor, measured on the
    development machine), else enough to bring them down to about that. A sample then counts the
    graphs built in watched steps only; the report says so."""

    PRUNE_AT = 100_000
    # CPU per saved tensor (its pack and its unpack call, and what they do), torch 2.13 CPU, on the
    # development machine: the recurrent trainer of bench/run_overhead.py (~3,100 saved tensors in a
    # ~50 ms step) read 1.41-1.45x with the hooks on every step, 1.05x with one step in 8
    PACK_SECONDS = 6e-6
    TARGET = 0.1
    MAX_EVERY = 8

    def __init__(self, every: Optional[int] = 1) -> None:
        self._live: List[Any] = []  # weak references (no callbacks) to the _Packed of watched steps
        self._prune_at = self.PRUNE_AT
        self.samples: List[Sample] = []
        self.every = max(int(every), 1) if every else 1
        self.adaptive = not every
        self.packs = 0  # pack calls so far
        self._step_clock: Optional[Tuple[float, int]] = None  # (time, packs) at the end of step 1
        # distinct storages packed while `measuring` (the saved bytes of one evaluation call)
        self.measuring = 0
        self._measured: Dict[Tuple[str, int], int] = {}
        self.measured_calls = 0
        self._pushed = False
        self._available = False
        self._step_watched_now = True
        # the storage keys of the script's parameters (left out of every count, see graph.py)
        self.parameter_storages: Callable[[], AbstractSet[Tuple[str, int]]] = frozenset

    # -- hooks ------------------------------------------------------------------------------------
    def pack(self, tensor: Any) -> Any:
        grad_fn = tensor.grad_fn
        if grad_fn is None:
            packed = _Packed((tensor, tensor._version))
        else:
            packed = _Packed((tensor.detach(), tensor._version, type(grad_fn), tensor.output_nr))
        self.packs += 1
        live = self._live
        live.append(weakref.ref(packed))
        if len(live) > self._prune_at:
            self._prune()
        if self.measuring:
            self._measure(tensor)
        return packed

    @staticmethod
    def unpack(packed: Any) -> Any:
        if type(packed) is not _Packed:
            return packed
        tensor = packed[0]
        version = tensor._version
        if version != packed[1]:
            raise RuntimeError(modified_message(packed, version))
        return tensor

    def _prune(self) -> None:
        self._live = [ref for ref in self._live if ref() is not None]
        self._prune_at = max(2 * len(self._live), self.PRUNE_AT)

    def _measure(self, tensor: Any) -> None:
        found = storage_key_bytes(tensor)
        if found is not None and not is_parameter(tensor):  # the tensor itself here: views say whose
            self._measured[found[0]] = found[1]

    def measure_begin(self) -> None:
        """Count the distinct storages saved from now on (the hooks are on meanwhile)."""
        if self.measuring == 0:
            self._measured = {}
            self._push()
        self.measuring += 1

    def measure_end(self) -> int:
        """Bytes of the distinct storages saved since `measure_begin` (one evaluation call)."""
        self.measuring = max(self.measuring - 1, 0)
        saved = sum(self._measured.values())
        if self.measuring == 0:
            self._measured = {}
            self.watch_step(self._step_watched_now)
        return saved

    def install(self) -> bool:
        """False when saved-tensor hooks are disabled in this process (e.g. by torch.compile)."""
        self._available = True
        self._step_watched_now = True
        self._available = self._push()
        return self._available

    def _push(self) -> bool:
        if self._pushed or not self._available:
            return self._pushed
        import torch

        try:
            torch._C._autograd._push_saved_tensors_default_hooks(self.pack, self.unpack)
        except Exception:  # noqa: BLE001
            return False
        self._pushed = True
        return True

    def _pop(self) -> None:
        if not self._pushed:
            return
        import torch

        try:
            top = torch._C._autograd._top_saved_tensors_default_hooks(False)
            if top is None or top[0] != self.pack:  # the script pushed hooks of its own on top: leave them
                return
            torch._C._autograd._pop_saved_tensors_default_hooks()
        except Exception:  # noqa: BLE001 - the stack was changed under us; nothing to restore
            return
        self._pushed = False

    def watch_step(self, on: bool) -> None:
        """Hooks on (or off) for the step that starts now."""
        self._step_watched_now = on
        if self.measuring:
            return
        if on:
            self._push()
        else:
            self._pop()

    def after_step(self, step: int) -> None:
        """Sample at the end of `step`, then switch the hooks for step `step + 1`."""
        self.sample(step)
        if self.adaptive and step <= 2:
            now = time.thread_time()  # CPU time: waiting for a core on a busy machine is no cost of the hooks
            if step == 1:
                self._step_clock = (now, self.packs)
            elif self._step_clock is not None:
                started, packs = self._step_clock
                self.every = self.choose_every(self.packs - packs, now - started)
        self.watch_step(step % self.every == 0)

    @classmethod
    def choose_every(cls, packs: int, seconds: float) -> int:
        """The stride for a watched step that saved `packs` tensors in `seconds`."""
        hooks = packs * cls.PACK_SECONDS
        share = hooks / max(seconds - hooks, 1e-9)
        if share <= cls.TARGET:
            return 1
        return min(cls.MAX_EVERY, int(math.ceil(share / cls.TARGET)))

    def uninstall(self) -> None:
        self.measuring = 0
        self._pop()
        self._available = False

    # -- samples ----------------------------------------------------------------------------------
    def live(self) -> Tuple[int, int]:
        """(bytes of distinct storages, number of saved tensors) still held by live graphs."""

        storages: Dict[Tuple[str, int], int] = {}
        self._prune()
        packed = [item for item in (ref() for ref in self._live) if item is not None]
        # (computed only when a graph is alive at the sample: after a backward none is, usually)
        parameters = self.parameter_storages() if packed else frozenset()
        for item in packed:
            found = storage_key_bytes(item[0])
            if found is not None and found[0] not in parameters and not is_parameter(item[0]):
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
        step-to-step changes non-negative, and at least `min_bytes` gained (`min_bytes / every`
        when only one step in `every` is counted)."""
        use_cuda = bool(self.samples) and all(s.cuda_allocated is not None for s in self.samples)
        if not use_cuda:
            min_bytes = min_bytes // self.every
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

