"""The value model's parameters, calling contexts and call sites: what a parameter is outside
a specific call (what every caller passes, or what an entry point's annotation, default and
name say), the grad mode a function runs under, and where a function is called."""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.scopes import dotted_name
from torchlint.analysis.evidence import LOADER_EVIDENCE, MODULE_EVIDENCE, OPTIMIZER_EVIDENCE, evidence_of_use
from torchlint.analysis.frames import Frame, _bind, _positional_params
from torchlint.analysis.torch_semantics import _keyword
from torchlint.analysis.value import (
    AG_MAYBE, AG_NONE, BOTTOM, CLASS, INPUT, INSTANCE, LAYOUT_CONTIGUOUS, LOADER, MODULE, NUMBER, OPTIMIZER,
    STRING, TENSOR, UNKNOWN, UNKNOWN_VALUE, ModuleInfo, Value, join_all,
)
from torchlint.analysis.value import GRAD_INHERITED, GRAD_OFF, GRAD_ON, GRAD_UNKNOWN


_MAX_CONTEXTS = 8  # distinct argument values per function before its calls share one summary
_MAX_NESTED_CALLS = 6  # interpreted calls inside interpreted calls; deeper ones share one summary
_OPTIMIZER_NAME = __import__("re").compile(r"^(?:\w+_)?(?:opt|optim|optimizer|optimiser)(?:_\w+|\d+)?$")
_SCALER_NAME = __import__("re").compile(r"scaler", __import__("re").IGNORECASE)
_MODEL_NAMES = frozenset({"model", "net", "network", "classifier"})
_ENTRY_METHODS = frozenset({"forward", "training_step", "validation_step", "test_step", "predict_step",
                            "__call__", "step"})
# Decorators that do not change how a function is called.
_TRANSPARENT_DECORATORS = frozenset({"staticmethod", "classmethod", "property", "torch.no_grad",
                                     "torch.inference_mode", "torch.enable_grad", "functools.wraps",
                                     "torch.jit.script", "torch.jit.unused", "torch.jit.ignore",
                                     "torch.compile", "abstractmethod", "abc.abstractmethod"})


# Method names that torch's own classes (modules, tensors, optimizers, schedulers) or common
# libraries also have: a call `x.step()` on an unknown `x` may be any of them.
_COMMON_METHOD_NAMES = frozenset("""
step update reset train eval to cuda cpu apply load save run fit predict forward zero_grad
parameters modules children state_dict load_state_dict half float double type cat view add sub mul
copy clone detach item numpy append extend get set pop close open write read start stop
""".split())

class ParameterValues:
    """What a parameter is and the contexts functions run in
    (a mixin of `torchlint.analysis.interpreter.Values`)."""

    # -- parameters ----------------------------------------------------------------------------
    def param_value(self, param: cst.Param, frame: Frame) -> Value:
        if frame.args is not None and id(param) in frame.args:
            return frame.args[id(param)]
        return self._memoized(("param", id(param)), self._generic_param, param)

    def _generic_param(self, param: cst.Param) -> Value:
        function = self.index.parent.get(self.index.parent.get(param))
        if type(function) is not cst.FunctionDef:
            return self._annotated_param(param, None)
        klass = self.sem.class_of_method(function)
        positional = _positional_params(function)
        if klass is not None and positional and positional[0] is param and not self._is_static(function):
            if self._decorated(function, "classmethod"):
                return Value(CLASS, AG_NONE, detail=klass)
            return self.instance_of(klass, klass)
        if not self._is_entry_point(function, klass):
            sites = self._sites(function)
            if sites and not self._escapes_function(function):
                values = []
                for call, binding, caller in sites:
                    argument = binding.get(id(param))
                    if argument is None:
                        values.append(self._default_value(param, caller))
                    elif isinstance(argument, Value):
                        values.append(argument)
                    else:
                        values.append(self.value(argument, caller))
                joined = join_all(values)
                if joined.kind not in (UNKNOWN, BOTTOM):
                    return self._as_argument(joined, param)
                annotated = self._annotated_param(param, function)
                if annotated.kind != INPUT:
                    return annotated
                return joined if joined.kind != BOTTOM else UNKNOWN_VALUE
        return self._annotated_param(param, function)

    def _as_argument(self, value: Value, param: cst.Param) -> Value:
        if value.is_tensor or value.kind == INPUT:
            return value.but(alias=param)
        return value

    def _default_value(self, param: cst.Param, caller: Frame) -> Value:
        if param.default is None:
            return UNKNOWN_VALUE
        return self.value(param.default, self.frame_of(param.default))

    def _annotated_param(self, param: cst.Param, function: Optional[cst.FunctionDef]) -> Value:
        """An entry point's parameter: what its annotation, default or name says."""
        annotation = param.annotation.annotation if param.annotation is not None else None
        if annotation is not None:
            kind = self._annotation_kind(annotation)
            if kind == TENSOR:
                return Value(TENSOR, AG_MAYBE, LAYOUT_CONTIGUOUS, alias=param, role="input")
            if kind == MODULE:
                return Value(MODULE, AG_NONE, module=ModuleInfo(klass=self._annotation_class(annotation)))
            if kind == OPTIMIZER:
                return Value(OPTIMIZER, AG_NONE)
            if kind == LOADER:
                return Value(LOADER, AG_NONE, site=param)
            if kind is not None:
                return Value(kind, AG_NONE)
            return UNKNOWN_VALUE
        if param.default is not None:
            default = param.default
            if type(default) is cst.Name and default.value == "None":
                pass
            else:
                value = self.value(default, self.frame_of(default))
                if value.kind in (NUMBER, STRING):
                    return value
                return UNKNOWN_VALUE
        name = param.name.value
        if function is not None and param.star not in ("*", "**"):
            used_as = self._evidence_of_use(function).get(name)
            if used_as == MODULE_EVIDENCE:
                return Value(MODULE, AG_NONE, module=ModuleInfo(), site=param, role="model")
            if used_as == LOADER_EVIDENCE:
                return Value(LOADER, AG_NONE, site=param, role="used")
            if used_as == OPTIMIZER_EVIDENCE:
                return Value(OPTIMIZER, AG_NONE, role="optimizer")
        role = None
        if _OPTIMIZER_NAME.match(name):
            role = "optimizer"
        elif _SCALER_NAME.search(name):
            role = "scaler"
        elif name in _MODEL_NAMES or name.endswith("_model"):
            role = "model"
        if param.star in ("*", "**"):
            return UNKNOWN_VALUE
        return Value(INPUT, AG_MAYBE, LAYOUT_CONTIGUOUS, alias=param, role=role)

    def _evidence_of_use(self, function: cst.FunctionDef) -> Dict[str, str]:
        """What the body of `function` shows its plain parameters to be (`analysis/evidence.py`)."""
        table = self.sem.__dict__.setdefault("_evidence_of_use", {})
        found = table.get(id(function))
        if found is None:
            found = table[id(function)] = evidence_of_use(function, self.index)
        return found

    def _annotation_kind(self, annotation: cst.BaseExpression) -> Optional[str]:
        if type(annotation) is cst.Subscript and dotted_name(annotation.value) in ("Optional", "typing.Optional"):
            inner = annotation.slice[0].slice
            if type(inner) is cst.Index:
                annotation = inner.value
        if type(annotation) is cst.BinaryOperation and type(annotation.operator) is cst.BitOr:
            sides = [s for s in (annotation.left, annotation.right)
                     if not (type(s) is cst.Name and s.value == "None")]
            if len(sides) == 1:
                annotation = sides[0]
        if type(annotation) is cst.SimpleString:
            text = annotation.value.strip("'\"")
            return TENSOR if text in api.TENSOR_ANNOTATIONS else UNKNOWN
        spelled = dotted_name(annotation)
        if spelled in api.TENSOR_ANNOTATIONS:
            return TENSOR
        qualified = self.sem.qualified_name(annotation)
        if qualified is not None:
            if qualified in ("torch.Tensor", "torch.FloatTensor", "torch.LongTensor"):
                return TENSOR
            if qualified in api.MODULE_ANNOTATIONS or api.is_nn_module_class(qualified):
                return MODULE
            if qualified in api.OPTIMIZER_BASES or api.is_optimizer_class(qualified):
                return OPTIMIZER
            if qualified in api.LOADERS:
                return LOADER
        if type(annotation) is cst.Name:
            for klass in self._classes_named(annotation.value):
                if self.sem.is_module_class(klass):
                    return MODULE
        if spelled in ("int", "float", "bool"):
            return NUMBER
        if spelled == "str":
            return STRING
        return UNKNOWN

    def _annotation_class(self, annotation) -> Optional[cst.ClassDef]:
        if type(annotation) is cst.Name:
            for klass in self._classes_named(annotation.value):
                if self.sem.is_module_class(klass):
                    return klass
        return None

    def _is_entry_point(self, function: cst.FunctionDef, klass: Optional[cst.ClassDef]) -> bool:
        """Called by code outside this file: `forward`, hooks of frameworks, dunder methods."""
        name = function.name.value
        if klass is not None and (name in _ENTRY_METHODS or (name.startswith("__") and name != "__init__")):
            return True
        return False

    def _is_static(self, function: cst.FunctionDef) -> bool:
        return self._decorated(function, "staticmethod")

    def _decorated(self, function: cst.FunctionDef, name: str) -> bool:
        for decorator in function.decorators:
            if dotted_name(decorator.decorator) == name:
                return True
        return False

    # -- frames --------------------------------------------------------------------------------
    def generic_frame(self, function: Optional[cst.CSTNode]) -> Frame:
        if function is None:
            return self._module_frame
        key = id(function)
        frame = self._generic_frames.get(key)
        if frame is None:
            # One generic frame per function: its grad mode (what its callers run it under) is
            # only worked out when an operation inside needs it.
            frame = Frame(function, None, None, resolve=self._inherited_grad)
            self._generic_frames[key] = frame
        return frame

    def _inherited_grad(self, function: cst.FunctionDef) -> str:
        """The grad mode `function` runs under as far as its callers in this file tell: off when
        it is a method of a `torch.autograd.Function` or every call runs under no_grad."""
        klass = self.sem.class_of_method(function)
        if klass is not None and any(self._is_base(base.value, api.AUTOGRAD_FUNCTION_BASES)
                                     for base in klass.bases):
            return GRAD_OFF
        if self._is_entry_point(function, klass):
            return GRAD_INHERITED
        sites = self._sites(function)
        if not sites and klass is not None:
            sites = self._unresolved_method_sites(function)
        if not sites or self._escapes_function(function):
            return GRAD_INHERITED
        modes = set()
        for call, _, caller in sites:
            if caller.function is function:
                continue  # recursion: the outer call decides
            modes.add(self.grad_mode(call, caller) if caller.function is not function else GRAD_INHERITED)
        if not modes:
            return GRAD_INHERITED
        if modes == {GRAD_OFF}:
            return GRAD_OFF
        if GRAD_OFF in modes or GRAD_UNKNOWN in modes:
            return GRAD_UNKNOWN
        return GRAD_INHERITED

    def lexical_grad_mode(self, node: cst.CSTNode) -> Optional[str]:
        """The grad mode that the blocks and decorators around `node` in its own function set,
        or None when they set none."""
        child = node
        index = self.index
        above = index.above
        preorder = index.preorder
        up = index.parent_number(node)
        while up >= 0:
            ancestor = preorder[up]
            kind = type(ancestor)
            if kind is cst.SimpleStatementLine and ancestor is not node:
                # Everything above a statement line is the same for every node in it.
                known = self._lexical_grad
                if id(ancestor) not in known:
                    known[id(ancestor)] = self.lexical_grad_mode(ancestor)
                return known[id(ancestor)]
            if kind is cst.With and child is ancestor.body:
                for item in reversed(ancestor.items):
                    mode = self.grad_context(item.item)
                    if mode is not None:
                        return mode
            elif kind is cst.FunctionDef:
                if child is ancestor.body:
                    for decorator in ancestor.decorators:
                        mode = self.grad_context(decorator.decorator)
                        if mode is not None:
                            return mode
                return None
            elif kind is cst.Lambda or kind is cst.ClassDef:
                return None
            child = ancestor
            up = above[up]
        return None

    def grad_context(self, expr: cst.BaseExpression) -> Optional[str]:
        call = expr if type(expr) is cst.Call else None
        target = call.func if call is not None else expr
        name = self.sem.qualified_name(target)
        if name is None:
            spelled = dotted_name(target)
            if spelled is None or not spelled.startswith("torch.") or self.scopes.lookup("torch", target):
                return None
            name = spelled  # `torch` from `from utils import *`: spelled out, it is torch's context
        if name in api.SET_GRAD_ENABLED and call is not None and call.args:
            value = call.args[0].value
            if type(value) is cst.Name and value.value in ("False", "True"):
                return GRAD_ON if value.value == "True" else GRAD_OFF
            return GRAD_UNKNOWN
        if name in api.GRAD_DISABLING:
            if call is not None and name.endswith("inference_mode"):
                flag = _keyword(call, "mode")
                if flag is None and call.args and call.args[0].keyword is None:
                    flag = call.args[0].value
                if flag is not None and not (type(flag) is cst.Name and flag.value == "True"):
                    return GRAD_UNKNOWN if type(flag) is not cst.Name or flag.value != "False" else None
            return GRAD_OFF
        if name in api.GRAD_ENABLING:
            return GRAD_ON
        return None

    def _context_frame(self, function: cst.FunctionDef, args: Dict[int, Value], grad: str, caller: Frame) -> Frame:
        if caller.nesting >= _MAX_NESTED_CALLS:
            return self.generic_frame(function)
        if grad in (GRAD_INHERITED, GRAD_ON):
            grad = GRAD_INHERITED
        frame = Frame(function, args, grad, caller.nesting + 1)
        # The full key nests the arguments' value keys; memo keys hash it on every lookup, so a
        # specific frame is known by a small number instead.
        frame.key = self._frame_numbers.setdefault(frame.key, len(self._frame_numbers))
        seen = self._contexts.setdefault(id(function), set())
        if frame.key not in seen:
            if len(seen) >= _MAX_CONTEXTS:
                return self.generic_frame(function)
            seen.add(frame.key)
        return frame

    # -- call sites ----------------------------------------------------------------------------
    def _sites(self, function: cst.FunctionDef) -> list:
        """(call, {param id: argument expression or Value}, caller frame) for each call of
        `function` in this file."""
        key = id(function)
        found = self._call_sites.get(key)
        if found is not None:
            return found
        self._call_sites[key] = []  # recursion guard
        found = []
        name = function.name.value
        klass = self.sem.class_of_method(function)
        targets = self._calls_named(name if name != "__init__" or klass is None else klass.name.value)
        for call in targets:
            if klass is None:
                callee = self._local_function_of_call(call)
                if callee is not function:
                    continue
                binding = _bind(function, call, skip_self=False)
            elif name == "__init__":
                if not (type(call.func) is cst.Name and klass in self._classes_named(call.func.value)):
                    continue
                binding = _bind(function, call, skip_self=True)
            else:
                receiver = call.func.value if type(call.func) is cst.Attribute else None
                if receiver is None:
                    continue
                owner = self.of(receiver)
                if owner.kind not in (MODULE, INSTANCE) or owner.module is None and owner.detail is None:
                    continue
                owner_class = owner.module.klass if owner.module is not None else owner.detail
                if owner_class is None or self.method(owner_class, name) is not function:
                    continue
                binding = _bind(function, call, skip_self=not self._is_static(function))
            if binding is None:
                continue
            found.append((call, binding, self.frame_of(call)))
        # `model.apply(fn)` calls `fn` on every submodule.
        for call in self._calls_named("apply"):
            if len(call.args) == 1 and type(call.args[0].value) is cst.Name and klass is None \
                    and self._local_function_named(call.args[0].value) is function:
                params = _positional_params(function)
                if params:
                    found.append((call, {id(params[0]): Value(MODULE, AG_NONE, module=ModuleInfo())},
                                  self.frame_of(call)))
        self._call_sites[key] = found
        return found

    def _unresolved_method_sites(self, function: cst.FunctionDef) -> list:
        """For the grad mode only: the calls `x.fuse()` of a method whose receiver the value model
        cannot name (`def export(net): with torch.no_grad(): net.fuse()`), when no other function
        of the file is spelled like the method and the name is not one that torch's own classes
        have (`step`, `train`, `update`). (call, None, caller frame) each."""
        name = function.name.value
        if name in _COMMON_METHOD_NAMES or name.startswith("_") or any(
                other is not function for other in self.index.nodes(cst.FunctionDef) if other.name.value == name):
            return []
        found = []
        for call in self._calls_named(name):
            if type(call.func) is not cst.Attribute:
                return []  # called by a bare name: another thing spelled the same
            owner = self.of(call.func.value)
            if owner.kind not in (UNKNOWN, BOTTOM, INPUT):
                return []  # a value the model knows, which `_sites` did not find this method on
            found.append((call, None, self.frame_of(call)))
        return found

    def _calls_named(self, name: str) -> List[cst.Call]:
        return self.index.callee_table().get(name, [])

    def _escapes_function(self, function: cst.FunctionDef) -> bool:
        """Whether `function` is used other than by calling it here (passed as a callback,
        decorated by something that may call it anyhow), so its callers are not all known."""
        key = id(function)
        found = self._escapes.get(key)
        if found is not None:
            return found
        escapes = False
        for decorator in function.decorators:
            spelled = dotted_name(decorator.decorator if type(decorator.decorator) is not cst.Call
                                  else decorator.decorator.func)
            qualified = self.sem.qualified_name(decorator.decorator if type(decorator.decorator) is not cst.Call
                                                else decorator.decorator.func)
            if spelled not in _TRANSPARENT_DECORATORS and qualified not in _TRANSPARENT_DECORATORS:
                escapes = True
        name = function.name.value
        if not escapes:
            for use in self.index.names_spelled(name):
                if use is function.name:
                    continue
                parent = self.index.parent.get(use)
                if type(parent) is cst.Call and parent.func is use:
                    continue
                if type(parent) is cst.Attribute and parent.attr is use:
                    grand = self.index.parent.get(parent)
                    if type(grand) is cst.Call and grand.func is parent:
                        continue
                if type(parent) is cst.Arg and parent.keyword is use:
                    continue  # `MNIST(..., train=True)` names a keyword, not the function
                if type(parent) is cst.Arg:
                    call = self.index.parent.get(parent)
                    if type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value == "apply":
                        continue
                if type(parent) in (cst.ImportAlias, cst.AsName):
                    continue
                if type(parent) in (cst.FunctionDef, cst.ClassDef) and parent.name is use:
                    continue  # another def of the same name
                escapes = True
                break
        self._escapes[key] = escapes
        return escapes

    def _local_function_of_call(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        if type(call.func) is not cst.Name:
            return None
        return self._local_function_named(call.func)

    def _local_function_named(self, name: cst.Name) -> Optional[cst.FunctionDef]:
        bindings = self.scopes.lookup(name.value, name)
        if not bindings or any(b.kind != "def" for b in bindings):
            return None
        functions = [b.node for b in bindings]
        return functions[0] if len(functions) == 1 else None

    def _classes_named(self, name: str) -> List[cst.ClassDef]:
        if self._classes_by_name is None:
            table: Dict[str, List[cst.ClassDef]] = {}
            for klass in self.index.nodes(cst.ClassDef):
                table.setdefault(klass.name.value, []).append(klass)
            self._classes_by_name = table
        return self._classes_by_name.get(name, [])
