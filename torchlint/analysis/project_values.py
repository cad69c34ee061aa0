"""The value model's names from the user's other files: what `torchlint.analysis.project` says
of an imported class, function or module-level value, as a value here."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.frames import Frame
from torchlint.analysis.value import (
    AG_GRAPH, AG_NONE, AG_UNKNOWN, CUDA, CONTIGUOUS, HOST, INPUT, LAYOUT_NOT_KNOWN, MODULE, PERMUTED,
    TENSOR_KINDS, UNKNOWN, UNKNOWN_VALUE, Value,
)
from torchlint.analysis.value import GRAD_OFF


class ProjectValues:
    """Names imported from the user's other files
    (a mixin of `torchlint.analysis.interpreter.Values`)."""

    # -- names from the user's other files (`torchlint.analysis.project`) ----------------------
    def _project_fact(self, qualified: str):
        project = self.sem.project
        if project is None or qualified.startswith(("torch.", "torchvision.")):
            return None
        return project.fact(qualified)

    def _star_imported(self, node: cst.Name):
        """The project fact for a name no scope binds, from a `from models import *` of a
        project module that defines it (the last such import that does)."""
        if self.sem.project is None or not self.scopes.star_imports or type(node) is not cst.Name:
            return None
        if self.scopes.binding_scope(node.value, node) is not None:
            return None
        for module in reversed(self.scopes.star_imports):
            fact = self._project_fact(f"{module}.{node.value}" if not module.endswith(".") else module + node.value)
            if fact is not None:
                return fact
        return None

    def _imported_value(self, node: cst.Name) -> Value:
        if self.sem.project is None:
            return UNKNOWN_VALUE
        qualified = self.scopes.import_name(node)
        return UNKNOWN_VALUE if qualified is None else self._project_value(qualified)

    def _project_value(self, qualified: str) -> Value:
        """`device` after `from config import device`: the value config.py gives it."""
        fact = self._project_fact(qualified)
        if fact is not None and fact.kind == "value":
            return fact.value
        return UNKNOWN_VALUE

    def _project_call(self, fact, call: cst.Call, frame: Frame) -> Value:
        """`Net()`, `build_model()`, `to_tokens(x)` of another project file: an instance with
        the class's facts, or what the function returns with generic arguments, its graph decided
        here (the grad mode of this call and what goes in)."""
        if fact.kind == "module class":
            return fact.value.but(site=call)
        if fact.kind != "function":
            return Value(UNKNOWN, site=call)
        result = fact.value
        if result.device is not None and result.device.where not in (HOST, CUDA):
            # `x.to(device)` with the other function's own `device` parameter: its spelling
            # names nothing here.
            result = result.but(device=None)
        if result.kind == MODULE:
            return result.but(site=call)
        if result.kind not in TENSOR_KINDS:
            return Value(UNKNOWN, site=call) if result.kind in (UNKNOWN, INPUT) else result
        inputs = [self.value(a.value, frame) for a in call.args if not a.star]
        layout = result.layout
        if layout.state == PERMUTED and not all(
                v.layout.state == CONTIGUOUS for v in inputs if v.kind in TENSOR_KINDS or v.kind == INPUT):
            layout = LAYOUT_NOT_KNOWN  # what it permutes may come in permuted already
        if self.grad_mode(call, frame) == GRAD_OFF or result.autograd == AG_NONE:
            autograd = AG_NONE  # made under no_grad here, or there (a feature extractor), or detached
        elif result.requires_grad:
            autograd = AG_GRAPH
        else:
            autograd = self._result_autograd(inputs, call, frame) if inputs else AG_UNKNOWN
            if autograd == AG_NONE:
                autograd = AG_UNKNOWN  # it may use a model of its own
        return result.but(autograd=autograd, layout=layout, site=call, alias=None)
