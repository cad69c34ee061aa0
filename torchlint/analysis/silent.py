"""Facts for the rules TL110–TL117: bugs that raise nothing (a result thrown away, a method named
and not called, a layer built in `forward`, a BatchNorm given the wrong rank, a NaN test that can
never hold, `.numpy()` on a tensor with a graph, `zero_grad()` between `backward()` and `step()`).

The torch knowledge is data: which tensor methods and torch functions return a new tensor and
leave their input alone, which methods of which kind of object must be called, which ranks each
layer takes and gives. Names come from torch 2.13 (`dir(torch.Tensor)`, `torch.nn.functional`);
the ranks were measured on torch 2.13 CPU (see the rules' docs). Like every fact, each answer is
"no" when the code does not make it clear.
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, Optional, Tuple

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.out_of_place import (  # noqa: F401 (the tables, read from here too)
    DEVICE_AND_DTYPE_MOVES, OUT_OF_PLACE_FUNCTIONAL, OUT_OF_PLACE_METHODS, OUT_OF_PLACE_TORCH)
from torchlint.analysis.semantic import Semantic, keyword
from torchlint.analysis.value import GRAD_OFF, GRAD_UNKNOWN, MODULE, OPTIMIZER, SCHEDULER, GRAD_SCALER
from torchlint.positions import code_for_node


# -- out-of-place operations (TL110): the tables are in out_of_place.py (the run reads them too) -


def discarded_operation(sem: Semantic, call: cst.Call) -> Optional[Tuple[str, cst.BaseExpression]]:
    """When the statement `call` (an expression statement) certainly computes a new tensor and
    throws it away: (the operation's name, the tensor it was applied to). Methods count only on a
    receiver the value model knows is a tensor; torch functions on any argument (they never
    write it without `out=` / `inplace=True`)."""
    func = call.func
    if keyword(call, "out") is not None or _true_keyword(call, "inplace"):
        return None
    if type(func) is cst.Attribute and sem.qualified_name(func) is None:
        method = func.attr.value
        if method not in OUT_OF_PLACE_METHODS:
            return None
        if method == "type" and not call.args:
            return None  # `x.type()` returns the type's name; harmless either way
        if not certainly_tensor(sem, func.value):
            return None
        return method, func.value
    name = sem.qualified_name(func)
    if name is None or not call.args or call.args[0].keyword is not None or call.args[0].star:
        return None
    member = api.torch_member(name)
    if (name == f"torch.{member}" and member in OUT_OF_PLACE_TORCH) or (
            name == f"torch.nn.functional.{member}" and member in OUT_OF_PLACE_FUNCTIONAL):
        if member.startswith("dropout") or member.endswith("dropout"):
            # F.dropout(x, p, training, inplace): positional `inplace` is the fourth argument;
            # as for the keyword, only a literal `False` is certainly out of place
            if len(call.args) >= 4 and not _is_false(call.args[3].value):
                return None
        elif name.startswith("torch.nn.functional.") and len(call.args) >= 2 \
                and member in ("relu", "relu6", "elu", "selu", "celu", "leaky_relu", "hardtanh",
                               "threshold", "rrelu", "hardswish", "hardsigmoid", "silu", "mish"):
            return None  # a positional argument may be `inplace`: too many spellings to be sure
        return _short(name), call.args[0].value
    return None


def _short(name: str) -> str:
    return name.replace("torch.nn.functional.", "F.")


def _is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def _true_keyword(call: cst.Call, name: str) -> bool:
    """`name=` passed with anything but a literal `False` (which may be True)."""
    value = keyword(call, name)
    return value is not None and not _is_false(value)


def read_later(sem: Semantic, name: cst.Name, statement: cst.CSTNode) -> Optional[cst.Name]:
    """A read of `name` after `statement` (or, in a loop, anywhere in the loop: the next
    iteration), in the same scope, that sees the same binding `name` sees at `statement`
    (nothing rebinds it in between): the program goes on with the value the statement did not
    change. None when there is none (or it cannot be told)."""
    definitions = sem.values.flow.reaching(name)
    if not definitions:
        return None
    ids = {id(d) for d in definitions}
    scope = sem.function_of(statement)
    body = scope if scope is not None else sem.module
    order = sem.index.order
    start = order[statement]
    # Inside a loop, a read earlier in the body sees the value on the next iteration.
    loops = sem.enclosing_loops(statement)
    outermost = loops[-1] if loops else None
    later = [n for n in sem.index.names_under(body, name.value)
             if n is not name and sem.function_of(n) is scope
             and (order[n] > start or (outermost is not None and sem.index.contains(outermost, n)))]
    for use in sorted(later, key=order.__getitem__):
        if sem.values.flow.definition_of_store(use) is not None:
            continue
        reaching = sem.values.flow.reaching(use)
        if not reaching:
            continue
        if order[use] > start:
            if any(id(d) in ids for d in reaching):
                return use
            continue
        # earlier in the loop: only a binding the back edge brings (made at or after the use's
        # statement in the body) carries this iteration's value to it
        used_at = order[sem.statement_of(use)]
        if any(id(d) in ids and d.statement in order and sem.index.contains(outermost, d.statement)
               and order[d.statement] >= used_at for d in reaching):
            return use
    return None


# -- methods named, not called (TL111) ----------------------------------------------------------
# The methods that only act when called, by the kind of object they belong to.
MUST_CALL: Dict[str, FrozenSet[str]] = {
    MODULE: frozenset("eval train zero_grad cuda cpu float half double bfloat16 requires_grad_".split()),
    OPTIMIZER: frozenset("zero_grad step".split()),
    SCHEDULER: frozenset({"step"}),
    GRAD_SCALER: frozenset("step update".split()),
    "tensor": frozenset("backward retain_grad requires_grad_ zero_".split()),
}


def must_call_kind(sem: Semantic, attribute: cst.Attribute) -> Optional[str]:
    """The kind of object (`module`, `optimizer`, `scheduler`, `grad_scaler`, `tensor`) whose
    method `attribute` names, when the receiver certainly is one and the method only acts when
    called."""
    method = attribute.attr.value
    if not any(method in names for names in MUST_CALL.values()):
        return None
    value = sem.values.of(attribute.value)
    kind = "tensor" if value.is_tensor else value.kind
    if kind not in MUST_CALL and value.role == "optimizer":
        kind = OPTIMIZER
    if kind in MUST_CALL and method in MUST_CALL[kind]:
        return kind
    return None


# -- grad mode (TL116) --------------------------------------------------------------------------

def grad_may_be_off(sem: Semantic, node: cst.CSTNode) -> bool:
    """`node` may run with autograd off: under `no_grad`/`inference_mode`, in a function every
    caller calls that way, or where the mode is set from a flag."""
    mode = sem.values.grad_mode(node)
    return mode in (GRAD_OFF, GRAD_UNKNOWN)


# -- BatchNorm ranks (TL113) --------------------------------------------------------------------
# The input ranks each BatchNorm takes (torch 2.13: `expected 4D input (got 2D input)`,
# `expected 2D or 3D input (got 4D input)`).
BATCHNORM_RANKS = {
    "BatchNorm1d": frozenset({2, 3}), "BatchNorm2d": frozenset({4}), "BatchNorm3d": frozenset({5}),
    "LazyBatchNorm1d": frozenset({2, 3}), "LazyBatchNorm2d": frozenset({4}), "LazyBatchNorm3d": frozenset({5}),
}
# Layers whose output rank is fixed by the layer alone, whatever the batch (batched or unbatched
# input): nn.Flatten() with its default start_dim=1 gives (N, features).
RANK_MAKING = {"Flatten": 2}
# Layers whose output has the rank of their input.
_RANK_CHANGING_STATELESS = frozenset({"Flatten", "Unflatten", "GLU", "PixelShuffle", "PixelUnshuffle", "Upsample"})
RANK_KEEPING = (
    (api.STATELESS_MODULES - _RANK_CHANGING_STATELESS
     - {n for n in api.STATELESS_MODULES if "Pool" in n or "Pad" in n})
    | api.DROPOUT_MODULES | frozenset("Linear LazyLinear Bilinear LayerNorm BatchNorm1d".split())
)
# Layers whose output's dimension 1 is their `out_features`/`out_channels` argument when the
# output has the rank they are meant for: (the rank they give a batch, the argument's position).
FEATURE_LAYERS = {
    "Linear": (2, 1), "Conv1d": (3, 1), "Conv2d": (4, 1), "Conv3d": (5, 1),
    "ConvTranspose1d": (3, 1), "ConvTranspose2d": (4, 1), "ConvTranspose3d": (5, 1),
}
# The ranks a layer's output may have (batched or not) where that is fixed by the layer.
OUTPUT_RANKS = {
    "Conv1d": frozenset({2, 3}), "Conv2d": frozenset({3, 4}), "Conv3d": frozenset({4, 5}),
    "ConvTranspose1d": frozenset({2, 3}), "ConvTranspose2d": frozenset({3, 4}),
    "ConvTranspose3d": frozenset({4, 5}),
    "MaxPool1d": frozenset({2, 3}), "MaxPool2d": frozenset({3, 4}), "MaxPool3d": frozenset({4, 5}),
    "AvgPool1d": frozenset({2, 3}), "AvgPool2d": frozenset({3, 4}), "AvgPool3d": frozenset({4, 5}),
    "AdaptiveAvgPool1d": frozenset({2, 3}), "AdaptiveAvgPool2d": frozenset({3, 4}),
    "AdaptiveAvgPool3d": frozenset({4, 5}), "AdaptiveMaxPool2d": frozenset({3, 4}),
}


# -- NaN constants (TL115) ----------------------------------------------------------------------
NAN_CONSTANTS = frozenset({"math.nan", "numpy.nan", "numpy.NaN", "numpy.NAN", "torch.nan"})


def is_nan_constant(sem: Semantic, node: cst.BaseExpression) -> bool:
    """`float("nan")` (any case, with or without a sign), `math.nan`, `np.nan`, `torch.nan`."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        node = node.expression
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "float" \
            and len(node.args) == 1 and isinstance(node.args[0].value, cst.SimpleString) \
            and sem.qualified_name(node.func) in (None, "builtins.float", "float"):
        text = node.args[0].value.evaluated_value
        return isinstance(text, str) and text.strip().lower() in ("nan", "+nan", "-nan")
    if isinstance(node, (cst.Attribute, cst.Name)):
        return sem.qualified_name(node) in NAN_CONSTANTS
    return False


# -- layers with weights (TL112) ----------------------------------------------------------------
# torch.nn classes whose instances hold trainable parameters (or running statistics) by default:
# built anew on every `forward`, their weights start random each call and no optimizer sees them.
PARAMETRIC_MODULES = frozenset("""
Linear Bilinear LazyLinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d
LazyConv1d LazyConv2d LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d
Embedding EmbeddingBag RNN LSTM GRU RNNCell LSTMCell GRUCell BatchNorm1d BatchNorm2d BatchNorm3d
LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d SyncBatchNorm LayerNorm GroupNorm RMSNorm PReLU
MultiheadAttention Transformer TransformerEncoder TransformerDecoder TransformerEncoderLayer
TransformerDecoderLayer
""".split())
# The keyword that, set to False, leaves a normalisation layer without parameters.
_AFFINE_KEYWORD = {"LayerNorm": "elementwise_affine", "RMSNorm": "elementwise_affine", "GroupNorm": "affine"}


def _false(call: cst.Call, name: str) -> bool:
    value = keyword(call, name)
    return isinstance(value, cst.Name) and value.value == "False"


def parametric_module(sem: Semantic, call: cst.Call) -> Optional[str]:
    """The class name when `call` constructs a torch.nn layer that holds parameters."""
    name = sem.qualified_name(call.func)
    if name is None or not api.is_nn_module_class(name):
        return None
    member = api.torch_member(name)
    if member not in PARAMETRIC_MODULES:
        return None
    if _false(call, _AFFINE_KEYWORD.get(member, "affine" if "BatchNorm" in member else "")):
        return None
    return member


def stateful_norm_without_parameters(sem: Semantic, call: cst.Call) -> Optional[str]:
    """The class name when `call` constructs a BatchNorm with `affine=False` that still tracks
    running statistics: no parameters, but a mode (batch statistics in training, running ones in
    eval). With `track_running_stats=False` too it is the functional form, the same in both modes."""
    name = sem.qualified_name(call.func)
    if name is None or not api.is_nn_module_class(name):
        return None
    member = api.torch_member(name)
    if member is None or "BatchNorm" not in member or member not in PARAMETRIC_MODULES:
        return None
    if _false(call, "affine") and not _false(call, "track_running_stats"):
        return member
    return None


def _layer_class(sem: Semantic, node: cst.BaseExpression) -> Optional[str]:
    if not isinstance(node, cst.Call):
        return None
    name = sem.qualified_name(node.func)
    if name is None or not api.is_nn_module_class(name):
        return None
    return api.torch_member(name)


def _argument(call: cst.Call, position: int, name: str) -> Optional[cst.BaseExpression]:
    value = keyword(call, name)
    if value is not None:
        return value
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in positional) or len(positional) <= position:
        return None
    return positional[position].value


_FEATURE_KEYWORDS = {"Linear": "out_features"}


def batchnorm_rank_mismatch(sem: Semantic, sequential: cst.Call):
    """For an `nn.Sequential(...)` call: each BatchNorm layer that certainly receives a tensor of
    a rank it rejects, as (the layer's call, its class, the rank it gets (a set), the layer before
    it, how it is known: "rank" when the ranks are fixed by the layers, "features" when the
    BatchNorm's `num_features` is the previous layer's output size in a dimension it does not
    normalise)."""
    found = []
    ranks: Optional[frozenset] = None
    features: Optional[str] = None  # the text of the feature size in dimension 1 / last
    feature_layer: Optional[str] = None
    previous: Optional[cst.Call] = None
    for arg in sequential.args:
        if arg.keyword is not None or arg.star:
            return found
        layer = _layer_class(sem, arg.value)
        call = arg.value
        if layer is None:
            ranks, features, feature_layer, previous = None, None, None, None
            continue
        if layer in BATCHNORM_RANKS:
            accepted = BATCHNORM_RANKS[layer]
            size = _argument(call, 0, "num_features")
            size_text = None if size is None else code_for_node(sem.module, size).strip()
            if ranks is not None and not (ranks & accepted):
                found.append((call, layer, ranks, previous, "rank"))
            elif ranks is not None and feature_layer is not None and size_text == features \
                    and FEATURE_LAYERS[feature_layer][0] not in accepted and ranks - accepted != ranks:
                found.append((call, layer, frozenset({FEATURE_LAYERS[feature_layer][0]}), previous, "features"))
            elif ranks is None and feature_layer == "Linear" and size_text == features \
                    and not ({2, 3} & accepted):
                found.append((call, layer, frozenset({2}), previous, "features"))
            if ranks is not None:
                ranks = ranks & accepted or ranks
            previous = call
            continue
        if layer in RANK_MAKING:
            if layer == "Flatten" and any(True for _ in call.args):
                ranks = None  # start_dim / end_dim given: not (N, features)
            else:
                ranks = frozenset({RANK_MAKING[layer]})
            features, feature_layer = None, None
        elif layer in FEATURE_LAYERS:
            _, position = FEATURE_LAYERS[layer]
            size = _argument(call, position, _FEATURE_KEYWORDS.get(layer, "out_channels"))
            features = None if size is None else code_for_node(sem.module, size).strip()
            feature_layer = layer
            ranks = OUTPUT_RANKS.get(layer, ranks)  # Linear keeps its input's rank
        elif layer in OUTPUT_RANKS:
            ranks = OUTPUT_RANKS[layer]
        elif layer not in RANK_KEEPING:
            ranks, features, feature_layer = None, None, None
        previous = call
    return found


# -- integer casts (TL116) ------------------------------------------------------------------------
# Integer and boolean dtypes: a tensor of one of them never requires grad (measured on torch 2.13:
# `out.to(torch.int64).requires_grad` and `out.type(torch.LongTensor).requires_grad` are False).
INTEGER_DTYPES = frozenset("int8 uint8 int16 int32 int64 uint16 uint32 uint64 long int short bool".split())
INTEGER_TENSOR_TYPES = frozenset("LongTensor IntTensor ShortTensor ByteTensor CharTensor BoolTensor".split())


def _integer_dtype(sem: Semantic, node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.SimpleString):
        text = node.evaluated_value
        return isinstance(text, str) and text.rsplit(".", 1)[-1] in INTEGER_TENSOR_TYPES
    name = sem.qualified_name(node)
    if name is None or not name.startswith("torch."):
        return False
    member = api.torch_member(name)
    return member in INTEGER_DTYPES or member in INTEGER_TENSOR_TYPES


def cast_to_integer(sem: Semantic, expr: cst.BaseExpression) -> bool:
    """`expr` is, or is computed by a method chain through, `.to(<integer dtype>)` /
    `.type(<integer tensor type>)`: its result cannot require grad."""
    from torchlint.analysis.semantic import receiver_chain

    for link in receiver_chain(expr):
        if isinstance(link, cst.Call) and isinstance(link.func, cst.Attribute) \
                and link.func.attr.value in ("to", "type"):
            arguments = [a.value for a in link.args if a.keyword is None or a.keyword.value == "dtype"]
            if any(_integer_dtype(sem, a) for a in arguments):
                return True
    return False


# -- receivers that certainly are tensors (TL110) ------------------------------------------------
# Methods a tensor and an nn.Module both have: on a value of unknown kind the value model takes
# the result for a tensor, though on a module it is the module itself, moved in place.
MODULE_SHARED_METHODS = api.MODULE_SELF_METHODS & (DEVICE_AND_DTYPE_MOVES | {"requires_grad_", "share_memory"})


def certainly_tensor(sem: Semantic, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """The value model says `expr` is a tensor, and that does not rest on a value of unknown kind
    passed through a method modules have too (`model.to(device)` of a parameter `model`), nor on
    joining an unknown binding with a tensor (`if half: model = model.half()`)."""
    if depth > 6 or not sem.values.of(expr).is_tensor:
        return False
    if isinstance(expr, cst.Name):
        values = sem.values.definition_values(expr)
        if values is not None and not all(v.is_tensor for v in values):
            return False
        for definition in sem.values.flow.reaching(expr) or ():
            if definition.kind == "assign" and definition.path == () and definition.value is not None \
                    and not certainly_tensor(sem, definition.value, depth + 1):
                return False
        return True
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
            and expr.func.attr.value in MODULE_SHARED_METHODS and sem.qualified_name(expr.func) is None:
        return certainly_tensor(sem, expr.func.value, depth + 1)
    return True


# -- statements run for their side effects on purpose (TL110) -------------------------------------
_MEASURING = re.compile(r"profil|record_function|timer|timeit|benchmark|warm_?up|synchroniz|nvtx", re.IGNORECASE)


def measured_on_purpose(sem: Semantic, node: cst.CSTNode) -> bool:
    """`node` runs inside `with profile(...)` / `record_function(...)` / a timer, or in a function
    named for benchmarking or warm-up: an op whose result is dropped there is run to be measured."""
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, cst.With):
            for item in ancestor.items:
                context = item.item.func if isinstance(item.item, cst.Call) else item.item
                if _MEASURING.search(code_for_node(sem.module, context)):
                    return True
        elif isinstance(ancestor, cst.FunctionDef) and _MEASURING.search(ancestor.name.value):
            return True
    return False
