"""The instrumentation of one run, installed through PyTorch's public hooks only:

- global module forward pre-hooks and (always-called) forward hooks
  (`torch.nn.modules.module.register_module_forward_pre_hook` / `..._forward_hook`);
- a global parameter-registration hook (`..._parameter_registration_hook`: a layer built inside a
  forward, TL112);
- global optimizer step pre/post hooks (`torch.optim.optimizer.register_optimizer_step_*_hook`);
- a `TorchFunctionMode` that sees the torch functions and tensor methods the user's code calls (it
  is switched off while a library module's forward runs — nn.Linear, nn.TransformerEncoderLayer
  — and back on in the user's own modules and in loss modules: most ops of a model run inside
  library layers, and routing each of them through Python would cost more than everything else);
- for a few out-of-place ops (`.to()`, `.float()`, `.view()`, `F.dropout`), whether the user's
  frame discards the result (TL110, detectors/discarded.py);
- `torch.autograd.graph.saved_tensors_hooks` (bytes of saved tensors; see detectors/memory.py);
- per-parameter tensor hooks and grad_fn pre-hooks (TL002, TL003, TL106);
- `warnings.showwarning`, wrapped (warnings still print as they would).

Every hook does as little as it can and never lets an error of its own reach the user's program
(it is counted and shown in the report). Hooks run on the main thread only: DataParallel
replicas and DataLoader threads are left alone, and a forked DataLoader worker turns everything
off (`os.register_at_fork`).
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import torch
from torch.nn.modules import module as nn_module
from torch.optim import optimizer as optim_module
from torch.overrides import TorchFunctionMode

from torchlint.runtime import signatures
from torchlint.runtime.detectors import discarded
from torchlint.runtime.detectors import augmentation, thresholds
from torchlint.runtime.detectors.aliases import SHAPE_IN_PLACE, Aliases
from torchlint.runtime.detectors.construction import Construction
from torchlint.runtime.detectors.failures import Failures
from torchlint.runtime.detectors.gradients import Gradients
from torchlint.runtime.detectors.inplace import InPlace
from torchlint.runtime.detectors.losses import FUNCTIONAL_LOSSES, SIGMOID_LOSSES, SOFTMAX_LOSSES, Losses
from torchlint.runtime.detectors.memory import Memory
from torchlint.runtime.detectors.module_state import ModuleState
from torchlint.runtime.detectors.modes import Modes
from torchlint.runtime.forward_shapes import ForwardShapes
from torchlint.runtime.detectors.retention import Retention
from torchlint.runtime.detectors.unreached import Unreached
from torchlint.runtime.detectors.wiring import Wiring
from torchlint.runtime.frames import Site, UserFrames, caller_of_module_call
from torchlint.runtime.launcher import StopRun
from torchlint.runtime.observation import Observation, Observations
from torchlint.runtime.shapes import ShapeRecorder, ShapeTrace

_USER_MODULE, _LOSS_MODULE, _DROPOUT_MODULE, _RANDOM_TRANSFORM = 1, 2, 4, 8
_IN_PLACE_DUNDERS = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
                     "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__",
                     "__setitem__"}
# in-place by name, but they change autograd's bookkeeping, not the data
_NOT_WRITES = {"requires_grad_", "share_memory_", "detach_", "retain_grad", "record_stream"}
_ARITHMETIC = {"add", "__add__", "__radd__", "__iadd__", "sub", "__sub__", "__rsub__", "__isub__", "mul",
               "__mul__", "__rmul__", "__imul__", "div", "__truediv__", "__rtruediv__", "__itruediv__", "stack",
               "cat", "sum", "mean", "add_", "mul_", "div_", "sub_"}

_ACTIVE: List[Optional["Session"]] = [None]
# layers whose construction line the run notes (outside forwards): a rank or shape error raised
# inside one points there (TL113, TL301)
_REMEMBERED_LAYERS = (torch.nn.modules.batchnorm._BatchNorm, torch.nn.Linear, torch.nn.modules.conv._ConvNd)
_BATCHNORM = torch.nn.modules.batchnorm._BatchNorm
# Our own hook code reads tensor attributes (versions, grad_fn) and calls a few torch functions:
# without this, each of those would go through the TorchFunctionMode as if the script had made it.
_QUIET = torch._C.DisableTorchFunction


def _after_fork_in_child() -> None:
    session = _ACTIVE[0]
    if session is not None:
        session.disabled = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@dataclass
class Options:
    max_steps: int = 20
    health_steps: int = 5
    vanishing: float = 1e-7
    exploding: float = 1e3
    find_holders: bool = False
    saved_tensors: bool = True
    saved_tensors_every: Optional[int] = None  # hooks on in one step of this many; None: decided (memory.py)
    curve_steps: int = 0  # gradient norms kept for the curves of the HTML report up to this step


class _Mode(TorchFunctionMode):
    def __init__(self, session: "Session") -> None:
        super().__init__()
        self._session = session
        self._handlers: Dict[Any, Optional[Callable]] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        session = self._session
        if session.disabled or session.busy or session.stepping:
            return func(*args, **kwargs)
        try:
            handler = self._handlers[func]
        except KeyError:
            handler = self._handlers[func] = session.handler_for(func)
        except TypeError:  # an unhashable callable
            handler = None
        if handler is None:
            try:
                return func(*args, **kwargs)
            except Exception as error:
                session.op_failed(func, args, kwargs, error)
                raise
        return handler(func, args, kwargs)


class Session:
    def __init__(self, options: Options, is_user_file: Callable[[str], bool]) -> None:
        self.options = options
        self.frames = UserFrames(is_user_file)
        self.observations = Observations()
        self.disabled = False
        self.busy = False  # our own code is calling torch: the mode passes everything through
        self.stepping = False  # inside an optimizer step without a closure: its update ops pass through too
        self.internal_errors: List[str] = []
        self.internal_error_count = 0
        self.notes: List[str] = []  # what the run could not watch (shown, not an error)
        self.iteration = 0  # steps of the first optimizer that stepped
        self.stop_reason = ""
        self.stopping = False  # a StopRun was raised; any later hook of a training step raises it again
        self.stop_caught = 0  # ... and found the script still training (it caught the StopRun)
        # called (it writes the report and ends the process) when the script catches the stop
        # RUNAWAY_AFTER times; None: keep raising
        self.on_runaway: Optional[Callable[[], None]] = None
        self.manual = _ManualSteps(self)  # hand-written updates (no torch.optim optimizer)
        self.backwards = 0  # Tensor.backward calls seen
        self.step_of_last_step = 0
        self._main_thread = threading.get_ident()
        self._depth = 0
        self._kinds: Dict[type, int] = {}
        self._steps: Dict[int, int] = {}
        self._primary: Optional[int] = None
        self._in_step = 0
        self._roots: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
        self._root_order: List[int] = []
        self._param_names: Dict[int, str] = {}
        self._optimizers: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
        # id(parameter) -> its version counter just before the last optimizer step that updated it
        # (TL117: a backward error names a tensor at a version only a step can have given it)
        self.versions_before_step: Dict[int, int] = {}
        self._main_namespace: Optional[dict] = None
        self._handles: List[Any] = []
        self._mode: Optional[_Mode] = None
        self._mode_on = False
        self._mode_switched: List[bool] = []  # per running module call: did its pre-hook switch the mode?
        self._step_switched: List[bool] = []  # the same for running optimizer steps
        self._showwarning = None

        self.memory = Memory(options.saved_tensors_every)
        self.memory.parameter_storages = self.parameter_storages
        self.gradients = Gradients(self)
        self.retention = Retention(self)
        self.unreached = Unreached(self)
        self.aliases = Aliases(self)
        self.thresholds = thresholds.Thresholds(self)
        self.augmentation = augmentation.Augmentation(self)
        self.module_state = ModuleState(self)
        self.inplace = InPlace(self)
        self.modes = Modes(self)
        self.losses = Losses(self)
        self.failures = Failures(self)
        self.forward_shapes = ForwardShapes()
        self.construction = Construction(self)
        self.modules_ran: Optional[set] = set()  # ids of the modules called so far (TL133; None: done)
        self.wiring = Wiring(self)
        self.discarded = discarded.Discarded(self)
        self.shapes = ShapeRecorder()
        # code -> the user lines where a detector that watches values saw its situation
        # (signatures.WATCHED_AT_LINES): only there can a finding have run without harm
        self.watched: Dict[str, Set[Tuple[str, int]]] = {}

    # -- install / uninstall ---------------------------------------------------------------------------
    def install(self) -> None:
        _ACTIVE[0] = self
        self._handles.append(nn_module.register_module_forward_pre_hook(self._forward_pre))
        self._handles.append(nn_module.register_module_forward_hook(self._forward_post, always_call=True))
        self._handles.append(nn_module.register_module_parameter_registration_hook(self._parameter_registered))
        self._handles.append(nn_module.register_module_buffer_registration_hook(self._buffer_registered))
        self._handles.append(optim_module.register_optimizer_step_pre_hook(self._step_pre))
        self._handles.append(optim_module.register_optimizer_step_post_hook(self._step_post))
        if self.options.saved_tensors and not self.memory.install():
            self.notes.append("saved-tensor hooks are disabled in this process: no saved-tensor bytes")
        self._mode = _Mode(self)
        self._mode.__enter__()
        self._mode_on = True
        self._showwarning = warnings.showwarning
        warnings.showwarning = self._on_warning

    def uninstall(self, ending_process: bool = False) -> None:
        """Remove every hook. `ending_process`: called from inside a hook of the running script,
        just before the process ends (our mode may be off the stack for the hook's duration)."""
        self.busy = True
        if self._mode is not None:
            if self._mode_on and not self._set_mode(False) and not ending_process:
                self.notes.append("a TorchFunctionMode of the script was still active at the end")
            self._mode = None
        self.memory.uninstall()
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.gradients.remove_hooks()
        if warnings.showwarning == self._on_warning:  # bound methods compare equal, never identical
            warnings.showwarning = self._showwarning
        self.disabled = True
        if _ACTIVE[0] is self:
            _ACTIVE[0] = None

    def shape_trace(self) -> Optional[ShapeTrace]:
        """The shape trace of the forward that raised last (None when none did)."""
        try:
            with _QUIET():
                trace = self.shapes.trace()
                if trace is not None:
                    self.shapes.complete_with(trace, self.forward_shapes.failed_trace)
                return trace
        except Exception as error:  # noqa: BLE001
            self.internal_error(error)
            return None

    def set_main_namespace(self, namespace: Optional[dict]) -> None:
        self._main_namespace = namespace

    def main_namespace(self) -> Optional[dict]:
        return self._main_namespace

    # -- helpers the detectors use ------------------------------------------------------------------------
    def site(self) -> Optional[Site]:
        return self.frames.site(sys._getframe(1))

    def user_frames(self) -> List[Any]:
        frames = []
        frame = sys._getframe(1)
        while frame is not None:
            if self.frames.is_user_file(frame.f_code.co_filename):
                frames.append(frame)
            frame = frame.f_back
        return frames

    def lines_matching(self, pattern: Any) -> Tuple[Tuple[str, int], ...]:
        """The lines of the user's files on the stack (and of the script) whose code, comments left
        out, matches `pattern`: where a value the run sees was built, when no hook saw it built."""
        files = {frame.f_code.co_filename for frame in self.user_frames()}
        main = sys.modules.get("__main__")
        if isinstance(getattr(main, "__file__", None), str) and self.frames.is_user_file(main.__file__):
            files.add(main.__file__)
        found: List[Tuple[str, int]] = []
        for path in sorted(files):
            try:
                with open(path, encoding="utf-8") as handle:
                    found.extend((path, number) for number, text in enumerate(handle, 1)
                                 if pattern.search(text.split("#", 1)[0]))
            except (OSError, UnicodeDecodeError):
                continue
        return tuple(found)

    def watch(self, code: str, lines: Any) -> None:
        """`lines`: (path, line) pairs where a value-watching detector saw the situation of `code`."""
        self.watched.setdefault(code, set()).update(lines)

    def unobservable(self, code: str, path: str, line: int) -> Optional[str]:
        """Why the run cannot tell whether a finding of `code` at this line, which ran, did harm
        (None: it can)."""
        why = signatures.unobservable(code)
        if why is not None or code not in signatures.WATCHED_AT_LINES:
            return why
        lines = self.watched.get(code, ())
        from torchlint.runtime.project import statement_span

        first, last = statement_span(path, line)
        if any(p == path and first <= seen <= last for p, seen in lines):
            return None
        return "its line ran, but " + signatures.WATCHED_AT_LINES[code]

    def observe(self, code: str, site: Optional[Site], message: str, evidence: str,
                **extra: Any) -> Optional[Observation]:
        return self.observations.add(code, site, message, evidence, **extra)

    def internal_error(self, error: BaseException) -> None:
        self.internal_error_count += 1
        if len(self.internal_errors) < 5:
            import traceback

            frame = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
            where = f" ({os.path.basename(frame.filename)}:{frame.lineno})" if frame else ""
            self.internal_errors.append(f"{type(error).__name__}: {error}{where}")

    def stop(self, reason: str = "") -> None:
        """End the script (raise StopRun). A second call means the first StopRun never reached
        the launcher: the script caught it (a bare `except:`); after RUNAWAY_AFTER of those the
        report is written and the process ends (`on_runaway`)."""
        if self.stopping:
            self.stop_caught += 1
            if self.stop_caught >= RUNAWAY_AFTER and self.on_runaway is not None:
                runaway, self.on_runaway = self.on_runaway, None
                runaway()  # does not return
        else:
            self.stopping = True
            self.stop_reason = reason
        raise StopRun(self.stop_reason)

    def step_of(self, optimizer: Any) -> int:
        return self._steps.get(id(optimizer), 0)

    def total_steps(self) -> int:
        return max(list(self._steps.values()) + [self.manual.steps])

    def param_name(self, param: Any) -> str:
        name = self._param_names.get(id(param))
        if name is None:
            self._name_parameters()
            name = self._param_names.get(id(param))
        return name or f"<parameter {tuple(param.shape)}>"

    def _name_parameters(self) -> None:
        """Parameter names from the models the script called: `fc.weight` with one model, the
        model's variable name first with several (`discriminator.0.weight`)."""
        roots = [self._roots.get(key) for key in self._root_order]
        roots = [r for r in roots if r is not None and any(True for _ in r.parameters())]
        names = self._variable_names(roots) if len(roots) > 1 else {}
        seen: Set[int] = set()
        for root in sorted(roots, key=lambda r: -sum(1 for _ in r.parameters())):
            prefix = "" if len(roots) == 1 else names.get(id(root), type(root).__name__) + "."
            for name, param in root.named_parameters():
                if id(param) not in seen:
                    seen.add(id(param))
                    self._param_names[id(param)] = prefix + name

    def _variable_names(self, roots: List[Any]) -> Dict[int, str]:
        """The names the script's frames (and globals) bind the models to."""
        wanted = {id(root) for root in roots}
        found: Dict[int, str] = {}
        scopes = [frame.f_locals for frame in self.user_frames()]
        if self._main_namespace is not None:
            scopes.append(self._main_namespace)
        for scope in scopes:
            for name, value in list(scope.items()):
                if id(value) in wanted and id(value) not in found and not name.startswith("_"):
                    found[id(value)] = name
        return found

    def parameter_storages(self) -> Set[Any]:
        """The storage keys of the parameters of the models the script called and of its
        optimizers: what no graph's byte count includes (graph.py)."""
        from torchlint.runtime.graph import storage_keys

        tensors: List[Any] = []
        for root in list(self._roots.values()):
            tensors.extend(root.parameters())
        for optimizer in list(self._optimizers.values()):
            for group in optimizer.param_groups:
                tensors.extend(group["params"])
        return storage_keys(tensors)

    def optimized_parameter_ids(self) -> Set[int]:
        found: Set[int] = set()
        for optimizer in list(self._optimizers.values()):
            for group in optimizer.param_groups:
                found.update(id(p) for p in group["params"])
        return found

    def main_model(self, prefer: Any = None) -> Any:
        """The model a failure is about: the outermost module the exception went through, else the
        most recently called model with parameters."""
        if prefer is not None and any(True for _ in prefer.parameters()):
            return prefer
        for key in reversed(self._root_order):
            root = self._roots.get(key)
            if root is not None and any(True for _ in root.parameters()):
                return root
        return None

    def _set_mode(self, on: bool) -> bool:
        """Switch the TorchFunctionMode on or off; False when it stays as it is (already so, or
        the script pushed a mode of its own on top of ours)."""
        mode = self._mode
        if mode is None or on == self._mode_on:
            return False
        if on:
            mode.__enter__()
        else:
            if torch.overrides._get_current_function_mode() is not mode:
                return False
            mode.__exit__(None, None, None)
        self._mode_on = on
        return True

    # -- module hooks ----------------------------------------------------------------------------------
    def _kind_of(self, cls: type) -> int:
        kind = 0
        forward = getattr(cls, "forward", None)
        code = getattr(forward, "__code__", None)
        if code is not None and self.frames.is_user_file(code.co_filename):
            kind |= _USER_MODULE
        if cls.__name__.endswith("Loss") or issubclass(cls, torch.nn.modules.loss._Loss):
            kind |= _LOSS_MODULE  # its input is checked in F.cross_entropy etc., which it calls
        if issubclass(cls, torch.nn.modules.dropout._DropoutNd):
            kind |= _DROPOUT_MODULE  # TL123: one built in forward is in training mode in an evaluation
        if augmentation.is_random_transform(cls):
            kind |= _RANDOM_TRANSFORM  # TL132: random augmentation while evaluating
        self._kinds[cls] = kind
        return kind

    def _parameter_registered(self, module: Any, name: str, param: Any) -> None:
        """TL112: a parameter registered while a forward runs belongs to a layer built in it.
        Outside a forward, where each BatchNorm is built (TL113's run finding points there)."""
        if self.disabled or self.busy or threading.get_ident() != self._main_thread:
            return None
        try:
            with _QUIET():
                if self._depth == 0:
                    if name == "weight" and isinstance(module, _REMEMBERED_LAYERS):
                        self.construction.remember_batchnorm(module, sys._getframe(1))
                elif param is not None:
                    self.construction.parameter_registered(module, name, param, sys._getframe(1))
        except Exception as error:  # noqa: BLE001
            self.internal_error(error)
        return None

    def _buffer_registered(self, module: Any, name: str, buffer: Any) -> None:
        """TL112 for a BatchNorm without parameters (`affine=False`) built while a forward runs: it
        registers its running statistics instead."""
        if self._depth == 0 or self.disabled or self.busy or threading.get_ident() != self._main_thread:
            return None
        try:
            if name == "running_mean" and buffer is not None and isinstance(module, _BATCHNORM) \
                    and not module.affine:
                with _QUIET():
                    self.construction.parameter_registered(module, name, buffer, sys._getframe(1))
        except Exception as error:  # noqa: BLE001
            self.internal_error(error)
        return None

    def _forward_pre(self, module: Any, args: tuple) -> None:
        if self.disabled or threading.get_ident() != self._main_thread:
            return None
        depth = self._depth
        if depth == 0 and self._mode_switched:  # left over by a forward that raised a BaseException
            self._mode_switched.clear()
            self._set_mode(not self.stepping)
        self._depth = depth + 1
        ran = self.modules_ran
        if ran is not None:  # TL133: until the check at wiring.UNUSED_AFTER steps
            ran.add(id(module))
        kind = 0
        try:
            kind = self._kinds.get(type(module))
            if kind is None:
                kind = self._kind_of(type(module))
            if depth == 0 or kind & _USER_MODULE or self.inplace.input_ids:
                with _QUIET():
                    if depth == 0:
                        self._root_pre(module, args)
                    if kind & _USER_MODULE:
                        self.inplace.before_forward(module, args)
                        self.module_state.before_forward(module)
                    elif self.inplace.input_ids:
                        self.inplace.before_library_call(module, args)
            if kind & _DROPOUT_MODULE and depth and module.training:
                with _QUIET():
                    self.wiring.dropout_module(module, caller_of_module_call(sys._getframe(1)))
            watched = self.module_state.watched
            if watched and id(module) in watched:
                self.module_state.called.add(id(module))
        except Exception as error:  # noqa: BLE001
            self.internal_error(error)
        try:
            self.forward_shapes.enter(module, args, depth)
        except Exception as error:  # noqa: BLE001
            self.internal_error(error)
        try:  # exactly one entry per call: the post-hook pops it
            switched = self._set_mode(bool(kind & (_USER_MODULE | _LOSS_MODULE)))
        except Exception as error:  # noqa: BLE001
            self.internal_error(error)
            switched = False
        self._mode_switched.append(switched)
        return None

    def _root_pre(self, module: Any, args: tuple) -> None:
        key = id(module)
        self.wiring.root = weakref.ref(module)
        if key not in self._roots:
            self._roots[key] = module
            self._param_names.clear()
        if not self._root_order or self._root_order[-1] != key:
            if key in self._root_order:
                self._root_order.remove(key)
            self._root_order.append(key)
        self.module_state.scan_root(module)
        grad = torch.is_grad_enabled()
        self.wiring.root_call(module, grad)
        if (not grad and module.training) or (grad and any(p.requires_grad for p in module.parameters())):
            caller = caller_of_module_call(sys._getframe(1))
            if caller is not None and self.frames.is_user_file(caller.f_code.co_filename):
                self.modes.call_starts(module, self.frames.site(caller), grad, torch.is_inference_mode_enabled())

    def _forward_post(self, module: Any, args: tuple, output: Any) -> None:
        if self.disabled or threading.get_ident() != self._main_thread:
            return None
        self._depth = depth = max(self._depth - 1, 0)
        try:
            if self._mode_switched and self._mode_switched.pop():
                self._set_mode(not self._mode_on)
            failing = sys.exc_info()[1] if output is None else None
            self.forward_shapes.leave(module, output, failing is not None)
            if failing is not None:  # the always-called hook on the exception path
                self.failures.module_failed(module, failing)
                with _QUIET():
                    self.shapes.module_raised(module, args, failing)
                self.inplace.forward_failed(module)
                self.module_state.forward_failed(module)
                if depth == 0:
                    self.modes.call_ends(module, None)
                return None
            kind = self._kinds.get(type(module), 0)
            if not (kind or depth == 0 or self.inplace.watching):
                return None
            with _QUIET():
                if kind & _USER_MODULE:
                    self.inplace.after_forward(module, args)
                    self.module_state.after_forward(module)
                elif self.inplace.watching:
                    self.inplace.after_library_call(module)
                if kind & _LOSS_MODULE:
                    self.losses.after_loss(output, self.site(), args)
                if kind & _RANDOM_TRANSFORM and not self.busy:
                    self._detect(self.augmentation.transform_ran, module, args, output)
                if depth == 0:
                    self.modes.call_ends(module, output)
                    if not torch.is_grad_enabled() and isinstance(output, torch.Tensor):
                        self.losses.mark_no_grad(output, self.site())
        except StopRun:
            raise
        except Exception as error:  # noqa: BLE001
            self.internal_error(error)
        return None

    # -- optimizer hooks -------------------------------------------------------------------------------
    def _step_pre(self, optimizer: Any, args: tuple, kwargs: dict) -> None:
        if self.disabled:
            return None
        if self.stopping and threading.get_ident() == self._main_thread:
            self.stop()  # the script caught our stop and trains on: stop again, before this update
        if self._in_step == 0 and self._step_switched:  # a step that raised never ran its post-hook
            self._step_switched.clear()
            self._set_mode(True)
        self.busy = True
        try:
            self._optimizers[id(optimizer)] = optimizer
            if self._primary is None:
                self._primary = id(optimizer)
            closure = _has_closure(args, kwargs)
            if not closure:
                versions = self.versions_before_step
                for group in optimizer.param_groups:
                    for param in group["params"]:
                        versions[id(param)] = param._version
            with _QUIET():
                self.gradients.before_step(optimizer, closure)
                if id(optimizer) == self._primary:
                    self.retention.check()
                if not closure:
                    self.wiring.before_step(optimizer, self.frames.innermost(sys._getframe(1)))
                    self.unreached.at_step(optimizer)
        except Exception as error:  # noqa: BLE001
            self.internal_error(error)
        finally:
            self.busy = False
        self._in_step += 1
        # The update's own ops are not the script's: the mode is off during a step, except for a
        # closure's step, whose forward and backward run inside it.
        self.stepping = not _has_closure(args, kwargs)
        self._step_switched.append(self._set_mode(False) if self.stepping else False)
        return None

    def _step_post(self, optimizer: Any, args: tuple, kwargs: dict) -> None:
        self._in_step = max(self._in_step - 1, 0)
        self.stepping = False
        if self._step_switched and self._step_switched.pop():
            self._set_mode(True)
        if self.disabled:
            return None
        self.busy = True
        try:
            step = self._steps[id(optimizer)] = self._steps.get(id(optimizer), 0) + 1
            self.step_of_last_step = step
            with _QUIET():
                self.gradients.after_step(optimizer, _has_closure(args, kwargs), step)
                self.wiring.after_step(optimizer, self.frames.innermost(sys._getframe(1)))
                if id(optimizer) == self._primary:
                    self.iteration += 1
                    self.module_state.after_step()
                    self.memory.after_step(step)
        except Exception as error:  # noqa: BLE001
            self.internal_error(error)
        finally:
            self.busy = False
        limit = self.options.max_steps
        if limit and step >= limit and threading.get_ident() == self._main_thread:
            self.stop(f"stopped after {step} optimizer steps (--max-steps {limit})")
        return None

    # -- the TorchFunctionMode ------------------------------------------------------------------------------
    def handler_for(self, func: Any) -> Optional[Callable]:
        handler = self._op_handler_for(func)
        if not discarded.applies(func):
            return handler

        def handle(func, args, kwargs):  # TL110: was the result of an out-of-place op thrown away?
            if handler is not None:
                output = handler(func, args, kwargs)
            else:
                try:
                    output = func(*args, **kwargs)
                except Exception as error:
                    self.op_failed(func, args, kwargs, error)
                    raise
            if not self.busy:
                self._detect(self.discarded.check, func, args, kwargs, output, sys._getframe(1))
            return output

        return handle

    def _op_handler_for(self, func: Any) -> Optional[Callable]:
        name = getattr(func, "__name__", "")
        if type(func).__name__ == "method-wrapper":
            return None  # attribute getters and setters (x.shape, x.grad)
        module = getattr(func, "__module__", "") or ""
        if module == "torch.nn.functional" and name in FUNCTIONAL_LOSSES:
            return self._functional_loss(name)
        if name == "backward" and getattr(func, "__qualname__", "") == "Tensor.backward":
            return self._backward
        if name in _COPIES and (module == "torch" or getattr(func, "__qualname__", "") == f"TensorBase.{name}"):
            return self._copy(name)
        if (name in thresholds.COMPARISONS or name == "round") and \
                (module == "torch" or getattr(func, "__qualname__", "") == f"TensorBase.{name}"):
            return self._threshold(name)
        in_place = name in _IN_PLACE_DUNDERS or (name.endswith("_") and not name.endswith("__")
                                                 and not name.startswith("_") and name not in _NOT_WRITES)
        arithmetic = name in _ARITHMETIC
        if name in SHAPE_IN_PLACE:
            return self._shape_in_place(name, self._op(name, in_place, arithmetic))
        if in_place or arithmetic:
            return self._op(name, in_place, arithmetic)
        if module == "torch.nn.functional" and "inplace" in getattr(getattr(func, "__code__", None), "co_varnames", ()):
            handler = self._op(name, True, False, keyword_only=True)
            if name in _DROPOUTS:
                return self._dropout(handler)
            return handler
        return None

    def _detect(self, detector: Callable[..., Any], *args: Any) -> None:
        """Run one detector call with the session's own dispatch off (`busy`); a failure of the
        detector is an internal error of the run, never the script's."""
        self.busy = True
        try:
            detector(*args)
        except Exception as error:  # noqa: BLE001
            self.internal_error(error)
        finally:
            self.busy = False

    def op_failed(self, func: Any, args: tuple, kwargs: dict, error: BaseException) -> None:
        if self.disabled:
            return
        self._detect(self.failures.op_failed, _op_name(func), args, kwargs, error)

    def _op(self, name: str, in_place: bool, arithmetic: bool, keyword_only: bool = False):
        def handle(func, args, kwargs):
            if in_place and args and not self._in_step and (not keyword_only or kwargs.get("inplace")):
                target = args[0]
                if isinstance(target, torch.Tensor) and ((target.requires_grad and torch.is_grad_enabled())
                                                         or id(target) in self.inplace.input_ids):
                    self._detect(self.inplace.before_write, name, target)
            try:
                output = func(*args, **kwargs)
            except Exception as error:
                self.op_failed(func, args, kwargs, error)
                raise
            if arithmetic and self.retention._tracked:
                self._detect(self.retention.derived, args, output)
            return output

        return handle

    def _threshold(self, name: str) -> Callable:
        """TL129: a comparison with 0.5, or a rounding (logits thresholded at 0.5)."""
        def handle(func, args, kwargs):
            try:
                output = func(*args, **kwargs)
            except Exception as error:
                self.op_failed(func, args, kwargs, error)
                raise
            at_half = len(args) > 1 and type(args[1]) is float and args[1] == 0.5
            if (name == "round" and not kwargs.get("decimals")) or at_half:
                self._detect(self.thresholds.check, name, args[0] if args else kwargs.get("input"), output)
            return output

        return handle

    def _shape_in_place(self, name: str, handler: Callable) -> Callable:
        """TL127: an in-place shape change, perhaps of a temporary alias (`x.data.t_()`)."""
        def handle(func, args, kwargs):
            target = args[0] if args else None
            before = None
            if isinstance(target, torch.Tensor) and target.layout == torch.strided:
                before = (tuple(target.shape), tuple(target.stride()))
            output = handler(func, args, kwargs)
            if before is not None:
                self._detect(self.aliases.check, name, target, before, sys._getframe(1))
            return output

        return handle

    def _copy(self, name: str) -> Callable:
        """TL124: a tensor with a graph read into a new tensor (`torch.Tensor([loss])` probes
        `__index__` first, `torch.tensor(loss)`, `x.new_tensor([loss])`)."""
        def handle(func, args, kwargs):
            value = args[0] if name == "__index__" else (args[1] if name == "new_tensor" and len(args) > 1
                                                         else (args[0] if args else kwargs.get("data")))
            if type(value) in (list, tuple) and value:
                value = value[0]
            if isinstance(value, torch.Tensor) and value.grad_fn is not None and torch.is_grad_enabled():
                self._detect(lambda: self.unreached.copied(value, self.site()))
            try:
                return func(*args, **kwargs)
            except Exception as error:
                if name != "__index__":  # the legacy constructors try `__index__` and fall back to `__float__`
                    self.op_failed(func, args, kwargs, error)
                raise

        return handle

    def _dropout(self, handler: Callable) -> Callable:
        def handle(func, args, kwargs):  # TL123: F.dropout with training=True in a model in eval()
            if self._depth:
                self._detect(self.wiring.dropout_call, args, kwargs)
            return handler(func, args, kwargs)

        return handle

    def _functional_loss(self, name: str):
        checked = name in SOFTMAX_LOSSES or name in SIGMOID_LOSSES

        def handle(func, args, kwargs):
            self.busy = True
            site = None
            try:
                site = self.site()
                if checked:
                    self.losses.before_loss(name, args, kwargs, site)
            except Exception as error:  # noqa: BLE001
                self.internal_error(error)
            finally:
                self.busy = False
            try:
                output = func(*args, **kwargs)
            except Exception as error:
                self.op_failed(func, args, kwargs, error)
                raise
            self._detect(self.losses.after_loss, output, site, args)
            return output

        return handle

    def _backward(self, func, args, kwargs):
        if self.stopping:
            self.stop()
        self.backwards += 1
        tensor = args[0] if args else None
        if isinstance(tensor, torch.Tensor) and tensor.grad_fn is not None and not self.retention.is_tracked(tensor):
            self._detect(lambda: self.retention.track_loss(tensor, self.site(), at_backward=True))
        manual = self.manual
        if manual.active:
            self._detect(manual.before_backward, tensor)
            if manual.stop_now:
                manual.stop_now = False
                self.stop(manual.stop_message())
        try:
            result = func(*args, **kwargs)
        except Exception as error:
            self.op_failed(func, args, kwargs, error)
            raise
        if manual.active:
            self._detect(manual.after_backward)
        return result

    # -- warnings --------------------------------------------------------------------------------------------
    def _on_warning(self, message, category, filename, lineno, file=None, line=None):
        try:
            if not self.disabled and threading.get_ident() == self._main_thread:
                mapped = signatures.run_warning(category.__name__, str(message))
                if mapped is not None:
                    site = self.frames.site(sys._getframe(1))
                    if site is not None:
                        text = " ".join(str(message).split())
                        self.observe(mapped[0], site, mapped[1], f"{category.__name__}: {text[:240]}")
        except Exception as error:  # noqa: BLE001
            self.internal_error(error)
        if isinstance(filename, str) and filename.startswith(_RUNTIME_DIR):
            filename, lineno = _warned_from(sys._getframe(1), filename, lineno)
        showwarning = self._showwarning or warnings._showwarning_orig  # type: ignore[attr-defined]
        return showwarning(message, category, filename, lineno, file, line)

    # -- the end ------------------------------------------------------------------------------------------
    def finish(self, script_ended: bool) -> None:
        """End-of-run checks (the script's globals are still alive)."""
        self.busy = True
        try:
            with _QUIET():
                self.retention.check(final=True)
                self.unreached.finish()
                self.modes.finish(script_ended)
                self.module_state.report_unregistered()
        except Exception as error:  # noqa: BLE001
            self.internal_error(error)
        finally:
            self.busy = False


RUNAWAY_AFTER = 3  # stops the script caught before the report is written and the process ended


class _ManualSteps:
    """Training without a torch.optim optimizer (`p.data -= lr * p.grad`, `p.sub_(...)` under
    no_grad): a step is an update of every trainable parameter between two backwards. After a
    backward, each parameter that got a gradient is fingerprinted — its version counter, its
    storage, and the value at its largest gradient entry (`p.data.add_` does not bump the
    version counter); at the next backward, if every one of them changed and no optimizer stepped
    in between, that was a step: it is counted, sampled like an optimizer step, and --max-steps
    applies. Switched off for good once an optimizer steps."""

    MAX_PARAMETERS = 4096

    def __init__(self, session: "Session") -> None:
        self.session = session
        self.active = True
        self.steps = 0
        self.stop_now = False
        self._prints: List[Tuple[Any, int, int, int, float]] = []
        self._loss: Any = None

    def _parameters(self, loss: Any) -> List[Any]:
        session = self.session
        found: Dict[int, Any] = {}
        for key in session._root_order:
            root = session._roots.get(key)
            if root is not None:
                for param in root.parameters():
                    if param.requires_grad:
                        found.setdefault(id(param), param)
        if not found and isinstance(loss, torch.Tensor) and loss.grad_fn is not None:
            from torchlint.runtime.graph import walk

            # plain leaf tensors (`w = torch.randn(..., requires_grad=True)`)
            for node in walk([loss.grad_fn]).values():
                variable = getattr(node, "variable", None)
                if isinstance(variable, torch.Tensor) and variable.requires_grad:
                    found.setdefault(id(variable), variable)
        return list(found.values())[: self.MAX_PARAMETERS]

    def before_backward(self, loss: Any) -> None:
        session = self.session
        if session._steps or len(session._optimizers) or session._in_step:
            self.active = False  # an optimizer trains this script (LBFGS's closure backwards run inside its step)
            self._prints = []
            return
        prints, self._prints = self._prints, []
        with _QUIET():
            changed = bool(prints) and all(self._changed(item) for item in prints)
        if not changed:
            self._loss = loss
            return
        self.steps += 1
        step = self.steps
        session.iteration += 1
        session.step_of_last_step = step
        session.retention.check()
        session.module_state.after_step()
        session.memory.after_step(step)
        limit = session.options.max_steps
        if limit and step >= limit:
            self.stop_now = True
        self._loss = loss

    def after_backward(self) -> None:
        session = self.session
        if session._steps or len(session._optimizers) or session._in_step:
            self.active = False
            return
        loss, self._loss = self._loss, None
        with _QUIET():
            self._prints = self._fingerprints(loss)

    def _fingerprints(self, loss: Any) -> List[Tuple[Any, int, int, int, float]]:
        prints = []
        for param in self._parameters(loss):
            grad = param.grad
            if grad is None or grad.numel() == 0 or grad.layout != torch.strided or param.is_meta or grad.is_meta:
                continue
            index = int(grad.detach().abs().reshape(-1).argmax())
            value = float(param.detach().reshape(-1)[index])
            prints.append((weakref.ref(param), param._version, param.data_ptr(), index, value))
        return prints

    @staticmethod
    def _changed(item: Tuple[Any, int, int, int, float]) -> bool:
        ref, version, pointer, index, value = item
        param = ref()
        if param is None:
            return False
        if param._version != version or param.data_ptr() != pointer:
            return True
        flat = param.detach().reshape(-1)
        return index < flat.numel() and float(flat[index]) != value

    def stop_message(self) -> str:
        limit = self.session.options.max_steps
        return (f"stopped after {self.steps} hand-written update steps (no torch.optim optimizer; a step is an "
                f"update of every trainable parameter between two backwards) (--max-steps {limit})")


_COPIES = frozenset({"__index__", "tensor", "new_tensor"})
_DROPOUTS = frozenset({"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"})


_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _warned_from(frame: Any, filename: str, lineno: int) -> Tuple[str, int]:
    """Where a warning raised by torch inside our TorchFunctionMode would point without the run:
    torch warns at the innermost Python frame, which is the mode's (or a handler's) while it calls
    the op; the frame that called the op is the first one above that is neither ours nor the
    warnings module's."""
    while frame is not None and (frame.f_code.co_filename.startswith(_RUNTIME_DIR)
                                 or frame.f_code.co_filename == warnings.__file__):
        frame = frame.f_back
    if frame is None:
        return filename, lineno
    return frame.f_code.co_filename, frame.f_lineno


def _has_closure(args: tuple, kwargs: dict) -> bool:
    # the global step hooks get the optimizer itself as args[0] (torch 2.x), the closure after it
    return bool(any(callable(a) for a in args[:2]) or callable(kwargs.get("closure")))


def _op_name(func: Any) -> str:
    name = getattr(func, "__name__", None) or repr(func)
    qualname = getattr(func, "__qualname__", "") or ""
    if qualname.startswith(("TensorBase.", "Tensor.")):
        return f"Tensor.{name}"
    module = getattr(func, "__module__", "") or ""
    if module.startswith("torch"):
        return f"{module.replace('torch.nn.functional', 'F').replace('torch._C._nn', 'F')}.{name}" \
            if module != "torch" else f"torch.{name}"
    return name
