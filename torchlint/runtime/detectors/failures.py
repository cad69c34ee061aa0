"""The script stopped with an exception: is it a known rule's error, and what does the run know
about it?

The exception's type and message give the family (signatures.py). The TorchFunctionMode kept the
failing op and its operands (shapes, strides, devices, dtypes); the always-called forward hooks
kept the modules the exception went through. From those:

- view error -> TL004, with the operand's shape and strides;
- device error -> TL005 when the model's parameters sit on more than one device (which
  submodules where), TL102 when an operand is a module's plain tensor attribute, else TL007
  (the batch or target on another device than the model);
- dtype error with a float16/bfloat16 operand against float32 weights -> TL009;
- CUDA unavailable -> TL008; in-place errors -> TL001 (a backward error is traced back to the
  in-place op that caused it), or TL117 when the modified tensor is a parameter an optimizer
  stepped (a graph built before the step, backpropagated after it); backward on a tensor
  computed under no_grad -> TL104;
  "backward through the graph a second time" while a module holds a cached activation -> TL006;
  the legacy-API errors -> TL201, TL203, TL205; a SyntaxError at `async=` -> TL204;
  a BatchNorm's rank error -> TL113; `.numpy()` on a tensor that requires grad -> TL116.

Anything else is the script failing for a reason of its own (exit 2).
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from torchlint.runtime import project, signatures
from torchlint.runtime.frames import Site
from torchlint.runtime.graph import describe


@dataclass
class OpFailure:
    """What the TorchFunctionMode saw when an op raised."""

    error: BaseException
    op: str
    operands: List[Tuple[str, Any]]
    site: Optional[Site]
    grad_enabled: bool
    args: tuple = ()
    kwargs: Dict[str, Any] = field(default_factory=dict)


def _chain(error: BaseException) -> List[BaseException]:
    found: List[BaseException] = []
    current: Optional[BaseException] = error
    while current is not None and current not in found and len(found) < 8:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


class Failures:
    def __init__(self, session) -> None:
        self.session = session
        self.op_failure: Optional[OpFailure] = None
        self._modules_error: Optional[BaseException] = None
        self._modules: List[Any] = []

    # -- while the script runs ---------------------------------------------------------------------
    def op_failed(self, op: str, args: tuple, kwargs: dict, error: BaseException) -> None:
        if signatures.exception_family(type(error).__name__, str(error)) is None:
            return
        import torch

        operands = []
        for position, value in enumerate(args):
            if isinstance(value, torch.Tensor):
                operands.append((f"argument {position + 1}", value))
            elif isinstance(value, (list, tuple)):
                operands.extend((f"argument {position + 1}[{i}]", v) for i, v in enumerate(value[:8])
                                if isinstance(v, torch.Tensor))
        operands.extend((name, value) for name, value in kwargs.items() if isinstance(value, torch.Tensor))
        self.op_failure = OpFailure(error, op, operands, self.session.site(), torch.is_grad_enabled(),
                                    tuple(a for a in args if not isinstance(a, torch.Tensor))[:6],
                                    {k: v for k, v in kwargs.items() if not isinstance(v, torch.Tensor)})

    def module_failed(self, module: Any, error: Optional[BaseException]) -> None:
        if error is None:
            return
        if error is not self._modules_error:
            self._modules_error, self._modules = error, []
        self._modules.append(module)

    # -- at the end -------------------------------------------------------------------------------------
    def classify(self, error: BaseException) -> bool:
        """Observe the rule this failure belongs to; False when it belongs to none."""
        if isinstance(error, SyntaxError):
            return self._syntax(error)
        for item in _chain(error):
            family = signatures.exception_family(type(item).__name__, str(item))
            if family is not None:
                return self._classify(item, family, error)
        return False

    def _context(self, error: BaseException) -> Tuple[Optional[OpFailure], List[Any], Optional[Site]]:
        chain = _chain(error)
        op = self.op_failure if self.op_failure is not None and self.op_failure.error in chain else None
        modules = self._modules if self._modules_error in chain else []
        site = self.session.frames.site_of_traceback(error.__traceback__)
        if site is None and op is not None:
            site = op.site
        if op is None:
            op = _op_from_traceback(error)
        return op, modules, site

    def _classify(self, error: BaseException, family: str, outer: BaseException) -> bool:
        op, modules, site = self._context(outer)
        if site is None:
            return False
        if family in (signatures.DTYPE_ERROR, signatures.DEVICE_ERROR) and \
                self._unregistered(error, family, op, modules, site):
            return True
        handler = {
            signatures.VIEW_ERROR: self._view,
            signatures.NO_CUDA: self._no_cuda,
            signatures.DEVICE_ERROR: self._device,
            signatures.DTYPE_ERROR: self._dtype,
            signatures.SAVED_MODIFIED: self._saved_modified,
            signatures.LEAF_INPLACE: self._leaf_inplace,
            signatures.NO_GRAD_BACKWARD: self._no_grad_backward,
            signatures.BACKWARD_TWICE: self._backward_twice,
            "TL113": self._batchnorm_rank,
            "TL301": self._shape, "TL302": self._shape, "TL303": self._shape, "TL304": self._shape,
            "TL305": self._shape, "TL307": self._shape,
            "TL201": self._zero_dim_index,
            "TL203": self._legacy_direct,
            "TL205": self._legacy_direct,
            "TL128": self._without_forward,
            "TL101": self._container_called,
            "TL116": self._numpy_of_grad,
            signatures.API_REMOVED: self._api_removed,
            signatures.SIGNATURE_MISMATCH: self._rejected_call,
        }.get(family, self._signature_direct)
        return handler(error, family, op, modules, site)

    def _observe(self, code: str, site: Optional[Site], message: str, evidence: str, **extra: Any) -> bool:
        return self.session.observe(code, site, message, evidence, ended_run=True, **extra) is not None

    # -- families ---------------------------------------------------------------------------------------
    def _view(self, error, family, op, modules, site) -> bool:
        evidence = _first_sentence(error)
        if op is not None and op.operands:
            size = ", ".join(str(a) for a in op.args) or "..."
            evidence = f"`.view({size})` of a tensor with {describe(op.operands[0][1])}: {evidence}"
        return self._observe("TL004", site, "`.view()` of a non-contiguous tensor (after transpose/permute) "
                             "fails; use `.reshape(...)` or `.contiguous().view(...)`", evidence)

    _SHAPE_MESSAGES = {
        "TL301": "a layer got an input of another size than it was built for",
        "TL302": "a view/reshape does not fit the tensor: it raises, or the batch is folded into the features",
        "TL303": "a kernel or pooling window is larger than the feature map that reaches it",
        "TL304": "tensors of shapes that cannot match are joined (`torch.cat`, `+`, `@`)",
        "TL305": "the loss's input and target shapes do not fit",
        "TL307": "`Normalize` has another number of channel values than the images have channels",
    }

    def _shape(self, error, family, op, modules, site) -> bool:
        """A shape error: its evidence is the shape trace of the forward that raised, and the
        layer at fault (the innermost module the error came from) with where it is defined."""
        code = family
        if code == "TL304" and any(type(m).__name__.endswith("Loss") for m in modules):
            code = "TL305"
        trace = self.session.forward_shapes
        evidence = f"{type(error).__name__}: {_first_sentence(error)}"
        fault = trace.at_fault() if modules else None
        related: List[Tuple[str, int]] = []
        if fault is not None:
            shape_in = "×".join(map(str, fault.input)) if fault.input else "?"
            evidence += f"; the layer at fault: `{fault.name}` ({fault.kind}), which got {shape_in}"
            root = modules[-1]
            top = fault.name.split(".")[0]
            if top and top != fault.kind:
                related.extend(project.attribute_lines(type(root), top))
            text = trace.text()
            if text:
                evidence += f"; shapes of that forward: {text}"
        return self._observe(code, site, self._SHAPE_MESSAGES.get(code, "a shape error"), evidence,
                             related=tuple(related) + site.stack)

    def _no_cuda(self, error, family, op, modules, site) -> bool:
        import torch

        return self._observe(
            "TL008", site, "hard-coded CUDA fails on this machine, which has none; create and move tensors "
            "with the script's own `device` (`.to(device)`, `device=device`)",
            f"{type(error).__name__}: {_first_sentence(error)} (torch {torch.__version__}, "
            f"torch.cuda.is_available() = {torch.cuda.is_available()})")

    def _device(self, error, family, op, modules, site) -> bool:
        root = modules[-1] if modules else None
        model = self.session.main_model(prefer=root)
        operands = op.operands if op is not None else []
        shown = "; ".join(f"{label} on {t.device}" for label, t in operands[:4])
        if model is not None:
            placement = _placement(model)
            if len(placement) > 1:
                return self._split_model(model, placement, error, site, shown)
            attribute = self._plain_attribute_operand(model, operands)
            if attribute is not None:
                return self._plain_attribute(model, placement, attribute, error, site)
            model_device = next(iter(placement)) if placement else None
            return self._observe(
                "TL007", site,
                f"a tensor reaches `{type(model).__name__}` (on {model_device}) from another device: move every "
                "batch element and the target with `.to(device)` before using them",
                f"{_first_sentence(error)} `{type(model).__name__}`'s parameters are all on {model_device}"
                + (f"; the failing op `{op.op}` got {shown}" if shown else ""))
        return False

    def _split_model(self, model, placement, error, site, shown) -> bool:
        cls = type(model)
        majority = max(placement, key=lambda d: len(placement[d]))
        odd = [name for device, names in placement.items() if device != majority for name in names]
        lines: List[Tuple[str, int]] = []
        for name in odd:
            top = name.split(".")[0]
            lines.extend(project.attribute_lines(cls, top))
        span = project.class_span(cls)
        where = "; ".join(f"{device}: {_names(names)}" for device, names in placement.items())
        return self._observe(
            "TL005", site,
            f"`{cls.__name__}` is split across devices ({', '.join(placement)}): move the whole model once "
            "with `model.to(device)` after building it",
            f"{_first_sentence(error)} `{cls.__name__}`'s parameters by device — {where}"
            + (f"; the failing op got {shown}" if shown else ""),
            related=tuple(lines), spans=(span,) if span else ())

    def _plain_attribute_operand(self, model, operands) -> Optional[Tuple[str, Any, str, Any]]:
        from torchlint.runtime.detectors.module_state import ModuleState

        attributes = ModuleState.plain_tensor_attributes(model)
        for _, tensor in operands:
            for name, module, attr, value in attributes:
                if value is tensor or (tensor._base is not None and tensor._base is value):
                    return name, module, attr, value
        return None

    def _plain_attribute(self, model, placement, attribute, error, site) -> bool:
        name, module, attr, value = attribute
        cls = type(module)
        lines = project.attribute_lines(cls, attr, methods=["__init__"]) or project.attribute_lines(cls, attr)
        span = project.class_span(cls)
        devices = ", ".join(placement) or "?"
        qualified = f"{cls.__name__}.{attr}"
        path, line = lines[0] if lines else (site.path, site.line)
        return self._observe(
            "TL102", None,
            f"`self.{attr}` is a plain tensor attribute, so `model.to(...)` left it behind; register it with "
            f"`self.register_buffer('{attr}', ...)`",
            f"{_first_sentence(error)} `{qualified}` ({describe(value)}) is neither parameter nor buffer while "
            f"the parameters are on {devices}",
            path=path, line=line, related=tuple(lines) + site.stack, spans=(span,) if span else ())

    def _unregistered(self, error, family, op, modules, site) -> bool:
        """A dtype or device error inside a module that sits in a plain list/dict attribute (TL101):
        `model.double()` / `model.to(device)` converted the registered parameters and skipped its."""
        state = self.session.module_state
        if not state.watched:
            return False
        operand_ids = {id(t) for _, t in (op.operands if op is not None else [])}
        for module in modules:
            entry = state.unregistered_entry(module)
            if entry is None:
                continue
            owner = entry.owner()
            if owner is None:
                continue
            found = state.container_line(entry)
            if found is None:
                return False
            path, line, related, spans = found
            kind = "dtype" if family == signatures.DTYPE_ERROR else "device"
            own = sorted({(str(p.dtype) if kind == "dtype" else str(p.device)).replace("torch.", "")
                          for p in module.parameters()})
            root = self.session.main_model()
            registered = sorted({(str(p.dtype) if kind == "dtype" else str(p.device)).replace("torch.", "")
                                 for p in root.parameters()}) if root is not None else []
            operand = " (one of the failing op's operands)" if any(id(p) in operand_ids for p in module.parameters()) \
                else ""
            self.session.observe(
                "TL101", None,
                f"`self.{entry.attr}` is a plain {type(owner.__dict__.get(entry.attr)).__name__}: `.to()`, `.double()` "
                f"and `.half()` skip what it holds; use `nn.ModuleList`/`nn.ModuleDict`",
                f"{_first_sentence(error).rstrip('.')}; the error is in `{type(module).__name__}` from "
                f"`{type(owner).__name__}.{entry.attr}`, whose parameters{operand} are {'/'.join(own) or '?'} while "
                f"the registered ones are {'/'.join(registered) or '?'}: the {kind} conversion skipped them",
                path=path, line=line, related=related + site.stack, spans=spans, ended_run=True)
            entry.linked = True
            return True
        return False

    def _dtype(self, error, family, op, modules, site) -> bool:
        import torch

        half = (torch.float16, torch.bfloat16)
        operands = op.operands if op is not None else []
        low = [(label, t) for label, t in operands if t.dtype in half]
        message = str(error)
        if not low and not any(word in message for word in ("Half", "BFloat16", "c10::Half", "c10::BFloat16")):
            return False
        model = self.session.main_model(prefer=modules[-1] if modules else None)
        dtypes = sorted({str(p.dtype).replace("torch.", "") for p in model.parameters()}) if model is not None else []
        if dtypes and all(d in ("float16", "bfloat16") for d in dtypes):
            return False  # a half model: the float operand is the odd one out, not TL009
        shown = "; ".join(f"{label}: {describe(t)}" for label, t in operands[:3])
        name = type(model).__name__ if model is not None else "the model"
        return self._observe(
            "TL009", site,
            f"a float16/bfloat16 input reaches {name}, whose parameters are {'/'.join(dtypes) or 'float32'}: "
            "convert the model too (`model.half()`) or run under `torch.autocast`",
            f"{_first_sentence(error)}" + (f"; the failing op `{op.op}` got {shown}" if shown and op else ""))

    def _saved_modified(self, error, family, op, modules, site) -> bool:
        inplace = self.session.inplace
        explained = inplace.explain_modified(str(error))
        if explained is None:
            stepped = self._stepped_parameter(str(error))
            if stepped is not None:
                return self._stale_after_step(error, site, *stepped)
        if explained is None or explained[0].site is None:
            return self._observe(
                "TL001", site, "a tensor autograd saved for backward was modified in place before backward; "
                "use the out-of-place op (`x = x + 1`, not `x += 1`) or `.clone()` first",
                _first_sentence(error))
        write, info = explained
        what = f"the output of {info['node']}" if info.get("node") else "a saved input"
        return self._observe(
            "TL001", write.site,
            f"`{write.op}` writes in place into {what}, which autograd saved for backward; backward fails "
            f"with 'modified by an inplace operation'; use the out-of-place op or `.clone()` first",
            f"backward at line {site.line} needed {what} (shape {list(write.shape)}) at version "
            f"{info['expected']}; `{write.op}` here moved it to version {info['now']}",
            related=site.stack)

    def _stepped_parameter(self, message: str) -> Optional[Tuple[Any, Any, Dict[str, str]]]:
        """(parameter, optimizer, the error's facts) when the tensor the backward error names is
        a parameter an optimizer stepped after the forward saved it: its shape (or, for a Linear
        weight saved transposed, the reverse), its version now is the one the error reports, and
        the last step that updated it started from a version at or above the saved one and below
        the current one. The optimizers' updates are not recorded as in-place writes (the mode is
        off during a step), so `explain_modified` finds none for them."""
        from torchlint.runtime.detectors.inplace import _MODIFIED

        match = _MODIFIED.search(message)
        if match is None:
            return None
        info = match.groupdict()
        shape = tuple(int(s) for s in info["shape"].replace(" ", "").split(",") if s)
        now, expected = int(info["now"]), int(info["expected"])
        before = self.session.versions_before_step
        for optimizer in list(self.session._optimizers.values()):
            for group in optimizer.param_groups:
                for param in group["params"]:
                    stepped_from = before.get(id(param))
                    if stepped_from is None or not expected <= stepped_from < now or param._version != now:
                        continue
                    if tuple(param.shape) in (shape, shape[::-1]):
                        return param, optimizer, info
        return None

    def _stale_after_step(self, error, site, param, optimizer, info) -> bool:
        name = self.session.param_name(param)
        return self._observe(
            "TL117", site,
            "backward runs through a graph built before an optimizer step changed the weights it saved; "
            "compute the module's output again after the step (or run this backward and its step first)",
            f"`{name}` (shape {list(param.shape)}) was saved by the forward at version {info['expected']}; "
            f"`{type(optimizer).__name__}.step()` updated it in place to version {info['now']} before this "
            f"backward: {_first_sentence(error)}")

    def _leaf_inplace(self, error, family, op, modules, site) -> bool:
        shown = f" on {describe(op.operands[0][1])}" if op is not None and op.operands else ""
        return self._observe(
            "TL001", site, "an in-place write into a leaf tensor that requires grad; do it under "
            "`torch.no_grad()` (an update) or write into a copy",
            f"`{op.op if op else 'in-place op'}`{shown}: {_first_sentence(error)}")

    def _no_grad_backward(self, error, family, op, modules, site) -> bool:
        losses = self.session.losses
        tensor = op.operands[0][1] if op is not None and op.operands else None
        if op is not None and not op.grad_enabled:
            origin_text = "backward() itself ran under no_grad"
        else:
            origin = losses.no_grad_origin(tensor) if tensor is not None else None
            if origin is None:
                return False
            origin_text = f"the tensor was computed under no_grad/inference_mode at line {origin.line}"
        return self._observe(
            "TL104", site, "backward() on a result computed without autograd always fails; compute the loss "
            "outside `torch.no_grad()` / `torch.inference_mode()`",
            f"{_first_sentence(error)} ({origin_text}; requires_grad = "
            f"{getattr(tensor, 'requires_grad', None)}, grad_fn = {getattr(tensor, 'grad_fn', None)})")

    def _backward_twice(self, error, family, op, modules, site) -> bool:
        cached = self.session.module_state.cached_graph_attributes()
        if not cached:
            return False
        module, attr, tensor = cached[0]
        cls = type(module)
        lines = project.attribute_lines(cls, attr)
        span = project.class_span(cls)
        if not lines:
            return False
        path, line = lines[0]
        return self._observe(
            "TL006", None,
            f"`self.{attr}` carries a tensor and its graph from one forward into the next, so the next "
            f"backward walks into a freed graph; store `.detach()`ed state",
            f"{_first_sentence(error)} `{cls.__name__}.{attr}` ({describe(tensor)}, grad_fn "
            f"{tensor.grad_fn.name()}) was set in an earlier forward",
            path=path, line=line, related=tuple(lines) + site.stack, spans=(span,) if span else ())

    def _batchnorm_rank(self, error, family, op, modules, site) -> bool:
        """Only when the innermost module the error went through is a BatchNorm (InstanceNorm
        and user modules word their rank errors alike)."""
        import torch

        norm = modules[0] if modules else None
        if not isinstance(norm, torch.nn.modules.batchnorm._BatchNorm):
            return False
        built = self.session.construction.batchnorm_site(norm)
        return self._observe(
            "TL113", site, f"`{type(norm).__name__}({norm.num_features})` is given a tensor of a rank it does not "
            "take (BatchNorm1d: 2-D or 3-D, BatchNorm2d: 4-D, BatchNorm3d: 5-D); use the BatchNorm that matches "
            "the features", f"ValueError: {_first_sentence(error)}"
            + (f" (the {type(norm).__name__} was built at line {built[1]})" if built else ""),
            related=(built,) if built else ())

    def _zero_dim_index(self, error, family, op, modules, site) -> bool:
        shown = ""
        if op is not None and op.operands:
            tensor = op.operands[0][1]
            try:
                shown = f" (the tensor is 0-dim: value {float(tensor):.6g})"
            except Exception:  # noqa: BLE001
                shown = f" ({describe(tensor)})"
        return self._observe("TL201", site, "indexing a 0-dim tensor (`loss.data[0]`) fails since PyTorch 0.4; "
                             "use `loss.item()`", f"IndexError: {_first_sentence(error)}{shown}")

    def _signature_direct(self, error, family, op, modules, site) -> bool:
        """A code recognised by its exception alone (signatures.py), reported at the user's line
        with the advice the signature table gives for it."""
        advice = signatures.RUN_ADVICE.get(family) or signatures.title(family)
        return self._observe(family, site, advice, f"{type(error).__name__}: {_first_sentence(error)}")

    def _numpy_of_grad(self, error, family, op, modules, site) -> bool:
        """`x.numpy()` of a tensor that requires grad is TL116; the same error from a NumPy or
        matplotlib call on the line (`np.mean(losses)`: NumPy converting a list of them) is TL130."""
        text = ""
        if site is not None:
            try:
                import linecache

                text = linecache.getline(site.path, site.line)
            except Exception:  # noqa: BLE001 - no source: TL116
                text = ""
        if text and ".numpy(" not in text and re.search(r"\b(?:np|numpy|plt|pyplot)\.\w+\(", text):
            return self._observe("TL130", site, "NumPy converted a list of tensors that require grad; append "
                                 "`loss.item()` (or `.detach()`) instead", f"{type(error).__name__}: "
                                 f"{_first_sentence(error)}")
        return self._signature_direct(error, family, op, modules, site)

    def _without_forward(self, error, family, op, modules, site) -> bool:
        """A module class without `forward` was called: reported at the call, and at the class's
        lines, where the static finding sits."""
        module = _unimplemented_module_in(error)
        span = project.class_span(type(module)) if module is not None else None
        name = type(module).__name__ if module is not None else "the module"
        return self._observe(family, site, f"`{name}` has no `forward` method (is it nested inside another "
                             f"method?), so calling it raises", f"{type(error).__name__}: {_first_sentence(error)}",
                             spans=(span,) if span else ())

    def _container_called(self, error, family, op, modules, site) -> bool:
        """A plain list/tuple/dict of layers called as if it were a module (`self.layers(x)`): the
        module whose method raised is the innermost user frame's `self`; its container attributes
        holding modules are what was called, built at the `__init__` lines that assign them."""
        import torch

        frame = self.session.frames.innermost_of_traceback(error.__traceback__)
        owner = frame.f_locals.get("self") if frame is not None else None
        if not isinstance(owner, torch.nn.Module):
            return False
        held = [(name, value) for name, value in vars(owner).items()
                if type(value) in (list, tuple, dict) and any(isinstance(item, torch.nn.Module) for item in
                                                              (value.values() if type(value) is dict else value))]
        if not held:
            return False
        lines = tuple(line for name, _ in held
                      for line in project.attribute_lines(type(owner), name, methods=["__init__"]))
        name, value = held[0]
        layers = list(value.values()) if type(value) is dict else list(value)
        shown = ", ".join(type(m).__name__ for m in layers[:4]) + (", ..." if len(layers) > 4 else "")
        return self._observe(
            "TL101", site,
            f"`self.{name}` is a plain {type(value).__name__} of layers: it cannot be called and its parameters "
            "are not registered; use `nn.Sequential(...)` (or `nn.ModuleList` and a loop)",
            f"{type(error).__name__}: {_first_sentence(error)}; `{type(owner).__name__}.{name}` holds "
            f"{len(layers)} modules ({shown})", related=lines)

    def _legacy_direct(self, error, family, op, modules, site) -> bool:
        messages = {
            "TL203": "`backward(retain_variables=...)` was removed; use `retain_graph=`",
            "TL205": "an autograd.Function with a non-static `forward` is no longer supported; write "
                     "`@staticmethod forward(ctx, ...)` and call `Function.apply(...)`",
        }
        spans = ()
        if family == "TL205":  # a static finding may sit on the Function class rather than the call
            function = _autograd_function_in(error)
            span = project.class_span(type(function)) if function is not None else None
            spans = (span,) if span else ()
        return self._observe(family, site, messages[family], f"{type(error).__name__}: {_first_sentence(error)}",
                             spans=spans)

    def _api_removed(self, error, family, op, modules, site) -> bool:
        change = signatures.removed_api(type(error).__name__, str(error))
        if change is None:
            return False
        since = f" (removed in {change.changed_in})" if change.changed_in else ""
        return self._observe(family, site, f"`{change.api}` was removed{since}; use {change.replacement}",
                             f"{type(error).__name__}: {_first_sentence(error)}")

    def _rejected_call(self, error, family, op, modules, site) -> bool:
        """A binding TypeError of a signature-table callable (TL216): only when the exception left
        the user's code at the call, and below that frame only torch's own frames ran (the
        binding itself, or `RNNBase.__init__` under `nn.LSTM`); a user function of the same
        message is the script's own failure."""
        parsed = signatures.rejected_call(str(error))
        if parsed is None or not _only_torch_below_user(error, self.session.frames.is_user_file):
            return False
        advice = signatures.rejected_call_advice(*parsed)
        if advice is None:
            return False
        return self._observe(family, site, advice, f"TypeError: {_first_sentence(error)}")

    def _syntax(self, error: SyntaxError) -> bool:
        if not signatures.is_async_keyword_syntax_error(error.text) or not error.filename or not error.lineno:
            return False
        import os

        return self._observe(
            "TL204", None, "`async=True` is a syntax error since Python 3.7 (async is a keyword); use "
            "`non_blocking=True`", f"SyntaxError: {error.msg} in `{(error.text or '').strip()}`",
            path=os.path.abspath(error.filename), line=error.lineno)


def _only_torch_below_user(error: BaseException, is_user_file) -> bool:
    """Every frame after the innermost user frame of the traceback is torch's (or there is none:
    the call's binding raised in the user's frame)."""
    import os

    import torch

    root = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    users = [i for i, name in enumerate(frames) if is_user_file(name)]
    if not users:
        return False
    return all(os.path.abspath(name).startswith(root) for name in frames[users[-1] + 1:])


def _unimplemented_module_in(error: BaseException) -> Any:
    """The module whose missing `forward` raised (the `self` of nn.Module's `_forward_unimplemented`)."""
    import torch

    tb = error.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, torch.nn.Module) and tb.tb_frame.f_code.co_name == "_forward_unimplemented":
            return owner
        tb = tb.tb_next
    return None


def _autograd_function_in(error: BaseException) -> Any:
    """The legacy autograd.Function instance whose call raised (the `self` of a traceback frame)."""
    import torch

    tb = error.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, torch.autograd.Function):
            return owner
        tb = tb.tb_next
    return None


def _op_from_traceback(error: BaseException) -> Optional[OpFailure]:
    """Inside library layers the TorchFunctionMode is off, so the failing op was not seen: take the
    operands from the innermost frames of the traceback instead (the tensors among their locals,
    and the parameters of the module whose forward it is: `input`, `self.weight`)."""
    import torch

    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    innermost = list(reversed(frames[-30:]))
    # a layer's forward says most (`input` and `self.weight`); else any frame holding tensors
    for wants_module in (True, False):
        for frame in innermost:
            try:
                variables = dict(frame.f_locals)
            except Exception:  # noqa: BLE001
                continue
            owner = variables.get("self")
            is_module = isinstance(owner, torch.nn.Module)
            if wants_module and not is_module:
                continue
            operands = [(name, value) for name, value in variables.items() if isinstance(value, torch.Tensor)]
            if is_module and "_parameters" in owner.__dict__:  # not a module whose __init__ raised early
                operands += [(f"self.{name}", value) for name, value in owner.named_parameters(recurse=False)]
            if operands:
                name = f"{type(owner).__name__}.{frame.f_code.co_name}" if is_module else frame.f_code.co_name
                return OpFailure(error, name, operands[:6], None, torch.is_grad_enabled())
    return None


def _placement(model: Any) -> Dict[str, List[str]]:
    """device -> the names of the (top-level) submodules whose parameters or buffers are there."""
    placement: Dict[str, List[str]] = {}
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        owner = name.rsplit(".", 1)[0] if "." in name else "(the model itself)"
        names = placement.setdefault(str(tensor.device), [])
        if owner not in names:
            names.append(owner)
    return placement


def _names(names: List[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _first_sentence(error: BaseException, limit: int = 200) -> str:
    text = " ".join(str(error).split())
    for stop in (" Hint:", " HINT:"):
        if stop in text:
            text = text[: text.index(stop)]
    if len(text) > limit:
        cut = text.rfind(". ", 0, limit)
        text = text[: cut + 1] if cut > 40 else text[: limit - 1] + "…"
    return text
