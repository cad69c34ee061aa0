"""What torch's functions, tensor methods and modules give back, in the value model's terms:
the second half of `Values` (a mixin of `torchlint.analysis.interpreter.Values`).

Each torch function is dispatched by its qualified name and each tensor method by its name
(the tables are in `torch_api`); the result's facets follow from the inputs' facets: a graph
when an input requires grad and grad is on where the call runs, the layout of the first tensor
operand for element-wise operations (measured on torch 2.13: `p + c` keeps a permuted `p`'s
strides, `c + p` does not), a device from `.to(...)`/`.cuda()`/`device=`, a 0-d shape for a full
reduction or a loss, and so on. Nothing here imports torch.
"""

from __future__ import annotations

import re
from typing import List, Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.legacy import effective_reduction
from torchlint.analysis.shapes import Dim, permutation
from torchlint.analysis.value import (
    AG_GRAPH, AG_LEAF, AG_MAYBE, AG_NONE, AG_REQUIRES, AG_UNKNOWN, BOTTOM, CHOSEN, CONTAINER,
    CONTIGUOUS, CRITERION, CUDA, DEVICE, DTYPE, GRAD_OFF, GRAD_SCALER, GRAD_UNKNOWN, HOST, INPUT,
    LAYOUT_CONTIGUOUS, LAYOUT_MAYBE, LAYOUT_NOT_KNOWN, LOADER, LOSS, MAYBE_PERMUTED, META, MODULE, NONE,
    NONE_VALUE,
    NUMBER, NUMBER_VALUE, OPTIMIZER, PARAMETER, PERMUTED, SCHEDULER, STRING, STRING_VALUE, TENSOR,
    TENSOR_KINDS, UNKNOWN, UNKNOWN_VALUE, Device, Layout, ModuleInfo, Value, device_named, join, join_all,
)

_NON_DIM_KEYWORDS = ("dtype", "keepdim", "out")
# Kinds that certainly are not tensors (nor hold one): they never carry a graph into a result.
_NOT_TENSORS = frozenset({NUMBER, STRING, NONE, DTYPE, DEVICE, BOTTOM})


def _device_of_string(text: Optional[str], call) -> Optional[Device]:
    """The device a literal device string names (`"cuda:0"`, `"cpu"`, `"mps"`), or None."""
    if text is None or not api.DEVICE_STRING.match(text):
        return None
    return device_named(text, call)


class TorchSemantics:
    """The values torch's API returns (see the module docstring)."""

    def _result_autograd(self, inputs: Sequence[Value], node, frame, differentiable: bool = True) -> str:
        mode = self.grad_mode(node, frame)
        if not differentiable or mode == GRAD_OFF:
            return AG_NONE
        tensors = [v for v in inputs if v.kind not in _NOT_TENSORS]
        if not tensors:
            return AG_NONE
        if any(v.requires_grad for v in tensors):
            return AG_GRAPH if mode != GRAD_UNKNOWN else AG_MAYBE
        if all(v.autograd == AG_NONE for v in tensors):
            return AG_NONE
        if any(v.autograd == AG_MAYBE for v in tensors):
            return AG_MAYBE  # an input whose grad status is not known: the result may have a graph
        return AG_UNKNOWN  # something of unknown kind went in

    def _op_result(self, inputs: Sequence[Value], node, frame, layout: Layout, kind: str = TENSOR,
                   differentiable: bool = True, **facets) -> Value:
        tensors = [v for v in inputs if v.kind in TENSOR_KINDS or v.kind == INPUT]
        if kind == TENSOR and any(v.kind == LOSS for v in tensors):
            kind = LOSS
        device = facets.pop("device", _common_device(tensors))
        dtype = facets.pop("dtype", tensors[0].dtype if tensors else None)
        return Value(kind, self._result_autograd(inputs, node, frame, differentiable), layout,
                     device=device, dtype=dtype, **facets)

    def _elementwise(self, inputs: Sequence[Value], node, frame, differentiable: bool = True,
                     activation: Optional[str] = None) -> Value:
        """An element-wise result: the layout and shape of its first tensor operand."""
        first = next((v for v in inputs if v.kind in TENSOR_KINDS or v.kind == INPUT), None)
        if first is None:
            if not any(v.kind == UNKNOWN for v in inputs):
                return UNKNOWN_VALUE
            # A torch operation on something unknown still makes a tensor (laid out in order, as
            # an unknown input is taken to be).
            first = Value(TENSOR, AG_UNKNOWN, LAYOUT_CONTIGUOUS)
            inputs = [first] + [v for v in inputs if v.kind != UNKNOWN]
        layout = first.layout
        if layout.state == LAYOUT_CONTIGUOUS and first.kind == INPUT:
            layout = LAYOUT_CONTIGUOUS
        others = [v for v in inputs if v is not first and (v.kind in TENSOR_KINDS or v.kind == INPUT)]
        shape = first.shape if not others else (
            () if first.shape == () and all(v.shape == () for v in others) else None)
        return self._op_result(inputs, node, frame, layout, differentiable=differentiable, shape=shape,
                               activation=(activation, node) if activation else None)

    def _transposed(self, tensor: Value, operation: str, numbers: Tuple[int, ...], node) -> Value:
        """`tensor` transposed by `operation(*numbers)`: PERMUTED when `tensor` is laid out in
        order, the composed permutation when it was permuted already, else unknown."""
        rank = len(tensor.shape) if tensor.shape is not None else None
        state = tensor.layout.state
        autograd = AG_GRAPH if tensor.autograd == AG_LEAF else tensor.autograd
        kind = TENSOR if tensor.kind in TENSOR_KINDS else tensor.kind
        if kind == INPUT:
            kind = TENSOR
        if state == CONTIGUOUS:
            order = _order(operation, numbers, rank)
            if order is not None and order == tuple(range(len(order))):
                return tensor.but(kind=kind, autograd=autograd, shape=_permute_shape(tensor.shape, order))
            layout = Layout(PERMUTED, node, operation, numbers, order, rank)
            return tensor.but(kind=kind, autograd=autograd, layout=layout,
                              shape=_permute_shape(tensor.shape, order), activation=None)
        if state == PERMUTED and tensor.layout.order is not None:
            step = _order(operation, numbers, len(tensor.layout.order))
            if step is not None:
                order = tuple(tensor.layout.order[i] for i in step)
                if order == tuple(range(len(order))):
                    return tensor.but(kind=kind, autograd=autograd, layout=LAYOUT_CONTIGUOUS,
                                      shape=_permute_shape(tensor.shape, step))
                layout = Layout(PERMUTED, node, "permute", order, order, len(order))
                return tensor.but(kind=kind, autograd=autograd, layout=layout, shape=_permute_shape(tensor.shape, step))
        if state == PERMUTED and _undoes(tensor.layout, operation, numbers):
            return tensor.but(kind=kind, autograd=autograd, layout=LAYOUT_CONTIGUOUS, shape=None)
        return tensor.but(kind=kind, autograd=autograd, layout=LAYOUT_NOT_KNOWN, shape=None, activation=None)

    def _library_call(self, qualified: str, call: cst.Call, frame) -> Value:
        parts = qualified.split(".")
        head = parts[0]
        member = parts[-1]
        if head == "torch":
            return self._torch_call(qualified, parts, member, call, frame)
        if head == "torchvision" and len(parts) >= 3 and parts[1] == "models":
            if member[:1].islower() and not member.startswith("get_"):
                stochastic = None
                if api.TORCHVISION_STOCHASTIC.match(qualified):
                    stochastic = f"{member} (BatchNorm/Dropout)"
                return Value(MODULE, AG_NONE, module=ModuleInfo(qualified, stochastic=stochastic), site=call,
                             dtype="float32")
            if member[:1].isupper():
                return Value(MODULE, AG_NONE, module=ModuleInfo(qualified), site=call, dtype="float32")
        if qualified in api.MODEL_ZOO and qualified != "torch.load":
            return Value(MODULE, AG_NONE, module=ModuleInfo(qualified), site=call)
        if head in ("tqdm",) and call.args:
            return self.value(call.args[0].value, frame)
        if qualified in ("copy.deepcopy", "copy.copy") and call.args:
            inner = self.value(call.args[0].value, frame)
            return inner.but(site=call) if inner.kind == MODULE else inner
        if qualified in ("math.sqrt", "math.log", "math.exp", "math.pow", "math.floor", "math.ceil",
                         "math.cos", "math.sin", "math.pi"):
            return NUMBER_VALUE
        if head in ("numpy", "np") or qualified.startswith("numpy."):
            return Value(UNKNOWN, AG_NONE)
        if qualified in ("itertools.chain",):
            return Value(CONTAINER, AG_NONE, element=join_all(
                self._iterate(self.value(a.value, frame)) for a in call.args if a.keyword is None))
        if qualified == "functools.partial":
            return UNKNOWN_VALUE
        return UNKNOWN_VALUE

    def _torch_call(self, qualified: str, parts: List[str], member: str, call: cst.Call, frame) -> Value:
        args = [a.value for a in call.args if a.keyword is None and not a.star]
        if len(parts) >= 3 and parts[1] == "nn":
            if parts[2] == "functional" and len(parts) == 4:
                return self._functional(member, qualified, args, call, frame)
            if qualified in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
                flag = _keyword(call, "requires_grad")
                if flag is None and len(call.args) > 1 and call.args[1].keyword is None:
                    flag = call.args[1].value
                data = self.value(args[0], frame) if args else UNKNOWN_VALUE
                leaf = flag is None or (type(flag) is cst.Name and flag.value == "True")
                return Value(PARAMETER, AG_LEAF if leaf else AG_NONE, LAYOUT_CONTIGUOUS, device=data.device,
                             shape=data.shape, site=call)
            if parts[2] == "init" and args:
                return self.value(args[0], frame)
            if api.is_nn_module_class(qualified):
                return self._module_construction(qualified, member, args, call, frame)
            if parts[2] == "utils":
                return UNKNOWN_VALUE
            return UNKNOWN_VALUE
        if len(parts) == 3 and parts[1] == "optim" and api.is_optimizer_class(qualified):
            owners = None
            if args:
                owners = self._parameter_owners(args[0], frame)
            return Value(OPTIMIZER, AG_NONE, site=call, detail=owners)
        if api.is_scheduler_class(qualified):
            return Value(SCHEDULER, AG_NONE, site=call)
        if qualified in api.LOADERS:
            return Value(LOADER, AG_NONE, site=call)
        if qualified in api.GRAD_SCALERS:
            return Value(GRAD_SCALER, AG_NONE, site=call)
        if qualified == "torch.device":
            return Value(DEVICE, AG_NONE, detail=self._device_from(args[0] if args else None, call, frame))
        if len(parts) == 3 and parts[1] == "cuda" and member in api.CUDA_TENSOR_TYPES:
            return Value(TENSOR, AG_NONE, LAYOUT_CONTIGUOUS, device=Device(CUDA, node=call), site=call)
        if qualified in ("torch.cuda.is_available", "torch.is_tensor", "torch.is_grad_enabled",
                         "torch.cuda.device_count", "torch.numel"):
            return NUMBER_VALUE
        if len(parts) == 3 and parts[1] == "special":
            if member in ("softmax", "expit", "log_softmax"):
                tensor = self.value(args[0], frame) if args else UNKNOWN_VALUE
                if member == "expit":
                    return self._elementwise([tensor], call, frame, activation="sigmoid")
                return self._op_result([tensor], call, frame, LAYOUT_CONTIGUOUS,
                                       activation=("softmax", call) if member == "softmax" else None)
            return self._op_result([self.value(a, frame) for a in args], call, frame, LAYOUT_CONTIGUOUS)
        if qualified in ("torch.autograd.Variable", "torch.autograd.variable.Variable") and args:
            # The 0.3-era wrapper: today it returns its argument (a leaf when requires_grad=True).
            data = self.value(args[0], frame)
            if _is_true(_keyword(call, "requires_grad")):
                return Value(TENSOR, AG_LEAF, LAYOUT_CONTIGUOUS, device=data.device, shape=data.shape, site=call)
            return data
        if qualified in ("torch.autograd.grad",):
            return Value(CONTAINER, AG_NONE, element=Value(TENSOR, AG_MAYBE, LAYOUT_CONTIGUOUS))
        if len(parts) != 2:
            return UNKNOWN_VALUE
        if member in api.FACTORIES:
            return self._factory(member, args, call, frame)
        if member in api.LIKE_FACTORIES:
            source = self.value(args[0], frame) if args else UNKNOWN_VALUE
            flag = _keyword(call, "requires_grad")
            leaf = type(flag) is cst.Name and flag.value == "True"
            layout = source.layout if source.layout.state in (CONTIGUOUS, PERMUTED) else LAYOUT_NOT_KNOWN
            return Value(TENSOR, AG_LEAF if leaf else AG_NONE, layout, device=source.device, shape=source.shape,
                         dtype=source.dtype, site=call)
        tensors = [self.value(a, frame) for a in args]
        if member in api.TRANSPOSING and tensors:
            numbers = _ints(call.args[1:])
            if numbers is None:
                return self._op_result(tensors[:1], call, frame, LAYOUT_NOT_KNOWN)
            return self._transposed(tensors[0], member, tuple(numbers), call)
        if member in ("softmax", "log_softmax"):
            return self._op_result(tensors[:1], call, frame, LAYOUT_CONTIGUOUS,
                                   activation=("softmax", call) if member == "softmax" else None)
        if member == "sigmoid":
            return self._elementwise(tensors[:1], call, frame, activation="sigmoid")
        if member in api.COMPARISONS:
            return self._elementwise(tensors, call, frame, differentiable=False)
        if member in api.ELEMENTWISE:
            return self._elementwise(tensors, call, frame)
        if member in api.CONCATENATIONS and args:
            sequence = self.value(args[0], frame)
            items = list(sequence.items) if sequence.items else ([sequence.element] if sequence.element else [])
            return self._op_result(items, call, frame, LAYOUT_CONTIGUOUS)
        if member in ("max", "min") and len(tensors) > 1 and (tensors[1].is_tensor or tensors[1].kind == INPUT):
            return self._elementwise(tensors[:2], call, frame)  # `torch.max(a, b)`: element-wise
        if member in api.REDUCTIONS and tensors:
            return self._reduction(tensors[0], member, call, call.args[1:], frame)
        if member in ("reshape", "flatten", "ravel") and tensors:
            return self._op_result(tensors[:1], call, frame, LAYOUT_CONTIGUOUS, alias=tensors[0].alias)
        if member in api.DETACHING_METHODS and tensors:
            return tensors[0].but(autograd=AG_NONE)
        if member in api.NON_DIFFERENTIABLE:
            return self._op_result(tensors, call, frame, LAYOUT_CONTIGUOUS, differentiable=False)
        if member in api.VALUES_INDICES and tensors:
            return self._values_indices(tensors[0], call, frame)
        if member in ("no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "manual_seed", "save",
                      "load", "compile", "jit"):
            return UNKNOWN_VALUE
        if any(t.kind in TENSOR_KINDS or t.kind == INPUT for t in tensors):
            return self._op_result(tensors, call, frame, LAYOUT_CONTIGUOUS)
        return UNKNOWN_VALUE

    def _functional(self, member: str, qualified: str, args, call: cst.Call, frame) -> Value:
        tensors = [self.value(a, frame) for a in args]
        if member in api.FUNCTIONAL_LOSSES:
            return self._loss(call, frame, tensors)
        if member in ("softmax", "log_softmax", "softmin", "gumbel_softmax"):
            return self._op_result(tensors[:1], call, frame, LAYOUT_CONTIGUOUS,
                                   activation=("softmax", call) if member == "softmax" else None)
        if member == "sigmoid":
            return self._elementwise(tensors[:1], call, frame, activation="sigmoid")
        if member in api.FUNCTIONAL_ELEMENTWISE:
            return self._elementwise(tensors[:1] or tensors, call, frame)
        if member in api.FUNCTIONAL_NEW or True:
            first = tensors[0] if tensors else UNKNOWN_VALUE
            layout = LAYOUT_CONTIGUOUS
            if member in api.FUNCTIONAL_LAYOUT_KEEPING and first.layout.state in (PERMUTED, MAYBE_PERMUTED):
                layout = LAYOUT_MAYBE
            if not tensors:
                return Value(TENSOR, AG_UNKNOWN, layout)
            return self._op_result(tensors, call, frame, layout)

    def _factory(self, member: str, args, call: cst.Call, frame) -> Value:
        flag = _keyword(call, "requires_grad")
        leaf = type(flag) is cst.Name and flag.value == "True"
        device_expr = _keyword(call, "device")
        device = self._device_from(device_expr, call, frame) if device_expr is not None else Device(HOST, node=call)
        dtype_expr = _keyword(call, "dtype")
        dtype = None
        if dtype_expr is not None:
            dtype_value = self.value(dtype_expr, frame)
            dtype = dtype_value.detail if dtype_value.kind == DTYPE else None
        shape = None
        if member in ("zeros", "ones", "empty", "rand", "randn", "full") and call.args:
            sizes = call.args[:1] if member == "full" else call.args
            shape = _shape_arguments([a for a in sizes if a.keyword is None])
            if member == "full" and shape is not None and len(shape) == 1 and type(call.args[0].value) in (cst.Tuple, cst.List):
                pass
        return Value(TENSOR, AG_LEAF if leaf else AG_NONE, LAYOUT_CONTIGUOUS, device=device, dtype=dtype,
                     shape=shape, site=call)

    def _device_from(self, expr: Optional[cst.BaseExpression], call, frame) -> Optional[Device]:
        """The device an expression names: a literal string, a `torch.device(...)`, a name bound to
        one, or a device-looking expression (`device`, `args.device`) of unknown value."""
        if expr is None:
            return None
        if type(expr) is cst.SimpleString:
            return _device_of_string(string_text(expr), call)
        value = self.value(expr, frame)
        if value.kind == STRING and isinstance(value.detail, str) and api.DEVICE_STRING.match(value.detail):
            # a name bound to one device string (`DEVICE = "cpu"`, here or in config.py)
            return _device_of_string(value.detail, call)
        if value.kind == DEVICE and isinstance(value.detail, Device):
            device = value.detail
            if device.where == CHOSEN:
                return Device(CHOSEN, self.sem.source(expr), call)
            return Device(device.where, device.spelled, call)
        if value.kind == NUMBER and type(expr) is cst.Integer:
            return Device(CUDA, None, call)
        if type(expr) in (cst.Name, cst.Attribute) and api.DEVICE_NAME.search(
                expr.value if type(expr) is cst.Name else expr.attr.value):
            return Device(CHOSEN, self.sem.source(expr), call)
        if type(expr) in (cst.IfExp, cst.FormattedString):
            return Device(CHOSEN, self.sem.source(expr), call)
        return None

    def _module_construction(self, qualified: str, member: str, args, call: cst.Call, frame) -> Value:
        if api.is_loss_class(qualified):
            reduction = effective_reduction(self.sem, call)
            if member == "AdaptiveLogSoftmaxWithLoss":
                reduction = "none"  # it returns a tuple
            role = "reduced" if reduction in ("mean", "sum") else ("unreduced" if reduction == "none" else None)
            return Value(CRITERION, AG_NONE, detail=_canonical(qualified), site=call, role=role)
        stochastic = None
        if api.STOCHASTIC_LAYERS.match(_canonical(qualified)):
            if not (member.startswith("InstanceNorm") and not _is_true(_keyword(call, "track_running_stats"))) \
                    and not (member in api.DROPOUT_MODULES and _drops_nothing(call)):
                stochastic = member
        activation = api.ACTIVATION_MODULES.get(_canonical(qualified))
        parts = None
        canonical = _canonical(qualified)
        if canonical in api.MODULE_CONTAINERS:
            parts = self._container_parts(canonical, call, frame)
            if canonical == "torch.nn.Sequential" and parts:
                activation = self.output_activation(parts[-1])
        stateless = member in api.STATELESS_MODULES
        device_expr = _keyword(call, "device")
        device = self._device_from(device_expr, call, frame) if device_expr is not None else None
        dtype_expr = _keyword(call, "dtype")
        dtype = "float32" if dtype_expr is None else None
        if dtype_expr is not None:
            dtype_value = self.value(dtype_expr, frame)
            dtype = dtype_value.detail if dtype_value.kind == DTYPE else None
        return Value(MODULE, AG_NONE, module=ModuleInfo(canonical, stochastic=stochastic, stateless=stateless,
                                                        activation=activation, parts=parts),
                     site=call, device=device, dtype=dtype)

    def _container_parts(self, canonical: str, call: cst.Call, frame) -> Optional[Tuple[Value, ...]]:
        if canonical == "torch.nn.Sequential":
            parts = []
            for arg in call.args:
                if arg.keyword is not None:
                    return None
                value = self.value(arg.value, frame)
                if arg.star:
                    element = self._iterate(value)
                    if element.kind != MODULE:
                        return None
                    parts.append(element)
                    continue
                if value.kind == CONTAINER and value.detail == "dict":  # OrderedDict of layers
                    return None
                parts.append(value)
            return tuple(parts)
        if call.args and call.args[0].keyword is None:
            value = self.value(call.args[0].value, frame)
            element = self._iterate(value)
            if element.kind == MODULE:
                return (element,)
        return None

    def _loss(self, call: cst.Call, frame, tensors: Optional[List[Value]] = None,
              criterion: Optional[Value] = None) -> Value:
        """A loss: 0-d unless the call (or the criterion's construction) asks for no reduction."""
        if tensors is None:
            tensors = [self.value(a.value, frame) for a in call.args if a.keyword is None and not a.star]
        mode = self.grad_mode(call, frame)
        if criterion is None:
            scalar = effective_reduction(self.sem, call) in ("mean", "sum")
        else:
            scalar = criterion.role == "reduced"
        if mode == GRAD_OFF:
            autograd = AG_NONE
        else:
            # Every operand that may be a tensor counts: one the analysis cannot see (the output
            # of an imported model) may carry a graph, so it never makes the loss graph-free.
            inputs = [t for t in tensors if t.kind not in _NOT_TENSORS]
            if inputs and all(t.autograd == AG_NONE for t in inputs):
                autograd = AG_NONE
            else:
                autograd = AG_GRAPH
        return Value(LOSS, autograd, LAYOUT_CONTIGUOUS, shape=() if scalar else None,
                     device=_common_device(tensors), site=call)

    def _parameter_owners(self, expr: cst.BaseExpression, frame) -> Optional[frozenset]:
        """The modules whose parameters an optimizer's first argument holds: `G.parameters()`,
        and the union over `itertools.chain(G.parameters(), E.parameters())` or
        `list(G.parameters()) + list(E.parameters())` (None when any part is unknown)."""
        parts: Optional[List[cst.BaseExpression]] = None
        if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Add:
            parts = [expr.left, expr.right]
        elif type(expr) is cst.Call and self.sem.qualified_name(expr.func) == "itertools.chain" and \
                expr.args and all(a.keyword is None and not a.star for a in expr.args):
            parts = [a.value for a in expr.args]
        if parts is None:
            return _owners(self.value(expr, frame))
        owners: frozenset = frozenset()
        for part in parts:
            found = self._parameter_owners(part, frame)
            if found is None:
                return None
            owners |= found
        return owners

    def _reduction(self, tensor: Value, member: str, call: cst.Call, rest: Sequence[cst.Arg], frame) -> Value:
        # Anything but dtype/keepdim/out may name dimensions: `dim=`, numpy's `axis=`, `**kw`.
        has_dim = any(a.star or a.keyword is None or a.keyword.value not in _NON_DIM_KEYWORDS for a in rest) or \
            any(_keyword(call, name) is not None for name in ("dim", "axis"))
        differentiable = member not in api.NON_DIFFERENTIABLE_REDUCTIONS
        keepdim = _keyword(call, "keepdim")
        if member in ("max", "min", "median", "mode") and has_dim:
            values = self._op_result([tensor], call, frame, LAYOUT_CONTIGUOUS)
            indices = Value(TENSOR, AG_NONE, LAYOUT_CONTIGUOUS, device=tensor.device)
            return Value(CONTAINER, AG_NONE, items=(values, indices), element=join(values, indices))
        shape = None if has_dim or keepdim is not None else ()
        result = self._op_result([tensor], call, frame, LAYOUT_CONTIGUOUS, differentiable=differentiable, shape=shape)
        return result

    def _values_indices(self, tensor: Value, call, frame) -> Value:
        values = self._op_result([tensor], call, frame, LAYOUT_CONTIGUOUS)
        indices = Value(TENSOR, AG_NONE, LAYOUT_CONTIGUOUS, device=tensor.device)
        return Value(CONTAINER, AG_NONE, items=(values, indices), element=join(values, indices))

    def module_output(self, module: Value, inputs: Sequence[Value], call, frame) -> Value:
        info = module.module
        if info is not None and info.klass is not None:
            forward = self.method(info.klass, "forward")
            if forward is not None:
                return self.call_function(forward, call, frame, self_value=module, arguments=inputs)
        mode = self.grad_mode(call, frame)
        first = inputs[0] if inputs else UNKNOWN_VALUE
        qualified = info.qualified if info is not None else None
        member = qualified.rsplit(".", 1)[-1] if qualified else None
        if info is not None and info.parts and qualified == "torch.nn.Sequential":
            value = first
            for part in info.parts:
                value = self.module_output(part, [value], call, frame)
            return value
        if info is not None and info.stateless and member not in api.DROPOUT_MODULES:
            layout = first.layout if member in api.LAYOUT_KEEPING_MODULES else LAYOUT_CONTIGUOUS
            if layout.state == PERMUTED:
                layout = LAYOUT_MAYBE
            activation = (info.activation, call) if info.activation else None
            return self._op_result(inputs, call, frame, layout, activation=activation)
        if mode == GRAD_OFF:
            autograd = AG_NONE
        elif mode == GRAD_UNKNOWN:
            autograd = AG_MAYBE
        else:
            autograd = AG_GRAPH
        layout = LAYOUT_CONTIGUOUS
        if first.layout.state in (PERMUTED, MAYBE_PERMUTED) and (member is None or member in api.LAYOUT_KEEPING_MODULES):
            layout = LAYOUT_MAYBE
        if info is not None and info.output is not None:
            # A class of another project file: its forward's layout (a ViT patch embedding's
            # `x.flatten(2).transpose(1, 2)`), when what goes in is laid out in order.
            if info.output.layout.state != PERMUTED or all(
                    v.layout.state == CONTIGUOUS for v in inputs if v.kind in TENSOR_KINDS or v.kind == INPUT):
                layout = info.output.layout if info.output.layout.state != LAYOUT_NOT_KNOWN.state else LAYOUT_MAYBE
            else:
                layout = LAYOUT_NOT_KNOWN
            if info.output.autograd == AG_NONE:
                autograd = AG_NONE  # its forward runs under no_grad there (a frozen feature extractor)
        activation = (info.activation, call) if info is not None and info.activation else None
        out = Value(TENSOR, autograd, layout, device=module.device or _common_device(inputs), activation=activation)
        if member in api.RECURRENT:
            hidden = out.but(activation=None)
            if member == "LSTM":
                hidden = Value(CONTAINER, AG_NONE, items=(out, out), element=out)
            if member == "LSTMCell":
                return Value(CONTAINER, AG_NONE, items=(out, out), element=out)
            return Value(CONTAINER, AG_NONE, items=(out, hidden), element=join(out, hidden))
        return out

    def _module_method(self, module: Value, method: str, call: cst.Call, frame) -> Optional[Value]:
        if method in ("parameters",):
            return Value(CONTAINER, AG_NONE, element=self._parameter(module.site, module.device))
        if method == "named_parameters":
            return Value(CONTAINER, AG_NONE, element=Value(CONTAINER, AG_NONE, items=(
                STRING_VALUE, self._parameter(module.site, module.device))))
        if method in ("children", "modules"):
            return Value(CONTAINER, AG_NONE, element=Value(MODULE, AG_NONE, module=ModuleInfo(), device=module.device))
        if method in ("named_children", "named_modules"):
            return Value(CONTAINER, AG_NONE, element=Value(CONTAINER, AG_NONE, items=(
                STRING_VALUE, Value(MODULE, AG_NONE, module=ModuleInfo(), device=module.device))))
        if method in ("buffers",):
            return Value(CONTAINER, AG_NONE, element=Value(TENSOR, AG_NONE, LAYOUT_CONTIGUOUS, device=module.device))
        if method in api.MODULE_DEVICE_METHODS or method == "to":
            device = self._move_device(method, call, frame, module.device)
            dtype = self._module_dtype_after_to(call, frame, module.dtype) if method == "to" else module.dtype
            if method == "to" and device is module.device and dtype == module.dtype:
                return module
            return module.but(device=device, dtype=dtype)
        if method in api.MODULE_DTYPE_METHODS:
            return module.but(dtype=_MODULE_DTYPES[method])
        if method in ("type", "to_empty"):
            return module.but(dtype=None, device=None if method == "to_empty" else module.device)
        if method in api.MODULE_SELF_METHODS:
            return module
        if method == "forward":
            inputs = [self.value(a.value, frame) for a in call.args if not a.star]
            return self.module_output(module, inputs, call, frame)
        if method in ("state_dict",):
            return Value(CONTAINER, AG_NONE, detail="dict")
        if method in ("register_buffer", "register_parameter", "add_module", "load_state_dict",
                      "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook"):
            return UNKNOWN_VALUE
        return None

    def _module_dtype_after_to(self, call: cst.Call, frame, current: Optional[str]) -> Optional[str]:
        """A module's parameter dtype after `.to(...)`: a dtype argument sets it, a device keeps
        it, anything else (`.to(other_tensor)`, `.to(*args)`) makes it unknown."""
        dtype = current
        for arg in call.args:
            if arg.star:
                return None
            if arg.keyword is not None and arg.keyword.value not in ("device", "dtype"):
                continue
            value = self.value(arg.value, frame)
            if value.kind == DTYPE:
                dtype = value.detail
            elif arg.keyword is not None and arg.keyword.value == "dtype":
                return None
            elif value.kind == DEVICE or self._device_from(arg.value, call, frame) is not None:
                continue
            else:
                return None
        return dtype

    def _move_device(self, method: str, call: cst.Call, frame, current: Optional[Device]) -> Optional[Device]:
        if method == "cuda":
            return Device(CUDA, None, call)
        if method == "cpu":
            return Device(HOST, None, call)
        if method in ("xpu", "mps"):
            return Device(CHOSEN, method, call)
        if method != "to":
            return current
        target = _keyword(call, "device")
        if target is None and call.args and call.args[0].keyword is None:
            target = call.args[0].value
        if target is None:
            return current
        value = self.value(target, frame)
        if value.kind == DTYPE:
            return current
        if value.kind in TENSOR_KINDS:
            return value.device
        found = self._device_from(target, call, frame)
        return found

    def _tensor_method(self, tensor: Value, method: str, call: cst.Call, frame) -> Optional[Value]:
        args = [a.value for a in call.args if a.keyword is None and not a.star]
        as_tensor = tensor if tensor.kind != INPUT else tensor.but(kind=TENSOR)
        if method in api.INPLACE_METHODS:
            return tensor
        if method == "requires_grad_":
            if call.args and not _is_true(call.args[0].value):
                return tensor.but(autograd=AG_NONE)
            fresh = tensor.autograd == AG_NONE and tensor.alias is None
            return as_tensor.but(kind=PARAMETER if fresh else as_tensor.kind,
                                 autograd=AG_LEAF if fresh else AG_REQUIRES)
        if method in api.SELF_RETURNING:
            return tensor
        if method in api.DETACHING_METHODS:
            return as_tensor.but(autograd=AG_NONE, kind=TENSOR if tensor.kind != LOSS else LOSS)
        if method in api.TO_PYTHON:
            return NUMBER_VALUE if method == "item" else Value(CONTAINER, AG_NONE, element=NUMBER_VALUE)
        if method in api.TO_NUMPY:
            return Value(UNKNOWN, AG_NONE)
        if method in api.DTYPE_CASTS:
            integer = method in ("long", "int", "short", "bool", "byte", "char")
            same = method == "float" and tensor.dtype in (None, "float32", "float") or method == tensor.dtype
            autograd = AG_NONE if integer else (AG_GRAPH if tensor.autograd == AG_LEAF and not same else tensor.autograd)
            return as_tensor.but(autograd=autograd, dtype=method, alias=None, kind=as_tensor.kind if not integer else TENSOR)
        if method in ("to", "cuda", "cpu", "type", "type_as"):
            return self._converted(as_tensor, method, call, frame)
        if method == "clone":
            return as_tensor.but(autograd=AG_GRAPH if tensor.autograd == AG_LEAF else tensor.autograd, alias=None,
                                 kind=TENSOR if tensor.kind == PARAMETER else as_tensor.kind, site=call)
        if method == "contiguous":
            return as_tensor.but(layout=LAYOUT_CONTIGUOUS, alias=None if tensor.layout.state != CONTIGUOUS else tensor.alias)
        if method in ("view", "view_as"):
            autograd = AG_GRAPH if tensor.autograd == AG_LEAF else tensor.autograd
            if method == "view" and len(args) == 1 and self.value(args[0], frame).kind == DTYPE:
                return as_tensor.but(autograd=autograd)
            shape = _shape_arguments(call.args) if method == "view" else None
            layout = LAYOUT_CONTIGUOUS if tensor.layout.state == CONTIGUOUS else LAYOUT_NOT_KNOWN
            return as_tensor.but(autograd=autograd, shape=shape, layout=layout,
                                 kind=TENSOR if tensor.kind == PARAMETER else as_tensor.kind)
        if method in api.RESHAPING:
            autograd = AG_GRAPH if tensor.autograd == AG_LEAF else tensor.autograd
            shape = _shape_arguments(call.args) if method == "reshape" else None
            return as_tensor.but(autograd=autograd, shape=shape, layout=LAYOUT_CONTIGUOUS,
                                 alias=tensor.alias if tensor.layout.state == CONTIGUOUS else None,
                                 kind=TENSOR if tensor.kind == PARAMETER else as_tensor.kind)
        if method in api.TRANSPOSING:
            if method == "t" and call.args:
                return None
            numbers = _ints(call.args) if call.args else []
            if numbers is None:
                return as_tensor.but(layout=LAYOUT_NOT_KNOWN, shape=None)
            return self._transposed(as_tensor, method, tuple(numbers), call)
        if method in api.OTHER_VIEWS:
            autograd = AG_GRAPH if tensor.autograd == AG_LEAF else tensor.autograd
            layout = LAYOUT_CONTIGUOUS if tensor.layout.state == CONTIGUOUS and method in (
                "squeeze", "unsqueeze", "unflatten", "narrow", "select") else LAYOUT_NOT_KNOWN
            return as_tensor.but(autograd=autograd, layout=layout, shape=None,
                                 kind=TENSOR if tensor.kind == PARAMETER else as_tensor.kind,
                                 activation=tensor.activation if method in ("squeeze", "unsqueeze") else None)
        if method in ("softmax", "log_softmax"):
            return self._op_result([tensor], call, frame, LAYOUT_CONTIGUOUS,
                                   activation=("softmax", call) if method == "softmax" else None)
        if method == "sigmoid":
            return self._elementwise([as_tensor], call, frame, activation="sigmoid")
        if method == "masked_fill":
            return self._op_result([as_tensor] + [self.value(a, frame) for a in args[1:]], call, frame,
                                   LAYOUT_CONTIGUOUS, shape=tensor.shape)
        if method in api.COMPARISONS:
            return self._elementwise([as_tensor] + [self.value(a, frame) for a in args], call, frame,
                                     differentiable=False)
        if method in api.ELEMENTWISE:
            return self._elementwise([as_tensor] + [self.value(a, frame) for a in args], call, frame)
        if method in ("max", "min") and args and self.value(args[0], frame).is_tensor:
            return self._elementwise([as_tensor, self.value(args[0], frame)], call, frame)
        if method in api.REDUCTIONS:
            return self._reduction(as_tensor, method, call, call.args, frame)
        if method in api.VALUES_INDICES:
            return self._values_indices(as_tensor, call, frame)
        if method in api.MATMUL:
            return self._op_result([as_tensor] + [self.value(a, frame) for a in args], call, frame, LAYOUT_CONTIGUOUS)
        if method in api.SPLITTING:
            piece = as_tensor.but(layout=LAYOUT_NOT_KNOWN, shape=None, alias=tensor.alias,
                                  autograd=AG_GRAPH if tensor.autograd == AG_LEAF else tensor.autograd)
            return Value(CONTAINER, AG_NONE, element=piece)
        if method in api.NEW_FACTORIES:
            return Value(TENSOR, AG_NONE, LAYOUT_CONTIGUOUS, device=tensor.device, dtype=tensor.dtype, site=call)
        if method in ("size",):
            return NUMBER_VALUE if args else Value(CONTAINER, AG_NONE, element=NUMBER_VALUE, detail="shape")
        if method in ("dim", "numel", "nelement", "element_size", "is_contiguous", "get_device", "data_ptr",
                      "stride", "is_floating_point"):
            return NUMBER_VALUE
        if method in ("backward", "retain_grad", "register_hook"):
            return NONE_VALUE
        if method in api.NON_DIFFERENTIABLE:
            return self._op_result([as_tensor], call, frame, LAYOUT_CONTIGUOUS, differentiable=False)
        if method in ("index_select", "gather", "masked_select", "repeat", "repeat_interleave", "roll", "flip",
                      "cumsum", "cumprod", "tril", "triu", "diag", "outer", "index_add", "scatter", "scatter_add",
                      "norm", "renorm", "lerp", "addmm", "where", "clamp"):
            return self._op_result([as_tensor] + [self.value(a, frame) for a in args], call, frame, LAYOUT_CONTIGUOUS)
        if tensor.kind in TENSOR_KINDS:
            return self._op_result([as_tensor], call, frame, LAYOUT_NOT_KNOWN)
        return None

    def _converted(self, tensor: Value, method: str, call: cst.Call, frame) -> Value:
        """`.to(...)`, `.cuda()`, `.cpu()`, `.type(...)`: a new device or dtype, same layout. A
        leaf moved or cast is no longer a leaf when the move or cast certainly changes something;
        when it may (`.to(device)` of a chosen device) its leafness is unknown."""
        device = tensor.device
        dtype = tensor.dtype
        change = _NO_CHANGE
        if method in ("cuda", "cpu"):
            device = self._move_device(method, call, frame, tensor.device)
            change = _device_change(tensor.device, device)
        elif method == "to":
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value not in ("device", "dtype"):
                    continue
                value = self.value(arg.value, frame)
                if (arg.keyword is not None and arg.keyword.value == "dtype") or value.kind == DTYPE:
                    dtype = value.detail if value.kind == DTYPE else None
                    same = dtype in ("float32", "float") and tensor.dtype in (None, "float32", "float") \
                        or (dtype is not None and dtype == tensor.dtype)
                    change = max(change, _NO_CHANGE if same else (_CHANGE if dtype is not None else _MAY_CHANGE))
                elif value.kind in TENSOR_KINDS:
                    change = max(change, _device_change(tensor.device, value.device))
                    device = value.device
                else:
                    found = self._device_from(arg.value, call, frame)
                    change = max(change, _device_change(tensor.device, found))
                    device = found
        elif method in ("type", "type_as"):
            change = _MAY_CHANGE
            dtype = None
            legacy = _legacy_tensor_type(self.sem, call.args[0].value) if method == "type" and len(call.args) == 1 else None
            if legacy is not None:
                dtype = legacy[0]
                if legacy[1]:
                    device = Device(CUDA, None, call)
            elif call.args:
                # `imgs.type(Tensor)` with `Tensor = torch.cuda.FloatTensor if cuda else
                # torch.FloatTensor`, `x.type_as(y)`: the target may be on another device; a dtype
                # (`x.type(torch.float16)`) keeps it.
                target = self.value(call.args[0].value, frame)
                if method == "type_as":
                    device = target.device if target.kind in TENSOR_KINDS else None
                elif target.kind != DTYPE and not _is_dtype(self.sem, call.args[0].value):
                    device = None
        autograd = tensor.autograd
        if autograd == AG_LEAF and change != _NO_CHANGE:
            autograd = AG_GRAPH if change == _CHANGE else AG_REQUIRES
        kind = TENSOR if tensor.kind == PARAMETER and autograd != AG_LEAF else tensor.kind
        return tensor.but(device=device, dtype=dtype, autograd=autograd,
                          alias=tensor.alias if change == _NO_CHANGE else None, kind=kind)


_NO_CHANGE, _MAY_CHANGE, _CHANGE = 0, 1, 2
_LEGACY_TYPE = re.compile(r"^torch\.(cuda\.)?(Float|Double|Half|BFloat16|Long|Int|Short|Char|Byte|Bool)Tensor$")
_LEGACY_DTYPES = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16",
                  "Long": "int64", "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool"}


def _is_dtype(sem, expr: cst.BaseExpression) -> bool:
    """`torch.float16`, `torch.long` (or their names as strings): a dtype, which moves nothing."""
    if type(expr) is cst.SimpleString:
        text = string_text(expr) or ""
        return text.startswith("torch.") and api.is_dtype_name(text[6:])
    qualified = sem.qualified_name(expr) or ""
    return qualified.startswith("torch.") and qualified.count(".") == 1 and api.is_dtype_name(qualified[6:])


def _legacy_tensor_type(sem, expr: cst.BaseExpression) -> Optional[Tuple[str, bool]]:
    """For `torch.cuda.HalfTensor` (or its name as a string): (its dtype, whether it is CUDA)."""
    spelled = string_text(expr) if type(expr) is cst.SimpleString else sem.qualified_name(expr)
    found = _LEGACY_TYPE.match(spelled or "")
    if found is None:
        return None
    return _LEGACY_DTYPES[found.group(2)], bool(found.group(1))
# The parameter dtype each nn.Module conversion method leaves.
_MODULE_DTYPES = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16"}


def _device_change(before: Optional[Device], after: Optional[Device]) -> int:
    """Whether moving a tensor from `before` to `after` certainly copies it (_CHANGE), may
    (_MAY_CHANGE: a chosen or unknown device), or certainly does not."""
    if before is None or after is None:
        return _MAY_CHANGE
    if before.where in (HOST, CUDA, META) and after.where in (HOST, CUDA, META):
        return _NO_CHANGE if before.where == after.where and before.spelled == after.spelled else _CHANGE
    return _NO_CHANGE if before == after else _MAY_CHANGE


def _looks_like_a_tensor_call(call: cst.Call, method: str) -> bool:
    """`x.sigmoid()`, `x.t()`: called as the tensor method is (`self.sigmoid(z)` calls a submodule
    named like one)."""
    receiver = call.func.value
    if type(receiver) is cst.Name and receiver.value == "self":
        return False
    return not (method in ("sigmoid", "t", "contiguous", "detach") and call.args)


def _canonical(qualified: str) -> str:
    """`torch.nn.modules.loss.MSELoss` -> `torch.nn.MSELoss`."""
    parts = qualified.split(".")
    if len(parts) == 5 and parts[:3] == ["torch", "nn", "modules"]:
        return f"torch.nn.{parts[4]}"
    return qualified



def _common_device(values: Sequence[Value]) -> Optional[Device]:
    devices = [v.device for v in values if v.kind in TENSOR_KINDS and v.device is not None]
    if not devices:
        return None
    first = devices[0]
    return first if all(d == first for d in devices) else None


def _owners(params: Value) -> Optional[frozenset]:
    """The modules (by construction site) whose parameters `params` holds."""
    element = params.element if params.kind == CONTAINER else None
    if element is None:
        return None
    if element.kind == PARAMETER and element.site is not None:
        return frozenset({id(element.site)})
    if element.kind == CONTAINER and element.element is not None and element.element.kind == PARAMETER \
            and element.element.site is not None:
        return frozenset({id(element.element.site)})
    return None


def _ints(args: Sequence[cst.Arg]) -> Optional[List[int]]:
    """`(0, 2, 1)` spelled as arguments or as one tuple/list argument."""
    if any(arg.keyword is not None or arg.star for arg in args):
        return None
    if len(args) == 1 and type(args[0].value) in (cst.Tuple, cst.List):
        elements = args[0].value.elements
        if any(type(element) is cst.StarredElement for element in elements):
            return None
        values = [element.value for element in elements]
    else:
        values = [arg.value for arg in args]
    numbers = []
    for value in values:
        number = _int(value)
        if number is None:
            return None
        numbers.append(number)
    return numbers


def _int(expr: cst.BaseExpression) -> Optional[int]:
    if type(expr) is cst.Integer:
        return int(expr.value, 0)
    if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Minus:
        inner = _int(expr.expression)
        return None if inner is None else -inner
    return None


def _shape_arguments(args: Sequence[cst.Arg]):
    if len(args) == 1 and type(args[0].value) in (cst.Tuple, cst.List) and not args[0].star:
        elements = args[0].value.elements
        if any(type(element) is cst.StarredElement for element in elements):
            return None
        return tuple(Dim(element.value) for element in elements)
    if not args or any(arg.star or arg.keyword is not None for arg in args):
        return None
    return tuple(Dim(arg.value) for arg in args)


def _order(operation: str, numbers: Tuple[int, ...], rank: Optional[int]) -> Optional[Tuple[int, ...]]:
    if rank is None and operation == "permute" and numbers:
        rank = len(numbers)
    if rank is None:
        return None
    found = permutation(operation, numbers, rank)
    return None if found is None else tuple(found)


def _undoes(layout: Layout, operation: str, numbers: Tuple[int, ...]) -> bool:
    """Whether `operation(*numbers)` undoes `layout`'s permutation at every rank the two allow
    (`x.transpose(1, 2).transpose(1, 2)` of a tensor of unknown rank)."""
    if layout.operation is None:
        return False
    touched = [n + 1 if n >= 0 else -n for n in layout.numbers + numbers] or [2]
    lowest = max([2] + touched)
    for rank in range(lowest, lowest + 4):
        first = permutation(layout.operation, layout.numbers, rank)
        second = permutation(operation, numbers, rank)
        if first is None or second is None or [first[i] for i in second] != list(range(rank)):
            return False
    return True


def _permute_shape(shape, order):
    if shape is None or order is None or len(shape) != len(order):
        return None
    return tuple(shape[i] for i in order)


def string_text(node: cst.CSTNode) -> Optional[str]:
    """The text of a plain string literal (`"cuda:0"`, `'params'`), without LibCST's
    `evaluated_value` (an `ast.literal_eval`, which compiles, for every string)."""
    if type(node) is not cst.SimpleString:
        return None
    literal = node.value
    prefix = node.prefix.lower()
    if "b" in prefix or "f" in prefix:
        return None
    body = literal[len(node.prefix):]
    quote = 3 if body[:3] in ('"""', "\'\'\'") else 1
    text = body[quote:-quote]
    if "\\" in text and "r" not in prefix:
        try:
            evaluated = node.evaluated_value
        except Exception:  # noqa: BLE001 - odd literal
            return None
        return evaluated if isinstance(evaluated, str) else None
    return text


def _keyword(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def _is_true(node) -> bool:
    return type(node) is cst.Name and node.value == "True"


def _drops_nothing(call: cst.Call) -> bool:
    """`nn.Dropout(0)`, `nn.Dropout(p=0.0)`: a dropout layer with probability 0 is the identity in
    training mode too (measured on torch 2.13: `nn.Dropout(0)(x)` equals `x` in train mode)."""
    p = _keyword(call, "p")
    if p is None and call.args and call.args[0].keyword is None and not call.args[0].star:
        p = call.args[0].value
    if isinstance(p, cst.Integer):
        return int(p.value, 0) == 0
    if isinstance(p, cst.Float):
        try:
            return float(p.value) == 0.0
        except ValueError:
            return False
    return False
