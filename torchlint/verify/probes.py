"""Probes: execute a snippet and observe whether a harm happened.

Every probe has the signature `probe(source: str, device: str, **expect) -> Observation` and is
registered in `PROBES` under its function name. Evidence is always built from what was observed
(the exception text, measured bytes, counted nodes, computed ratios), never from a constant.

A probe only catches what it is looking for: any other exception escapes, and the runner
reports the case as ERROR with that exception. So a `good` snippet that crashes is never taken
for "clean".

Every probe accepts `show=("expr", ...)`: expressions evaluated in the snippet's namespace after
it ran (or stopped), appended to the evidence; expressions that cannot be evaluated are left out.

This module imports torch only inside the probes, so the parent process can import it to check
probe names without torch.
"""

from __future__ import annotations

import ast
import builtins
import gc
import sys
import warnings
import weakref
from typing import Any, Callable, Dict, Iterable, Optional, Sequence, Tuple, Union

from torchlint.verify.case import Observation

PROBES: Dict[str, Callable[..., Observation]] = {}

_MIB = 1024 * 1024


def probe(fn: Callable[..., Observation]) -> Callable[..., Observation]:
    PROBES[fn.__name__] = fn
    return fn


def other_device(device: str) -> str:
    return "meta" if device == "cpu" else "cpu"


# --------------------------------------------------------------------------------------------
# Executing a snippet


def _reset_torch_state() -> None:
    import torch

    # What an earlier snippet may have changed process-wide.
    torch.set_grad_enabled(True)
    torch.manual_seed(0)
    torch.autograd.set_detect_anomaly(False)
    torch.set_default_dtype(torch.float32)
    torch.set_default_device(None)


def execute(source: str, device: str, filename: str = "<snippet>") -> Tuple[dict, Optional[BaseException]]:
    """Run `source` in a fresh namespace; return the namespace and the exception it raised (or
    None). `SystemExit`/`KeyboardInterrupt` are not caught."""
    _reset_torch_state()
    namespace: Dict[str, Any] = {
        "__name__": "__verify__",
        "__builtins__": builtins,
        "DEVICE": device,
        "OTHER_DEVICE": other_device(device),
    }
    code = compile(source, filename, "exec")
    try:
        exec(code, namespace)
    except Exception as exc:  # noqa: BLE001 - the probe decides what is expected
        return namespace, exc
    return namespace, None


def _run_or_raise(source: str, device: str) -> dict:
    namespace, exc = execute(source, device)
    if exc is not None:
        raise exc
    return namespace


def _first_sentence(text: str, limit: int = 260) -> str:
    text = " ".join(str(text).split())
    for stop in (" Hint:", " HINT:"):
        if stop in text:
            text = text[: text.index(stop)]
    if len(text) > limit:
        cut = text.rfind(". ", 0, limit)
        text = text[: cut + 1] if cut > 40 else text[: limit - 1] + "…"
    return text


def describe_exception(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {_first_sentence(str(exc))}"


def _fmt(value: Any) -> str:
    if hasattr(value, "next_functions") and hasattr(value, "name"):
        return type(value).__name__  # an autograd node
    if type(value).__module__.startswith("torch") and hasattr(value, "numel") and hasattr(value, "dtype"):
        if value.numel() == 1:
            return _fmt(value.item())
        return f"tensor(shape={tuple(value.shape)}, dtype={value.dtype}, device={value.device})"
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.6g}"
    text = repr(value)
    return text if len(text) <= 100 else text[:99] + "…"


def _shown(namespace: dict, show: Sequence[str]) -> str:
    parts = []
    for expr in show or ():
        try:
            parts.append(f"{expr} = {_fmt(eval(expr, namespace))}")
        except Exception:  # noqa: BLE001 - the snippet stopped before defining it
            continue
    return ("; " + "; ".join(parts)) if parts else ""


def _scalar(value: Any) -> Any:
    if hasattr(value, "numel") and hasattr(value, "item") and value.numel() == 1:
        return value.item()
    return value


def _resolve_exception(name: str) -> type:
    if "." not in name:
        found = getattr(builtins, name, None)
    else:
        module_name, _, attr = name.rpartition(".")
        found = getattr(__import__(module_name, fromlist=[attr]), attr, None)
    if not (isinstance(found, type) and issubclass(found, BaseException)):
        raise ValueError(f"probe `raises`: unknown exception type {name!r}")
    return found


# --------------------------------------------------------------------------------------------
# Probes


@probe
def raises(source: str, device: str, exc: str = "RuntimeError",
           match: Union[str, Sequence[str]] = "", show: Sequence[str] = ()) -> Observation:
    """Harm: the snippet raises `exc` (a builtin name or a dotted path; "Exception" for any)
    whose message contains `match` (or one of the strings in a list). An exception of another
    type escapes (ERROR)."""
    expected = _resolve_exception(exc)
    needles = [match] if isinstance(match, str) else list(match)
    namespace, error = execute(source, device)
    extra = _shown(namespace, show)
    if error is None:
        return Observation(False, "ran to completion without an exception" + extra)
    if not isinstance(error, expected):
        raise error
    message = str(error)
    if any(needle in message for needle in needles):
        return Observation(True, describe_exception(error) + extra)
    wanted = " or ".join(repr(n) for n in needles)
    return Observation(False, f"raised {describe_exception(error)} — not the expected message "
                              f"containing {wanted}" + extra)


@probe
def grads_accumulate(source: str, device: str, first: str = "g1", second: str = "g2",
                     ratio: float = 2.0, rtol: float = 1e-4, show: Sequence[str] = ()) -> Observation:
    """Harm: the gradient observed after the second iteration (`second`, an expression) equals
    `ratio` times the one after the first (`first`) elementwise: gradients were summed instead
    of recomputed. Write the snippet so that each iteration's fresh gradient is the same (e.g.
    the loss is linear in the weights), so a clean loop gives a ratio of exactly 1."""
    import torch

    namespace = _run_or_raise(source, device)
    g1 = eval(first, namespace)
    g2 = eval(second, namespace)
    n1 = float(g1.double().norm())
    n2 = float(g2.double().norm())
    observed = n2 / n1 if n1 else float("inf")
    elementwise = bool(torch.allclose(g2.double(), ratio * g1.double(), rtol=rtol, atol=1e-7))
    evidence = (f"‖{second}‖/‖{first}‖ = {observed:.4f}; {second} == {ratio:g}·{first} "
                f"elementwise: {elementwise}")
    return Observation(elementwise, evidence + _shown(namespace, show))


class _Packed:
    """What the saved-tensors pack hook stores in the graph instead of the tensor. It holds
    `t.detach()`: holding `t` itself would make graph → _Packed → t → grad_fn → graph, a cycle
    through C++ that the garbage collector cannot see, so nothing would ever be freed."""

    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor


class SavedTensorTracker:
    """Counts the tensors autograd graphs saved for backward that are still alive: a packed
    object dies when its graph is freed or when backward releases the saved values."""

    def __init__(self) -> None:
        self._live: "weakref.WeakSet[_Packed]" = weakref.WeakSet()

    def pack(self, tensor: Any) -> _Packed:
        packed = _Packed(tensor.detach())
        self._live.add(packed)
        return packed

    @staticmethod
    def unpack(packed: _Packed) -> Any:
        return packed.tensor

    def hooks(self):
        import torch

        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    def live(self) -> Tuple[int, int]:
        """(bytes of distinct storages, number of saved tensors) still held by live graphs."""
        storages: Dict[Tuple[str, int], int] = {}
        packed = list(self._live)
        for item in packed:
            storage = item.tensor.untyped_storage()
            key = (str(item.tensor.device), storage.data_ptr() or id(storage))
            storages[key] = storage.nbytes()
        return sum(storages.values()), len(packed)


def count_graph_nodes(value: Any) -> int:
    """Autograd nodes reachable from a tensor's grad_fn (or from every tensor in a list, tuple,
    dict, or a module's tensor attributes)."""
    roots = []

    def collect(obj: Any, depth: int = 0) -> None:
        if depth > 3:
            return
        if hasattr(obj, "grad_fn") and hasattr(obj, "requires_grad"):
            if obj.grad_fn is not None:
                roots.append(obj.grad_fn)
        elif isinstance(obj, dict):
            for item in obj.values():
                collect(item, depth + 1)
        elif isinstance(obj, (list, tuple, set)):
            for item in obj:
                collect(item, depth + 1)

    collect(value)
    seen: Dict[int, Any] = {}  # keeps the node objects alive so ids stay unique
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(fn for fn, _ in node.next_functions)
    return len(seen)


def _mib(n: int) -> str:
    return f"{n / _MIB:.2f} MiB"


@probe
def graph_retained(source: str, device: str, name: Optional[str] = None,
                   min_bytes: Optional[int] = None, min_nodes: Optional[int] = None,
                   show: Sequence[str] = ()) -> Observation:
    """Harm: after the snippet ran (and a gc.collect()), autograd graphs it built are still
    alive: at least `min_bytes` of saved tensors are held by live graphs (measured with a
    saved_tensors_hooks tracker), and/or at least `min_nodes` autograd nodes are reachable from
    `name` (an expression: a tensor, or a list/dict of tensors). On CUDA the evidence adds the
    torch.cuda.memory_allocated() delta."""
    import torch

    if min_bytes is None and min_nodes is None:
        raise ValueError("probe `graph_retained` needs min_bytes and/or min_nodes")
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        allocated_before = torch.cuda.memory_allocated()
    tracker = SavedTensorTracker()
    with tracker.hooks():
        namespace = _run_or_raise(source, device)
    gc.collect()
    saved_bytes, saved_count = tracker.live()
    parts = [f"{_mib(saved_bytes)} of saved tensors held by live autograd graphs "
             f"({saved_count} tensors)"]
    harm = False
    if min_bytes is not None:
        harm = harm or saved_bytes >= min_bytes
    if name is not None:
        nodes = count_graph_nodes(eval(name, namespace))
        parts.append(f"{nodes} autograd nodes reachable from `{name}`")
        if min_nodes is not None:
            harm = harm or nodes >= min_nodes
    if cuda:
        torch.cuda.synchronize()
        parts.append(f"cuda memory_allocated +{_mib(torch.cuda.memory_allocated() - allocated_before)}")
    evidence = "; ".join(parts) + _shown(namespace, show)
    namespace.clear()
    return Observation(harm, evidence)


@probe
def tensor_mutated(source: str, device: str, name: str = "x", baseline: Optional[str] = None,
                   show: Sequence[str] = ()) -> Observation:
    """Harm: the caller's tensor `name` was modified in place by the code it was passed to.
    Observed through the tensor's version counter (every in-place write bumps it; factory
    functions leave it at 0) and, when the snippet kept a copy `baseline`, the largest change."""
    namespace = _run_or_raise(source, device)
    tensor = eval(name, namespace)
    version = int(tensor._version)
    evidence = f"`{name}`._version = {version}"
    harm = version > 0
    if baseline is not None:
        reference = eval(baseline, namespace)
        delta = float((tensor.double() - reference.double()).abs().max())
        evidence += f"; max |{name} − {baseline}| = {delta:.4g}"
        harm = harm or delta > 0
    return Observation(harm, evidence + _shown(namespace, show))


def _category(name: str) -> type:
    found = getattr(builtins, name, None)
    if not (isinstance(found, type) and issubclass(found, Warning)):
        raise ValueError(f"probe `warns`: unknown warning category {name!r}")
    return found


@probe
def warns(source: str, device: str, category: str = "UserWarning", match: str = "",
          show: Sequence[str] = ()) -> Observation:
    """Harm: running the snippet emits a warning of `category` whose text contains `match`.
    Warnings that PyTorch emits only once per process (TORCH_WARN_ONCE) can be seen only by the
    first case that triggers them in a child process; use warnings that repeat."""
    wanted = _category(category)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        namespace = _run_or_raise(source, device)
    hits = [r for r in records if issubclass(r.category, wanted) and match in str(r.message)]
    if hits:
        text = f"{hits[0].category.__name__}: {_first_sentence(str(hits[0].message))}"
        if len(hits) > 1:
            text += f" (×{len(hits)})"
        return Observation(True, text + _shown(namespace, show))
    others = ", ".join(sorted({r.category.__name__ for r in records})) or "none"
    return Observation(False, f"no {category} containing {match!r} (warnings seen: {others})"
                              + _shown(namespace, show))


@probe
def hooks_skipped(source: str, device: str, name: str = "model", show: Sequence[str] = ()) -> Observation:
    """Harm: the module `name`'s forward() ran more often than its forward hooks fired (e.g.
    `model.forward(x)` instead of `model(x)` bypasses hooks). Forward runs are counted with a
    profile function, hook calls with a global forward hook."""
    from torch.nn.modules import module as nn_module

    forward_runs: Dict[int, int] = {}
    hook_calls: Dict[int, int] = {}
    keep: Dict[int, Any] = {}

    def on_hook(module: Any, args: Any, output: Any) -> None:
        keep[id(module)] = module
        hook_calls[id(module)] = hook_calls.get(id(module), 0) + 1

    def profiler(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == "forward":
            owner = frame.f_locals.get("self")
            if owner is not None:
                keep[id(owner)] = owner
                forward_runs[id(owner)] = forward_runs.get(id(owner), 0) + 1

    handle = nn_module.register_module_forward_hook(on_hook)
    previous = sys.getprofile()
    sys.setprofile(profiler)
    try:
        namespace = _run_or_raise(source, device)
    finally:
        sys.setprofile(previous)
        handle.remove()
    module = eval(name, namespace)
    runs = forward_runs.get(id(module), 0)
    fired = hook_calls.get(id(module), 0)
    evidence = f"{type(module).__name__}.forward ran {runs}×, its forward hooks fired {fired}×"
    return Observation(runs > fired, evidence + _shown(namespace, show))


_OPS: Dict[str, Callable[[Any, Any, float], bool]] = {
    "==": lambda a, b, tol: a == b,
    "!=": lambda a, b, tol: a != b,
    "<": lambda a, b, tol: a < b,
    "<=": lambda a, b, tol: a <= b,
    ">": lambda a, b, tol: a > b,
    ">=": lambda a, b, tol: a >= b,
    "is": lambda a, b, tol: a is b,
    "is not": lambda a, b, tol: a is not b,
    "close": lambda a, b, tol: abs(a - b) <= tol * max(abs(a), abs(b), 1e-12),
    "not close": lambda a, b, tol: abs(a - b) > tol * max(abs(a), abs(b), 1e-12),
}


def _is_literal(expr: str) -> bool:
    try:
        ast.literal_eval(expr.strip())
    except (ValueError, SyntaxError):
        return False
    return True


@probe
def value_compare(source: str, device: str, left: str, op: str, right: str, rtol: float = 1e-6,
                  show: Sequence[str] = ()) -> Observation:
    """Harm: `left op right` holds, where `left` and `right` are expressions evaluated in the
    snippet's namespace (one-element tensors become Python numbers) and `op` is one of
    ==, !=, <, <=, >, >=, is, is not, close, not close (relative tolerance `rtol`)."""
    if op not in _OPS:
        raise ValueError(f"probe `value_compare`: unknown op {op!r}")
    namespace = _run_or_raise(source, device)
    a = eval(left, namespace)
    b = eval(right, namespace)
    if op not in ("is", "is not"):
        a, b = _scalar(a), _scalar(b)
    result = bool(_OPS[op](a, b, rtol))
    if _is_literal(right):
        evidence = f"{left} = {_fmt(a)}; `{left} {op} {right}` is {result}"
    else:
        evidence = f"{left} = {_fmt(a)}, {right} = {_fmt(b)}; `{left} {op} {right}` is {result}"
    return Observation(result, evidence + _shown(namespace, show))


@probe
def syntax_error(source: str, device: str, match: str = "", show: Sequence[str] = ()) -> Observation:
    """Harm: Python refuses to compile the snippet (a SyntaxError whose message contains
    `match`), so no line of it runs. A snippet that compiles is executed, and any exception it
    raises escapes (ERROR)."""
    try:
        compile(source, "<snippet>", "exec")
    except SyntaxError as error:
        line = (error.text or "").strip()
        where = f" at line {error.lineno}: {line}" if error.lineno else ""
        observed = f"SyntaxError: {error.msg}{where}"
        return Observation(match in (error.msg or ""), observed)
    namespace = _run_or_raise(source, device)
    return Observation(False, "compiled and ran to completion" + _shown(namespace, show))


@probe
def builds_graph(source: str, device: str, name: str = "out", show: Sequence[str] = ()) -> Observation:
    """Harm: the tensor `name` (an expression) has a `grad_fn` after the snippet ran: autograd
    recorded a graph for it. The warnings the snippet emitted are part of the evidence."""
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        namespace = _run_or_raise(source, device)
    value = eval(name, namespace)
    grad_fn = getattr(value, "grad_fn", None)
    evidence = f"`{name}.grad_fn` = {_fmt(grad_fn)}"
    seen = [f"{r.category.__name__}: {_first_sentence(str(r.message), 120)}" for r in records]
    if seen:
        evidence += "; warned " + " | ".join(dict.fromkeys(seen))
    return Observation(grad_fn is not None, evidence + _shown(namespace, show))


@probe
def signature_table(source: str, device: str, match: str = "", show: Sequence[str] = ()) -> Observation:
    """Harm: the snippet raises TypeError containing `match` (a call the signature table says
    torch rejects) and the table made from the installed torch now
    (`make_signatures.table()`) equals the stored `signatures.json`, entry for entry. A snippet
    that runs without TypeError shows no harm; a table that differs shows none either, and the
    evidence names the entries that differ (the runner reports the case REFUTED)."""
    from torchlint.analysis.api_changes import make_signatures, signatures

    namespace, error = execute(source, device)
    extra = _shown(namespace, show)
    if error is None:
        return Observation(False, "ran to completion without an exception" + extra)
    if not isinstance(error, TypeError) or match not in str(error):
        raise error
    stored = signatures.load()
    made = make_signatures.table()
    found = make_signatures.differences(stored, made)
    if found:
        return Observation(False, f"{describe_exception(error)}; but the table (made from torch "
                                  f"{stored.get('torch')}) differs from torch {made['torch']} in "
                                  f"{len(found)} place(s): " + "; ".join(found) + extra)
    return Observation(True, f"{describe_exception(error)}; the table (made from torch {stored.get('torch')}: "
                             f"{len(made['entries'])} callables, {len(made['aliases'])} aliases) matches the "
                             f"installed torch {made['torch']}, every entry and flag" + extra)


def run_probe(name: str, source: str, device: str, expect: dict) -> Observation:
    if name not in PROBES:
        raise KeyError(f"unknown probe {name!r} (known: {', '.join(sorted(PROBES))})")
    return PROBES[name](source, device, **expect)


def probe_names() -> Iterable[str]:
    return sorted(PROBES)


# --------------------------------------------------------------------------------------------
# The API-change table (torchlint.analysis.api_changes): one probe for every entry's Check


def _resolve_api(api: str) -> Tuple[Any, str, Any]:
    """(owner, attribute, object) for a dotted name: `torch.ger` -> (torch, "ger", torch.ger)."""
    import importlib

    parts = api.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:-1]:
            owner = getattr(owner, name)
        return owner, parts[-1], getattr(owner, parts[-1])
    raise ValueError(f"probe `api_change`: cannot resolve {api!r}")


@probe
def api_change(source: str, device: str, api: str = "", outcome: str = "raises", error: str = "",
               match: str = "", show: Sequence[str] = ()) -> Observation:
    """Harm: the snippet shows the table entry's claimed outcome on the installed torch.

    - outcome "raises": it raises `error` (an exception type) whose message contains `match`;
    - "warns": it emits a warning of category `error` whose text contains `match`;
    - "docs" (deprecated in the documentation only): it calls `api` (counted by wrapping it for
      the run), no warning is emitted, and `api`'s docstring contains `match`.
    An exception the entry does not claim escapes (ERROR). An entry whose package is not installed
    never reaches the probe: the runner reports it SOURCE-CHECKED (`Case.requires`)."""
    if outcome == "raises":
        return raises(source, device, exc=error or "Exception", match=match, show=show)
    if outcome == "warns":
        return warns(source, device, category=error or "Warning", match=match, show=show)
    if outcome != "docs":
        raise ValueError(f"probe `api_change`: unknown outcome {outcome!r}")
    owner, attr, target = _resolve_api(api)
    calls = [0]
    if isinstance(target, type):
        original_init = target.__dict__.get("__init__")
        base_init = target.__init__

        def counting_init(self, *args, **kwargs):  # noqa: ANN001 - any class
            calls[0] += 1
            base_init(self, *args, **kwargs)

        target.__init__ = counting_init
        restore = (lambda: setattr(target, "__init__", original_init)) if original_init is not None \
            else (lambda: delattr(target, "__init__"))
    else:
        def counting(*args, **kwargs):
            calls[0] += 1
            return target(*args, **kwargs)

        setattr(owner, attr, counting)
        restore = lambda: setattr(owner, attr, target)  # noqa: E731
    try:
        with warnings.catch_warnings(record=True) as records:
            warnings.simplefilter("always")
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            namespace = _run_or_raise(source, device)
    finally:
        restore()
    documented = match.lower() in (target.__doc__ or "").lower()
    seen = sorted({f"{r.category.__name__}: {_first_sentence(str(r.message), 80)}" for r in records})
    evidence = (f"`{api}` called {calls[0]}×; warnings: {'; '.join(seen) or 'none'}; docstring "
                f"{'says' if documented else 'does not say'} {match!r}")
    return Observation(calls[0] > 0 and not records and documented, evidence + _shown(namespace, show))
