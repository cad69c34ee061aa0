"""The script around the models: names of the training script resolved to abstract values where
they are read, so `images.reshape(-1, 28 * 28).to(device)`, `labels.view(-1, 1)` or
`outputs = model(images)` get their shapes from the data pipeline and the models.

A `ScriptFrame` is a frame of the forward interpreter (`modules.Interpreter`) whose names are not
bound by the interpreter but looked up through the file's own definitions: a batch element of a
loader over a known dataset, a tensor factory with literal sizes, an expression assigned to the
name (evaluated in turn), a module the value model knows, a constant. Everything else is unknown.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import libcst as cst

from torchlint.analysis.tensor_shape import inputs as I
from torchlint.analysis.tensor_shape.modules import UNKNOWN, Frame, evaluate
from torchlint.analysis.tensor_shape.values import Num, Tensor, Tup

_MAX_DEPTH = 24


class ScriptFrame(Frame):
    def __init__(self, sem, model_of) -> None:
        super().__init__(sem, None, {}, 0, True, "")
        self.model_of = model_of  # name node -> module value, or None
        self._cache: Dict[int, Any] = {}
        self._resolving: set = set()
        self.sources: Dict[int, I.Source] = {}  # what each tensor came from, by id of its Tensor value
        self.last_source: Optional[I.Source] = None

    def resolve(self, node: cst.Name, interpreter) -> Any:
        key = id(node)
        if key in self._cache:
            value, source = self._cache[key]
            if source is not None:
                self.last_source = source  # where the value came from, as when it was first resolved
            return value
        if key in self._resolving or len(self._resolving) > _MAX_DEPTH:
            return UNKNOWN
        self._resolving.add(key)
        before = self.last_source
        self.last_source = None
        try:
            value = self._resolve(node, interpreter)
        finally:
            self._resolving.discard(key)
        source = self.last_source
        if source is None:
            self.last_source = before
        self._cache[key] = (value, source)
        return value

    def _resolve(self, node: cst.Name, interpreter) -> Any:
        sem = self.sem
        module = self.model_of(node)
        if module is not None:
            return module
        if I.reshaped_in_place(sem, node):
            return UNKNOWN
        definition = sem.reaching_definition(node)
        if definition is not None and definition.kind == "param":
            return self._parameter(definition, interpreter)
        if definition is None:
            constant = evaluate(sem, node, {}, 0)
            return Num(constant) if isinstance(constant, int) and not isinstance(constant, bool) else UNKNOWN
        if definition.kind == "assign" and definition.value is not None and definition.path == ():
            if sem.function_of(definition.statement) is not sem.function_of(node) and \
                    sem.function_of(definition.statement) is not None:
                return UNKNOWN
            return interpreter.expr(definition.value, self, True)
        if definition.kind in ("assign", "for") and definition.path:
            value = definition.value
            if definition.kind == "assign" and isinstance(value, (cst.Tuple, cst.List)) and len(definition.path) == 1:
                elements = value.elements
                position = definition.path[0]
                if position < len(elements) and not isinstance(elements[position], cst.StarredElement):
                    return interpreter.expr(elements[position].value, self, True)
                return UNKNOWN
            found = I.element_source(sem, node)
            if found is None:
                if definition.kind == "assign" and sem.function_of(definition.statement) is sem.function_of(node):
                    value = interpreter.expr(definition.value, self, True)
                    for position in definition.path:
                        if not isinstance(value, Tup) or position >= len(value.items):
                            return UNKNOWN
                        value = value.items[position]
                    return value
                return UNKNOWN
            shape, source = found
            self.last_source = source
            return Tensor(shape)
        return UNKNOWN

    def _parameter(self, definition, interpreter) -> Any:
        """A function's parameter: the value every call of the function in this file passes,
        when they all agree (`loss_function(recon_batch, data, mu, logvar)`)."""
        param = definition.statement
        function = next((a for a in self.sem.ancestors(param) if isinstance(a, cst.FunctionDef)), None)
        if function is None or self.sem.class_of_method(function) is not None:
            return UNKNOWN
        values = []
        for call, binding in self.sem.values.call_sites(function)[:4]:
            argument = binding.get(id(param))
            if argument is None:
                return UNKNOWN
            values.append(interpreter.expr(argument, self, True))
        if not values or not all(isinstance(v, Tensor) and v.shape is not None and v.shape == values[0].shape
                                 for v in values):
            return UNKNOWN
        return values[0]

    def batch_element(self, node: cst.Subscript) -> Optional[Tensor]:
        """`data[0]` where `data` is a whole batch of a loader over a known dataset."""
        if not isinstance(node.value, cst.Name):
            return None
        found = I.element_source(self.sem, node)
        if found is None:
            return None
        shape, source = found
        self.last_source = source
        return Tensor(shape)

    def factory(self, call: cst.Call) -> Any:
        """A tensor built with literal sizes: images and volumes get the batch symbol first."""
        source = I.tensor_source(self.sem, call)
        if source is None:
            source = I.range_source(self.sem, call)
        if source is None:
            return UNKNOWN
        self.last_source = source
        return Tensor(source.shape)
