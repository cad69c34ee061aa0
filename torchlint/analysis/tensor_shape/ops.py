"""Shape contracts of functional ops and tensor methods: `view`/`reshape`, `flatten`, `permute`,
`transpose`, `squeeze`/`unsqueeze`, `cat`/`stack`, `matmul`, reductions with `dim`,
broadcasting, and the functional twins of the layers in `contracts` (`F.max_pool2d` is
`nn.MaxPool2d`'s contract). Each gives a value (`values.Tensor`, `Num`, `Tup`), `UNKNOWN`, or an
`OpProblem` where the op certainly fails or mixes samples."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import libcst as cst

from torchlint.analysis.tensor_shape import contracts as C
from torchlint.analysis.tensor_shape import dims as D
from torchlint.analysis.tensor_shape.values import Num, Tensor, Tup

UNKNOWN = C.UNKNOWN
BATCH = D.symbol("N")


@dataclass(frozen=True)
class OpProblem:
    kind: str  # "view", "cat", "broadcast", "matmul", "window"
    text: str


# Ops whose output shape is worth a line in `torchlint shapes` and in a message's arithmetic.
SHAPE_STEPS = frozenset({
    "view", "reshape", "flatten", "permute", "transpose", "unsqueeze", "squeeze", "cat", "stack",
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "interpolate", "mean", "sum",
    "matmul", "bmm", "mm",
})

_SAME_SHAPE_METHODS = frozenset({
    "contiguous", "float", "double", "half", "bfloat16", "long", "int", "bool", "to", "cuda", "cpu",
    "detach", "clone", "relu", "relu_", "sigmoid", "tanh", "exp", "log", "abs", "neg", "sqrt", "pow",
    "clamp", "clamp_", "softmax", "log_softmax", "type", "type_as", "requires_grad_", "pin_memory",
    "add", "sub", "mul", "div", "add_", "mul_", "masked_fill", "sin", "cos", "square", "rsqrt",
})

_IDENTITY_FUNCTIONS = frozenset({
    "relu", "relu6", "leaky_relu", "elu", "selu", "gelu", "silu", "mish", "sigmoid", "tanh", "softplus",
    "hardtanh", "hardswish", "log_softmax", "softmax", "dropout", "dropout1d", "dropout2d", "dropout3d",
    "alpha_dropout", "normalize", "exp", "log", "abs", "sqrt", "logsigmoid", "softsign", "celu", "glu_",
})

_POOL_FUNCTIONS = {
    "max_pool1d": "MaxPool1d", "max_pool2d": "MaxPool2d", "max_pool3d": "MaxPool3d",
    "avg_pool1d": "AvgPool1d", "avg_pool2d": "AvgPool2d", "avg_pool3d": "AvgPool3d",
    "adaptive_avg_pool1d": "AdaptiveAvgPool1d", "adaptive_avg_pool2d": "AdaptiveAvgPool2d",
    "adaptive_avg_pool3d": "AdaptiveAvgPool3d", "adaptive_max_pool1d": "AdaptiveMaxPool1d",
    "adaptive_max_pool2d": "AdaptiveMaxPool2d",
}


# Torch calls that build a tensor from literal sizes (`torch.randn(2, 3)`), from literal data (the
# legacy constructors and `torch.tensor`: a single sequence argument is the data, `torch.FloatTensor([2,
# 3])` being the 1-D tensor [2., 3.]), or a range: what `inputs.tensor_source`/`range_source` read.
LITERAL_FACTORIES = frozenset({"randn", "rand", "zeros", "ones", "empty"})
DATA_CONSTRUCTORS = frozenset({"FloatTensor", "Tensor", "DoubleTensor", "LongTensor", "IntTensor", "tensor"})
SOURCE_FACTORIES = LITERAL_FACTORIES | DATA_CONSTRUCTORS | {"randint", "arange", "linspace"}

# The torch functions whose misfits a script's own top-level call can show (facts' script ops).
CHECKED_FUNCTIONS = frozenset(_POOL_FUNCTIONS) | {
    "flatten", "cat", "concat", "concatenate", "stack", "matmul", "mm", "bmm", "softmax", "log_softmax",
    "interpolate", "pad", "dot",
}


def _python(value: Any) -> Any:
    """An argument as a plain Python value (a `Num` of a known size is that int)."""
    if isinstance(value, Num):
        return value.dim if D.is_known(value.dim) else UNKNOWN
    if isinstance(value, Tup):
        return tuple(_python(v) for v in value.items)
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return UNKNOWN


def _dim_of(value: Any) -> D.Dim:
    if isinstance(value, Num):
        return value.dim
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _axis(value: Any, rank: int) -> Optional[int]:
    value = _python(value)
    if not isinstance(value, int) or isinstance(value, bool) or not -rank <= value < rank:
        return None
    return value % rank


# -- shape arithmetic --------------------------------------------------------------------------

def dim_arithmetic(operator, a: D.Dim, b: D.Dim) -> D.Dim:
    if isinstance(operator, cst.Multiply):
        return D.mul(a, b)
    if isinstance(operator, cst.Add):
        return D.add(a, b)
    if isinstance(operator, cst.Subtract) and D.is_known(b):
        return D.add(a, -b)
    if isinstance(operator, cst.FloorDivide):
        return D.floordiv(a, b)
    if isinstance(operator, cst.Divide) and D.is_known(a) and D.is_known(b) and b and a % b == 0:
        return a // b
    return None


def transpose(shape: D.Shape, a: int, b: int) -> D.Shape:
    if shape is None or not (-len(shape) <= a < len(shape) and -len(shape) <= b < len(shape)):
        return None
    dims = list(shape)
    dims[a], dims[b] = dims[b], dims[a]
    return tuple(dims)


def transposed_all(shape: D.Shape) -> D.Shape:
    return None if shape is None else tuple(reversed(shape))


def broadcast(a: D.Shape, b: D.Shape):
    """The broadcast shape, or a reason two dimensions can never broadcast."""
    if a is None or b is None:
        return None
    out: List[D.Dim] = []
    for position in range(1, max(len(a), len(b)) + 1):
        x = a[-position] if position <= len(a) else 1
        y = b[-position] if position <= len(b) else 1
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        else:
            if D.broadcastable(x, y) is False:
                axis = max(len(a), len(b)) - position
                return f"dimension {axis} is {D.text(x)} against {D.text(y)}"
            out.append(x if D.same(x, y) else None)
    return tuple(reversed(out))


def matmul(a: D.Shape, b: D.Shape):
    if a is None or b is None or len(a) < 1 or len(b) < 1:
        return None
    inner_a = a[-1]
    inner_b = b[-2] if len(b) >= 2 else b[0]
    if D.same(inner_a, inner_b) is False:
        raised = "`mat1 and mat2 shapes cannot be multiplied`" if len(a) == len(b) == 2 else "a RuntimeError"
        return (f"`@` of {D.shape_text(a)} and {D.shape_text(b)}: the inner sizes {D.text(inner_a)} and "
                f"{D.text(inner_b)} differ (torch raises {raised})")
    if len(a) == 1 and len(b) == 1:
        return ()
    if len(b) == 1:
        return a[:-1]
    if len(a) == 1:
        return b[:-2] + b[-1:]
    batch = broadcast(a[:-2], b[:-2])
    if batch is None or isinstance(batch, str):
        return None
    return batch + (a[-2], b[-1])


def dot(a: D.Shape, b: D.Shape) -> Any:
    """`torch.dot` / `Tensor.dot`: two 1-D tensors of one length, a 0-dim result (measured on torch
    2.13: `1D tensors expected, but got 2D and 2D tensors`, `inconsistent tensor size`)."""
    if a is None or b is None:
        return UNKNOWN
    if len(a) != 1 or len(b) != 1:
        return OpProblem("matmul", f"`dot` of {D.shape_text(a)} and {D.shape_text(b)}: it takes two 1-D tensors "
                                   f"(torch raises `1D tensors expected, but got {len(a)}D and {len(b)}D tensors`; "
                                   f"`@` or `torch.matmul` multiplies matrices)")
    if D.same(a[0], b[0]) is False:
        return OpProblem("matmul", f"`dot` of {D.shape_text(a)} and {D.shape_text(b)}: the lengths differ (torch "
                                   f"raises `inconsistent tensor size`)")
    return Tensor(())


def indexed(sem, shape: D.Shape, slices: Sequence[cst.SubscriptElement]) -> D.Shape:
    """The shape of `x[...]` for integer indexes, full slices `:`, `None` and `...`."""
    if shape is None:
        return None
    out: List[D.Dim] = []
    position = 0
    elements = list(slices)
    for number, element in enumerate(elements):
        index = element.slice
        if isinstance(index, cst.Slice):
            if position >= len(shape):
                return None
            full = index.lower is None and index.upper is None and index.step is None
            out.append(shape[position] if full else None)
            position += 1
            continue
        value = index.value
        if isinstance(value, cst.Ellipsis):
            rest = sum(1 for e in elements[number + 1:] if not (isinstance(e.slice, cst.Index) and
                                                               isinstance(e.slice.value, cst.Name) and e.slice.value.value == "None"))
            keep = len(shape) - position - rest
            if keep < 0:
                return None
            out.extend(shape[position:position + keep])
            position += keep
            continue
        if isinstance(value, cst.Name) and value.value == "None":
            out.append(1)
            continue
        if isinstance(value, cst.Integer) or (isinstance(value, cst.UnaryOperation) and isinstance(value.expression, cst.Integer)):
            if position >= len(shape):
                return None
            position += 1
            continue
        return None  # a tensor or a name: advanced indexing, not followed
    return tuple(out) + tuple(shape[position:])


# -- view and reshape --------------------------------------------------------------------------

def view(shape: D.Shape, sizes: Sequence[Any], name: str, batch: Any = None):
    """`batch`: the Source whose batch sizes certainly occur (a hard-coded batch size is checked
    against each)."""
    if shape is None:
        return UNKNOWN
    if len(sizes) == 1 and isinstance(sizes[0], Tup):
        sizes = list(sizes[0].items)
    dims = [_dim_of(s) for s in sizes]
    if any(d is None for d in dims):
        return Tensor(None) if len(dims) else UNKNOWN
    inferred = [i for i, d in enumerate(dims) if d == -1]
    if len(inferred) > 1:
        return OpProblem("view", f"`{name}` with more than one -1")
    total = D.product(shape)
    written = "(" + ", ".join(D.text(d) for d in dims) + ")"
    batch_first = len(shape) >= 1 and shape[0] == BATCH
    per_sample = D.product(shape[1:]) if batch_first else None
    given = D.product(d for i, d in enumerate(dims) if i not in inferred)
    if batch_first and dims and D.is_known(dims[0]) and batch is not None and batch.batch_sizes and \
            set(batch.batch_sizes) == {dims[0]}:
        dims[0] = BATCH  # the batch size every batch has, written out (`images.reshape(batch_size, -1)`)
    elif batch_first and D.is_known(per_sample) and dims and D.is_known(dims[0]) and dims[0] > 0 and \
            batch is not None and batch.batch_sizes and all(D.is_known(d) for d in dims[1:]):
        fixed = dims[0]
        for size in batch.batch_sizes:
            if size != fixed:
                rest = D.product(d for i, d in enumerate(dims[1:], 1) if i not in inferred)
                total = size * per_sample
                outcome = (f"torch raises `shape '[{', '.join(D.text(d) for d in dims)}]' is invalid for input of "
                           f"size {total}`" if (inferred and total % (fixed * rest)) or
                           (not inferred and fixed * rest != total) else
                           "the rows mix values of different samples")
                return OpProblem("view", f"`{name}{written}` hard-codes a batch of {fixed}, but {batch.batch_text(size)} "
                                         f"gives {size}×{D.shape_text(shape, batch=False)}: {outcome}; use "
                                         f"`{name}(x.size(0), ...)` or `-1` for the batch")
    if batch_first and D.is_known(per_sample):
        if inferred == [0] and all(D.is_known(d) for d in dims[1:]):
            if given != per_sample:
                return OpProblem("view", _folds_batch(name, written, shape, per_sample, given))
            return Tensor((BATCH,) + tuple(dims[1:]))
        if dims and dims[0] == BATCH and all(D.is_known(d) for d in dims[1:]):
            rest = D.product(d for i, d in enumerate(dims[1:], 1) if i not in inferred)
            if (inferred and per_sample % rest) or (not inferred and rest != per_sample):
                return OpProblem("view", f"`{name}{written}` of {D.shape_text(shape)}: each sample has {per_sample} "
                                         f"values, which {'do not divide into' if inferred else 'is not'} {rest}; "
                                         f"torch raises `shape '[...]' is invalid for input of size ...`")
            if inferred:
                dims[inferred[0]] = per_sample // rest
            return Tensor(tuple(dims))
    if D.is_known(total) and all(D.is_known(d) for d in dims):
        if inferred:
            if given == 0 or total % given:
                return OpProblem("view", f"`{name}{written}` of {D.shape_text(shape)} ({total} elements): "
                                         f"{total} is not a multiple of {given}")
            dims[inferred[0]] = total // given
        elif given != total:
            return OpProblem("view", f"`{name}{written}` of {D.shape_text(shape)} ({total} elements) asks for {given}")
        return Tensor(tuple(dims))
    if not inferred:
        return Tensor(tuple(dims))
    return Tensor(tuple(None if i in inferred else d for i, d in enumerate(dims)))


def _folds_batch(name: str, written: str, shape, per_sample: int, given: int) -> str:
    head = (f"`{name}{written}` of {D.shape_text(shape)}: each sample has {D.shape_text(shape, batch=False)} = "
            f"{per_sample} values, not {given}, so the -1 is not the batch: ")
    if per_sample % given == 0:  # every batch reshapes without an error: the harm is silent
        return head + (f"the result has {per_sample // given}×N rows instead of N, each sample's "
                       f"{per_sample} values spread over {per_sample // given} of them")
    return head + (f"torch raises `shape '[-1, {given}]' is invalid` where {given} does not divide "
                   f"N×{per_sample}, and where it does the rows mix values of different samples")


# -- tensor methods ----------------------------------------------------------------------------

def tensor_method(name: str, shape: D.Shape, positional: List[Any], keywords: Dict[str, Any], batch: Any = None) -> Any:
    if name in _SAME_SHAPE_METHODS:
        return Tensor(shape)
    if shape is None:
        return UNKNOWN if name in ("size", "dim", "numel", "max", "min", "sort", "topk", "chunk", "split") else Tensor(None)
    rank = len(shape)
    if name in ("view", "reshape"):
        return view(shape, positional, name, batch)
    if name in ("unsqueeze_", "squeeze_", "t_", "transpose_"):
        return tensor_method(name[:-1], shape, positional, keywords)
    if name == "size":
        if not positional and "dim" not in keywords:
            return Tup(tuple(Num(d) for d in shape))
        axis = _axis(positional[0] if positional else keywords["dim"], rank)
        return Num(shape[axis]) if axis is not None else UNKNOWN
    if name == "dim":
        return Num(rank)
    if name == "numel":
        return Num(D.product(shape))
    if name == "flatten":
        start = _python(positional[0]) if positional else _python(keywords.get("start_dim", 0))
        end = _python(positional[1]) if len(positional) > 1 else _python(keywords.get("end_dim", -1))
        return _flattened("flatten", shape, start, end)
    if name in ("transpose", "swapaxes", "swapdims"):
        if len(positional) == 2:
            a, b = _axis(positional[0], rank), _axis(positional[1], rank)
            if a is not None and b is not None:
                return Tensor(transpose(shape, a, b))
        return Tensor(None)
    if name == "t":
        return Tensor(transposed_all(shape) if rank <= 2 else None)
    if name == "permute":
        order = positional[0].items if len(positional) == 1 and isinstance(positional[0], Tup) else positional
        axes = [_axis(a, rank) for a in order]
        if len(axes) == rank and None not in axes and sorted(axes) == list(range(rank)):
            return Tensor(tuple(shape[a] for a in axes))
        return Tensor(None)
    if name == "unsqueeze":
        value = _python(positional[0]) if positional else _python(keywords.get("dim"))
        if isinstance(value, int) and -rank - 1 <= value <= rank:
            value %= rank + 1
            return Tensor(shape[:value] + (1,) + shape[value:])
        return Tensor(None)
    if name == "squeeze":
        if not positional and "dim" not in keywords:
            if all(D.is_known(d) for d in shape):
                return Tensor(tuple(d for d in shape if d != 1))
            return Tensor(None)
        axis = _axis(positional[0] if positional else keywords["dim"], rank)
        if axis is None:
            return Tensor(None)
        if shape[axis] == 1:
            return Tensor(shape[:axis] + shape[axis + 1:])
        return Tensor(shape if D.same(shape[axis], 1) is False else None)
    if name in ("mean", "sum", "prod", "amax", "amin", "norm", "std", "var", "logsumexp"):
        dim = positional[0] if positional and name != "norm" else keywords.get("dim", UNKNOWN if positional else None)
        keepdim = _python(keywords.get("keepdim", positional[1] if len(positional) > 1 and name != "norm" else False))
        return reduce(shape, dim, keepdim)
    if name == "dot" and len(positional) == 1 and isinstance(positional[0], Tensor):
        return dot(shape, positional[0].shape)
    if name == "expand":
        sizes = positional[0].items if len(positional) == 1 and isinstance(positional[0], Tup) else positional
        dims = [_dim_of(s) for s in sizes]
        if len(dims) >= rank and None not in dims:
            lead = len(dims) - rank
            return Tensor(tuple(dims[:lead]) + tuple(shape[i] if dims[lead + i] == -1 else dims[lead + i] for i in range(rank)))
        return Tensor(None)
    return UNKNOWN


def reduce(shape: D.Shape, dim: Any, keepdim: Any):
    if shape is None:
        return Tensor(None)
    if dim is None:
        return Tensor(()) if keepdim is False else Tensor(None)
    dims = dim.items if isinstance(dim, Tup) else (dim,)
    axes = [_axis(d, len(shape)) for d in dims]
    if None in axes or not isinstance(keepdim, bool):
        return Tensor(None)
    if keepdim:
        return Tensor(tuple(1 if i in axes else d for i, d in enumerate(shape)))
    return Tensor(tuple(d for i, d in enumerate(shape) if i not in axes))


# -- functions ---------------------------------------------------------------------------------

def function(qualified: str, positional: List[Any], keywords: Dict[str, Any], batch: Any = None) -> Any:
    parts = qualified.split(".")
    if parts[0] != "torch":
        return UNKNOWN
    name = parts[-1]
    functional = qualified.startswith("torch.nn.functional.")
    first = positional[0] if positional else keywords.get("input")
    shape = first.shape if isinstance(first, Tensor) else None
    if name in _IDENTITY_FUNCTIONS and (functional or len(parts) == 2):
        if name in _DIM_FUNCTIONS and shape is not None:
            dim = positional[1] if len(positional) > 1 else keywords.get("dim")
            problem = _dim_problem(f"{'F' if functional else 'torch'}.{name}", shape, _python(dim))
            if problem is not None:
                return problem
        return Tensor(shape) if isinstance(first, Tensor) else UNKNOWN
    if name in _POOL_FUNCTIONS and functional:
        contract = C.LAYERS[_POOL_FUNCTIONS[name]]
        arguments = contract.bind([_python(v) for v in positional[1:]],
                                  {k: _python(v) for k, v in keywords.items() if k != "input"})
        if arguments is None or not isinstance(first, Tensor):
            return UNKNOWN
        result = contract.apply(arguments, shape)
        if isinstance(result, C.Misfit):
            return OpProblem(result.kind if result.kind in ("window", "rank", "arguments") else "window",
                             f"`F.{name}` {result.text}")
        return Tensor(result)
    if name == "flatten" and len(parts) == 2 and isinstance(first, Tensor):
        start = _python(positional[1]) if len(positional) > 1 else _python(keywords.get("start_dim", 0))
        end = _python(positional[2]) if len(positional) > 2 else _python(keywords.get("end_dim", -1))
        return _flattened("torch.flatten", shape, start, end)
    if name in ("cat", "concat", "concatenate", "stack") and len(parts) == 2:
        return _cat(name, first, positional[1] if len(positional) > 1 else keywords.get("dim", 0))
    if name == "dot" and len(parts) == 2 and len(positional) == 2:
        if isinstance(positional[0], Tensor) and isinstance(positional[1], Tensor):
            return dot(positional[0].shape, positional[1].shape)
        return UNKNOWN
    if name in ("matmul", "mm", "bmm") and len(parts) == 2 and len(positional) == 2:
        if isinstance(positional[0], Tensor) and isinstance(positional[1], Tensor):
            result = matmul(positional[0].shape, positional[1].shape)
            return OpProblem("matmul", result) if isinstance(result, str) else Tensor(result)
        return UNKNOWN
    if name == "interpolate" and functional and isinstance(first, Tensor):
        contract = C.LAYERS["Upsample"]
        arguments = contract.bind([_python(v) for v in positional[1:3]],
                                  {k: _python(v) for k, v in keywords.items() if k in ("size", "scale_factor")})
        return Tensor(contract.apply(arguments, shape)) if arguments is not None else Tensor(None)
    if name == "pad" and functional and isinstance(first, Tensor) and shape is not None:
        pads = positional[1] if len(positional) > 1 else keywords.get("pad")
        items = pads.items if isinstance(pads, Tup) else None
        if items is None or len(items) % 2 or len(items) // 2 > len(shape):
            return Tensor(None)
        out = list(shape)
        for axis in range(len(items) // 2):
            left, right = _dim_of(items[2 * axis]), _dim_of(items[2 * axis + 1])
            position = len(shape) - 1 - axis
            out[position] = D.add(D.add(shape[position], left), right) if None not in (left, right) else None
        return Tensor(tuple(out))
    if name in _SIZED_FACTORIES and len(parts) == 2:
        return _factory(name, positional, keywords)
    if name in ("randn_like", "rand_like", "zeros_like", "ones_like", "empty_like", "full_like") and len(parts) == 2:
        return Tensor(shape) if isinstance(first, Tensor) else UNKNOWN
    if len(parts) == 2 and isinstance(first, Tensor):
        return tensor_method(name, shape, positional[1:], keywords, batch)
    return UNKNOWN


_DIM_FUNCTIONS = frozenset({"softmax", "log_softmax"})


def _dim_problem(name: str, shape: D.Shape, dim: Any) -> Optional[OpProblem]:
    """A `dim` argument outside the tensor's rank: torch raises IndexError."""
    rank = len(shape)
    if not isinstance(dim, int) or isinstance(dim, bool) or -max(rank, 1) <= dim < max(rank, 1):
        return None
    return OpProblem("dim", f"`{name}` with dim={dim} of a {rank}-D tensor {D.shape_text(shape)}: torch raises "
                            f"`IndexError: Dimension out of range (expected to be in range of [{-max(rank, 1)}, "
                            f"{max(rank, 1) - 1}], but got {dim})`")


def _flattened(name: str, shape: D.Shape, start: Any, end: Any) -> Any:
    if shape is not None:
        for dim in (start, end):
            problem = _dim_problem(name, shape, dim)
            if problem is not None:
                return problem
        rank = max(len(shape), 1)
        if isinstance(start, int) and isinstance(end, int) and not isinstance(start, bool) \
                and not isinstance(end, bool) and start % rank > end % rank:
            return OpProblem("dim", f"`{name}` from dim {start} to dim {end} of a {len(shape)}-D tensor: torch raises "
                                    f"`RuntimeError: flatten() has invalid args: start_dim cannot come after end_dim`")
    return Tensor(C.flatten_shape(shape, start, end))


_SIZED_FACTORIES = frozenset({"randn", "rand", "zeros", "ones", "empty", "full"})


def _factory(name: str, positional: List[Any], keywords: Dict[str, Any]) -> Any:
    """`torch.full((batch_size,), 1.0)` / `torch.zeros(batch_size, 10)` with sizes the code
    computes (`batch_size = images.size(0)`): a tensor of those sizes, a size not known as None."""
    sizes = positional[:1] if name == "full" else positional
    if not sizes:
        sizes = [keywords.get("size")]
    if len(sizes) == 1 and isinstance(sizes[0], Tup):
        sizes = list(sizes[0].items)
    if not sizes or any(not isinstance(v, (Num, int)) or isinstance(v, bool) for v in sizes):
        return UNKNOWN
    return Tensor(tuple(_dim_of(v) for v in sizes))


def _cat(name: str, tensors: Any, dim: Any):
    if not isinstance(tensors, Tup) or not tensors.items or not all(isinstance(t, Tensor) for t in tensors.items):
        return UNKNOWN
    shapes = [t.shape for t in tensors.items]
    if any(s is None for s in shapes):
        return Tensor(None)
    rank = len(shapes[0])
    if name == "stack":
        axis = _axis(dim, rank + 1)
        for other in shapes[1:]:
            if len(other) == rank and any(D.same(a, b) is False for a, b in zip(shapes[0], other)):
                return OpProblem("cat", f"`torch.stack` of {D.shape_text(shapes[0])} and {D.shape_text(other)}: "
                                        f"stacked tensors must have the same shape")
        return Tensor(shapes[0][:axis] + (len(shapes),) + shapes[0][axis:]) if axis is not None else Tensor(None)
    axis = _axis(dim, rank)
    if axis is None or any(len(s) != rank for s in shapes):
        return Tensor(None)
    out = list(shapes[0])
    for other in shapes[1:]:
        for position, (a, b) in enumerate(zip(shapes[0], other)):
            if position != axis and D.same(a, b) is False:
                return OpProblem("cat", f"`torch.cat` along dim {axis} of {D.shape_text(shapes[0])} and "
                                        f"{D.shape_text(other)}: every other dimension must match, and dim {position} "
                                        f"is {D.text(a)} against {D.text(b)} (`Sizes of tensors must match except "
                                        f"in dimension {axis}`)")
        out[axis] = D.add(out[axis], other[axis])
    for position in range(rank):
        if position != axis and any(D.same(shapes[0][position], s[position]) is not True for s in shapes[1:]):
            out[position] = None
    return Tensor(tuple(out))
