"""What sits on the user's modules: activations cached during forward (TL006), submodules and
parameters in plain containers (TL101), plain tensor attributes (TL102's operands).

Only modules whose class is defined in the user's files are looked at for TL006 (library layers
do not cache activations on themselves); TL101 and TL102 look at every module of a model the
user calls.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Set, Tuple

from torchlint.runtime import project
from torchlint.runtime.graph import describe, mib, saved_bytes, walk


# The types of nn.Module's own bookkeeping attributes (hook dicts, flags, name sets): skipped fast.
_NEVER_ACTIVATIONS = frozenset({dict, OrderedDict, set, bool, int, float, str, type(None)})


@dataclass
class _Cached:
    module: Any  # weakref
    attr: str
    tensor: Any  # weakref to the tensor (or the list's last tensor)
    iteration: int
    in_list: bool
    list_length: int = 0


@dataclass
class _Unregistered:
    owner: Any  # weakref to the module holding the container
    attr: str
    modules: List[Any]  # weakrefs of the unregistered submodules
    parameters: List[Any]  # weakrefs of unregistered parameters (their own and the submodules')
    kinds: str
    linked: bool = False  # a failure was already reported as this container's (dtype/device error)


class ModuleState:
    def __init__(self, session) -> None:
        self.session = session
        self._snapshots: Dict[int, Dict[str, Tuple[int, int]]] = {}
        self._cached: Dict[Tuple[int, str], _Cached] = {}
        self._scanned_roots: Set[int] = set()
        self._unregistered: List[_Unregistered] = []
        self.watched: Set[int] = set()  # ids of unregistered submodules
        self.called: Set[int] = set()  # ... whose forward ran

    # -- TL006 -----------------------------------------------------------------------------------------
    def before_forward(self, module: Any) -> None:
        import torch

        snapshot: Dict[str, Tuple[int, int]] = {}
        for name, value in module.__dict__.items():
            if type(value) in _NEVER_ACTIVATIONS:
                continue
            if isinstance(value, torch.Tensor):
                snapshot[name] = (id(value), -1)
            elif type(value) is list and value and isinstance(value[-1], torch.Tensor):
                snapshot[name] = (id(value), len(value))
        self._snapshots[id(module)] = snapshot

    def forward_failed(self, module: Any) -> None:
        self._snapshots.pop(id(module), None)

    def after_forward(self, module: Any) -> None:
        import torch

        snapshot = self._snapshots.pop(id(module), None)
        if snapshot is None:
            return
        for name, value in module.__dict__.items():
            if type(value) in _NEVER_ACTIVATIONS:
                continue
            if isinstance(value, torch.Tensor):
                if value.grad_fn is not None and snapshot.get(name, (None,))[0] != id(value):
                    self._cached[(id(module), name)] = _Cached(weakref.ref(module), name, weakref.ref(value),
                                                               self.session.iteration, False)
            elif type(value) is list and value and isinstance(value[-1], torch.Tensor):
                before = snapshot.get(name)
                grew = before is None or before[0] != id(value) or len(value) > before[1]
                if grew and value[-1].grad_fn is not None:
                    self._cached[(id(module), name)] = _Cached(weakref.ref(module), name, weakref.ref(value[-1]),
                                                               self.session.iteration, True, len(value))

    def after_step(self) -> None:
        """Activations cached during this step's forwards that are still held, with their graph."""
        for key, cached in list(self._cached.items()):
            module, tensor = cached.module(), cached.tensor()
            del self._cached[key]
            if module is None or tensor is None or tensor.grad_fn is None:
                continue
            value = module.__dict__.get(cached.attr)
            held = value is tensor or (cached.in_list and isinstance(value, list) and any(v is tensor for v in value))
            if held:
                self._report_cached(module, cached, tensor, value)

    def _report_cached(self, module: Any, cached: _Cached, tensor: Any, value: Any) -> None:
        session = self.session
        cls = type(module)
        lines = project.attribute_lines(cls, cached.attr, methods=None)
        span = project.class_span(cls)
        where = lines[0] if lines else (span[0], span[1]) if span else None
        if where is None:
            return
        nodes = walk([tensor.grad_fn])
        attr = f"{cls.__name__}.{cached.attr}"
        if cached.in_list:
            what = (f"`{attr}` (a list, {len(value)} tensors) gained a tensor with grad_fn "
                    f"{tensor.grad_fn.name()} during forward")
        else:
            what = (f"`{attr}` holds a tensor ({describe(tensor)}) with grad_fn {tensor.grad_fn.name()} assigned "
                    "during forward")
        session.observe(
            "TL006", None,
            f"`self.{cached.attr}` keeps a tensor computed in forward together with its autograd graph "
            f"after the step; store `.detach()`ed values",
            f"{what}, still held after step {session.iteration}: {len(nodes):,} autograd nodes, "
            f"{mib(saved_bytes(nodes, session.parameter_storages()))} of saved tensors alive with it",
            path=where[0], line=where[1], related=tuple(lines), spans=(span,) if span else (),
            step=session.iteration)

    def cached_graph_attributes(self) -> List[Tuple[Any, str, Any]]:
        """(module, attribute, tensor) for activations cached on modules and still held (for the
        "backward through the graph a second time" error)."""
        found = []
        for cached in self._cached.values():
            module, tensor = cached.module(), cached.tensor()
            if module is not None and tensor is not None and tensor.grad_fn is not None:
                found.append((module, cached.attr, tensor))
        return found

    # -- TL101 -----------------------------------------------------------------------------------------
    def scan_root(self, root: Any) -> None:
        """Once per model: containers on its modules holding modules or parameters it does not
        register."""
        import torch.nn as nn

        if id(root) in self._scanned_roots:
            return
        self._scanned_roots.add(id(root))
        modules = list(root.modules())
        registered_modules = {id(m) for m in modules}
        registered_params = {id(p) for p in root.parameters()}
        for owner in modules:
            for attr, value in owner.__dict__.items():
                if attr in ("_modules", "_parameters", "_buffers"):
                    continue
                items = _container_items(value)
                if not items:
                    continue
                found_modules = [m for m in items if isinstance(m, nn.Module) and id(m) not in registered_modules]
                found_params = [p for p in items if isinstance(p, nn.Parameter) and id(p) not in registered_params]
                inner = [p for m in found_modules for p in m.parameters() if id(p) not in registered_params]
                if not found_modules and not found_params:
                    continue
                kinds = _kinds(found_modules, found_params, value)
                entry = _Unregistered(weakref.ref(owner), attr, [weakref.ref(m) for m in found_modules],
                                      [weakref.ref(p) for p in found_params + inner], kinds)
                self._unregistered.append(entry)
                self.watched.update(id(m) for m in found_modules)

    def unregistered_entry(self, module: Any) -> Optional[_Unregistered]:
        """The plain container that holds `module` (an unregistered submodule), if any."""
        if id(module) not in self.watched:
            return None
        for entry in self._unregistered:
            if any(r() is module for r in entry.modules):
                return entry
        return None

    @staticmethod
    def container_line(entry: _Unregistered):
        """(path, line, related lines, spans) of the assignment of the container, or None."""
        owner = entry.owner()
        if owner is None:
            return None
        cls = type(owner)
        lines = project.attribute_lines(cls, entry.attr, methods=["__init__"]) or \
            project.attribute_lines(cls, entry.attr)
        span = project.class_span(cls)
        if not lines and span is None:
            return None
        path, line = lines[0] if lines else (span[0], span[1])  # type: ignore[index]
        return path, line, tuple(lines), (span,) if span else ()

    def report_unregistered(self) -> None:
        """At the end of the run: the unregistered submodules whose forward ran (and the
        unregistered parameters that received a gradient)."""
        session = self.session
        for entry in self._unregistered:
            owner = entry.owner()
            if owner is None or entry.linked:
                continue
            ran = [m for m in (r() for r in entry.modules) if m is not None and id(m) in self.called]
            params = [p for p in (r() for r in entry.parameters) if p is not None]
            used_params = [p for p in params if p.grad is not None]
            if not ran and not used_params:
                continue
            cls = type(owner)
            lines = project.attribute_lines(cls, entry.attr, methods=["__init__"]) or \
                project.attribute_lines(cls, entry.attr)
            span = project.class_span(cls)
            if not lines and span is None:
                continue
            path, line = lines[0] if lines else (span[0], span[1])  # type: ignore[index]
            values = sum(p.numel() for p in params)
            optimized = session.optimized_parameter_ids()
            missed = [p for p in params if id(p) not in optimized]
            trained = ("no optimizer updates them" if missed and len(missed) == len(params)
                       else f"{len(params) - len(missed)} of them are in an optimizer")
            ran_text = f"{len(ran)} of them ran in forward; " if ran else ""
            session.observe(
                "TL101", None,
                f"`self.{entry.attr}` is a plain {type(owner.__dict__[entry.attr]).__name__}: "
                f"`model.parameters()`, `.to()`, `.eval()` and `state_dict()` skip what it holds; use "
                f"`nn.ModuleList`/`nn.ModuleDict` (`nn.ParameterList` for parameters)",
                f"`{cls.__name__}.{entry.attr}` holds {entry.kinds}; {ran_text}their {len(params)} parameter "
                f"tensors ({values:,} values) are missing from {cls.__name__}.parameters(); {trained}",
                path=path, line=line, related=tuple(lines), spans=(span,) if span else ())

    # -- TL102 -----------------------------------------------------------------------------------------
    @staticmethod
    def plain_tensor_attributes(root: Any) -> List[Tuple[str, Any, str, Any]]:
        """(qualified module name, module, attribute, tensor) for every tensor stored as a plain
        attribute (neither parameter nor buffer) on `root`'s modules."""
        import torch

        found = []
        for name, module in root.named_modules():
            for attr, value in module.__dict__.items():
                if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                    found.append((name, module, attr, value))
        return found


def _container_items(value: Any) -> List[Any]:
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        return []
    flat: List[Any] = []
    for item in items[:4096]:
        if isinstance(item, (list, tuple)):
            flat.extend(item[:4096])
        else:
            flat.append(item)
    return flat


def _kinds(modules: List[Any], params: List[Any], container: Any) -> str:
    parts = []
    if modules:
        names = sorted({type(m).__name__ for m in modules})
        parts.append(f"{len(modules)} module{'s' if len(modules) != 1 else ''} ({', '.join(names)})")
    if params:
        parts.append(f"{len(params)} nn.Parameter")
    return " and ".join(parts) + f" in a plain {type(container).__name__}"

