"""The shape contract of each torch layer, as data: its constructor's parameters, what input it
takes and the shape it gives. `--verify` runs every entry's real module over a grid of arguments
and inputs (`torchlint/verify/cases/_shape_table.py`) and compares the shapes with these formulas,
so an entry that disagrees with the installed torch shows as REFUTED instead of shipping.

A contract's `apply(arguments, shape)` gives the output shape, or a `Misfit` when the input cannot
fit the layer's definition. Arguments a program leaves unknown are `UNKNOWN`; dimensions are
`dims.Dim` (None: unknown). Where something is unknown the answer is never a misfit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from torchlint.analysis.tensor_shape import dims as D

UNKNOWN = object()  # an argument the program does not fix
REQUIRED = object()  # a parameter without a default


@dataclass(frozen=True)
class Misfit:
    """The input does not fit the layer: `kind` is "features" (a size the layer was built for:
    in_features, in_channels, num_features, input_size, embed_dim, normalized_shape), "rank" or
    "window" (a spatial size below the kernel). `parameter` names the constructor parameter whose
    value `expected` the input's `got` does not match."""

    kind: str
    parameter: Optional[str]
    expected: Any
    got: Any
    text: str


@dataclass(frozen=True)
class Contract:
    name: str
    parameters: Tuple[Tuple[str, Any], ...]
    apply: Callable[[Dict[str, Any], D.Shape], Union[D.Shape, Misfit, tuple]]
    # Where the shape goes when the layer returns a tuple (RNNs, attention): "first" of a pair.
    returns_pair: bool = False

    def bind(self, positional: Sequence[Any], keywords: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """The arguments by parameter name, defaults filled in; None when the call does not bind."""
        names = [name for name, _ in self.parameters]
        if len(positional) > len(names):
            return None
        bound = dict(zip(names, positional))
        for key, value in keywords.items():
            if key not in names or key in bound:
                return None
            bound[key] = value
        for name, default in self.parameters:
            if name not in bound:
                if default is REQUIRED:
                    bound[name] = UNKNOWN
                else:
                    bound[name] = default
        return bound


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _tuple(value: Any, n: int) -> Optional[Tuple[Optional[int], ...]]:
    """An int or an n-tuple of ints (a kernel size, a stride), None entries where unknown."""
    if _int(value) is not None:
        return (value,) * n
    if isinstance(value, tuple) and len(value) == n:
        return tuple(_int(v) for v in value)
    return None


def _known(shape: D.Shape) -> bool:
    return shape is not None


# -- identity-shaped layers --------------------------------------------------------------------

def _same(arguments, shape):
    return shape


IDENTITY_LAYERS = (
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh",
    "Hardtanh", "Hardswish", "Hardsigmoid", "Softplus", "Softsign", "Tanhshrink", "LogSigmoid",
    "Softmax", "LogSoftmax", "Softmin", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
    "Identity", "Threshold", "Hardshrink", "Softshrink",
)


# -- convolution and pooling -------------------------------------------------------------------

def _spatial_ranks(n: int) -> Tuple[int, int]:
    return (n + 1, n + 2)


def _batched(shape: D.Shape, n: int) -> bool:
    return len(shape) == n + 2


def _rank_misfit(name: str, shape, n: int, batched_only: bool = False) -> Optional[Misfit]:
    ranks = (n + 2,) if batched_only else _spatial_ranks(n)
    if len(shape) in ranks:
        return None
    expected = " or ".join(f"{r}-D" for r in ranks)
    return Misfit("rank", None, ranks, len(shape),
                  f"takes {expected} input ({'[N,] C, ' if n else ''}{', '.join('HW'[:n]) if n <= 2 else 'D, H, W'}), "
                  f"gets {len(shape)}-D")


def _conv(n: int, transposed: bool = False):
    def apply(arguments, shape):
        if not _known(shape):
            return None
        misfit = _rank_misfit("conv", shape, n)
        if misfit:
            return misfit
        in_channels = _int(arguments["in_channels"])
        channel_axis = 1 if _batched(shape, n) else 0
        got = shape[channel_axis]
        if in_channels is not None and D.same(got, in_channels) is False:
            return Misfit("features", "in_channels", in_channels, got,
                          f"expects {in_channels} input channels, gets {D.text(got)}")
        kernel = _tuple(arguments["kernel_size"], n)
        stride = _tuple(arguments["stride"], n)
        dilation = _tuple(arguments["dilation"], n)
        padding_value = arguments["padding"]
        out_channels = _int(arguments["out_channels"])
        prefix = shape[:channel_axis] + (out_channels,)
        if kernel is None or stride is None or dilation is None:
            return prefix + (None,) * n
        spatial = []
        for axis in range(n):
            length = shape[channel_axis + 1 + axis]
            k, s, d = kernel[axis], stride[axis], dilation[axis]
            if None in (k, s, d):
                spatial.append(None)
                continue
            if transposed:
                p = _tuple(padding_value, n)
                out_pad = _tuple(arguments["output_padding"], n)
                if p is None or out_pad is None or p[axis] is None or out_pad[axis] is None or length is None:
                    spatial.append(None)
                    continue
                spatial.append(D.add(D.mul(D.add(length, -1), s), -2 * p[axis] + d * (k - 1) + out_pad[axis] + 1))
                continue
            if padding_value == "same":
                spatial.append(length)
                continue
            p = (0,) * n if padding_value == "valid" else _tuple(padding_value, n)
            if p is None or p[axis] is None:
                spatial.append(None)
                continue
            out = D.window(length, k, s, p[axis], d)
            if D.is_known(out) and out < 1:
                return Misfit("window", "kernel_size", k, length,
                              f"has a {_kernel_text(kernel)} kernel{_padding_text(p)} but its input is only "
                              f"{_spatial_text(shape[channel_axis + 1:])}")
            spatial.append(out)
        return prefix + tuple(spatial)

    return apply


def _kernel_text(kernel) -> str:
    return "×".join(str(k) for k in kernel)


def _padding_text(padding) -> str:
    return f" (padding {padding[0]})" if padding and any(padding) else ""


def _spatial_text(dims) -> str:
    return "×".join(D.text(d) for d in dims)


def _pool(n: int, has_dilation: bool):
    def apply(arguments, shape):
        if not _known(shape):
            return None
        misfit = _rank_misfit("pool", shape, n)
        if misfit:
            return misfit
        kernel = _tuple(arguments["kernel_size"], n)
        stride_value = arguments["stride"]
        stride = kernel if stride_value is None else _tuple(stride_value, n)
        padding = _tuple(arguments["padding"], n)
        dilation = _tuple(arguments["dilation"], n) if has_dilation else (1,) * n
        ceil = arguments["ceil_mode"]
        lead = len(shape) - n
        if None in (kernel, stride, padding, dilation) or not isinstance(ceil, bool):
            return shape[:lead] + (None,) * n
        spatial = []
        for axis in range(n):
            length = shape[lead + axis]
            if None in (kernel[axis], stride[axis], padding[axis], dilation[axis]):
                spatial.append(None)
                continue
            if padding[axis] > (dilation[axis] * (kernel[axis] - 1) + 1) // 2:
                return Misfit("arguments", "padding", (dilation[axis] * (kernel[axis] - 1) + 1) // 2, padding[axis],
                              f"pads {padding[axis]} on each side of a {kernel[axis]}-wide window: torch raises "
                              f"`pad should be at most half of effective kernel size, but got pad={padding[axis]}, "
                              f"kernel_size={kernel[axis]} and dilation={dilation[axis]}`")
            out = D.window(length, kernel[axis], stride[axis], padding[axis], dilation[axis], ceil)
            if D.is_known(out) and out < 1:
                return Misfit("window", "kernel_size", kernel[axis], length,
                              f"pools with a {_kernel_text(kernel)} window but its input is only "
                              f"{_spatial_text(shape[lead:])}")
            spatial.append(out)
        return shape[:lead] + tuple(spatial)

    return apply


def _adaptive(n: int):
    def apply(arguments, shape):
        if not _known(shape):
            return None
        misfit = _rank_misfit("pool", shape, n)
        if misfit:
            return misfit
        size = arguments["output_size"]
        sizes = _tuple(size, n) if not isinstance(size, tuple) else tuple(
            (shape[len(shape) - n + i] if s is None else _int(s)) for i, s in enumerate(size)) if len(size) == n else None
        if sizes is None:
            return shape[:len(shape) - n] + (None,) * n
        return shape[:len(shape) - n] + sizes

    return apply


# -- dense layers and normalisation ------------------------------------------------------------

def _linear(arguments, shape):
    if not _known(shape):
        return None
    if len(shape) == 0:
        return Misfit("rank", None, 1, 0, "takes at least 1-D input, gets a scalar")
    in_features = _int(arguments["in_features"])
    got = shape[-1]
    if in_features is not None and D.same(got, in_features) is False:
        return Misfit("features", "in_features", in_features, got,
                      f"expects {in_features} input features, gets {D.text(got)}")
    return shape[:-1] + (_int(arguments["out_features"]),)


def _batchnorm(n: int):
    ranks = {0: (2, 3), 1: (4,), 2: (5,)}[n]

    def apply(arguments, shape):
        if not _known(shape):
            return None
        if len(shape) not in ranks:
            expected = " or ".join(f"{r}D" for r in ranks)
            return Misfit("rank", None, ranks, len(shape), f"expects {expected} input, gets {len(shape)}D")
        features = _int(arguments["num_features"])
        if features is not None and D.same(shape[1], features) is False:
            return Misfit("features", "num_features", features, shape[1],
                          f"normalises {features} channels, gets {D.text(shape[1])}")
        return shape

    return apply


def _instancenorm(n: int):
    def apply(arguments, shape):
        if not _known(shape):
            return None
        misfit = _rank_misfit("norm", shape, n)
        if misfit:
            return misfit
        features = _int(arguments["num_features"])
        channel = shape[1] if _batched(shape, n) else shape[0]
        if arguments["affine"] is True and features is not None and D.same(channel, features) is False:
            return Misfit("features", "num_features", features, channel,
                          f"normalises {features} channels, gets {D.text(channel)}")
        return shape

    return apply


def _layernorm(arguments, shape):
    if not _known(shape):
        return None
    normalized = arguments["normalized_shape"]
    normalized = (normalized,) if _int(normalized) is not None else normalized
    if not isinstance(normalized, tuple) or any(_int(v) is None for v in normalized):
        return shape
    if len(shape) < len(normalized):
        return Misfit("rank", None, len(normalized), len(shape), f"normalises the last {len(normalized)} dimensions of a {len(shape)}-D input")
    tail = shape[len(shape) - len(normalized):]
    if any(D.same(g, e) is False for g, e in zip(tail, normalized)):
        return Misfit("features", "normalized_shape", normalized if len(normalized) > 1 else normalized[0],
                      tail if len(tail) > 1 else tail[0],
                      f"normalises a last dimension of {D.shape_text(normalized)}, gets {D.shape_text(tail)}")
    return shape


def _groupnorm(arguments, shape):
    if not _known(shape):
        return None
    if len(shape) < 2:
        return Misfit("rank", None, 2, len(shape), f"expects at least 2-D input, gets {len(shape)}-D")
    channels = _int(arguments["num_channels"])
    if channels is not None and D.same(shape[1], channels) is False:
        return Misfit("features", "num_channels", channels, shape[1],
                      f"normalises {channels} channels, gets {D.text(shape[1])}")
    return shape


def _embedding(arguments, shape):
    if not _known(shape):
        return None
    return shape + (_int(arguments["embedding_dim"]),)


# -- recurrent and attention layers ------------------------------------------------------------

def _recurrent(lstm: bool):
    def apply(arguments, shape):
        if not _known(shape):
            return None
        if len(shape) not in (2, 3):
            return Misfit("rank", None, (2, 3), len(shape), f"expects 2-D or 3-D input, gets {len(shape)}-D")
        input_size = _int(arguments["input_size"])
        if input_size is not None and D.same(shape[-1], input_size) is False:
            return Misfit("features", "input_size", input_size, shape[-1],
                          f"expects input_size {input_size} in the last dimension, gets {D.text(shape[-1])}")
        hidden = _int(arguments["hidden_size"])
        if lstm and _int(arguments.get("proj_size")) not in (None, 0):
            hidden = _int(arguments["proj_size"])
        directions = 2 if arguments["bidirectional"] is True else (1 if arguments["bidirectional"] is False else None)
        features = None if hidden is None or directions is None else hidden * directions
        return shape[:-1] + (features,)

    return apply


def _cell(arguments, shape):
    """`LSTMCell` / `GRUCell` / `RNNCell`: one time step, (batch, input_size) or (input_size,)."""
    if not _known(shape):
        return None
    if len(shape) not in (1, 2):
        return Misfit("rank", None, (1, 2), len(shape), f"expects 1-D or 2-D input, gets {len(shape)}-D")
    input_size = _int(arguments["input_size"])
    if input_size is not None and D.same(shape[-1], input_size) is False:
        return Misfit("features", "input_size", input_size, shape[-1],
                      f"expects input_size {input_size} in the last dimension, gets {D.text(shape[-1])}")
    return shape[:-1] + (_int(arguments["hidden_size"]),)


CELLS = frozenset({"LSTMCell", "GRUCell", "RNNCell"})
RECURRENT = frozenset({"RNN", "GRU", "LSTM"})


def state_misfit(name: str, arguments: Dict[str, Any], shape: D.Shape, state: D.Shape,
                 position: int = 0, batch_differs: bool = False) -> Optional[Misfit]:
    """A hidden state that does not fit the recurrent layer it is passed to with input `shape`
    (`position` 0 for h, 1 for an LSTM's c): a cell's state is (batch, hidden_size); an RNN/GRU/
    LSTM's is (num_layers × directions, batch, hidden_size), the batch being the input's dim 0
    with batch_first, dim 1 without (an LSTM's h_0 has proj_size where it is set). The text
    quotes torch's error (measured on torch 2.13). `batch_differs`: the caller knows the state's
    batch is not the one the layer reads (a batch-first input to a sequence-first layer)."""
    if shape is None or state is None:
        return None
    hidden = _int(arguments.get("hidden_size"))
    if name in CELLS:
        if len(shape) != 2 or len(state) != 2:
            return None
        if hidden is not None and D.same(state[1], hidden) is False:
            return Misfit("state", "hidden_size", hidden, state[1],
                          f"is given a hidden state {D.shape_text(state)} whose last dimension is "
                          f"{D.text(state[1])}, not its hidden_size {hidden} (torch: `hidden{position} has "
                          f"inconsistent hidden_size: got {D.text(state[1])}, expected {hidden}`)")
        if D.same(state[0], shape[0]) is False:
            return Misfit("state", None, shape[0], state[0],
                          f"is given a hidden state for a batch of {D.text(state[0])} with an input batch of "
                          f"{D.text(shape[0])} (torch: `Input batch size {D.text(shape[0])} doesn't match "
                          f"hidden{position} batch size {D.text(state[0])}`)")
        return None
    if name not in RECURRENT or len(shape) != 3 or len(state) != 3:
        return None
    batch_first = arguments.get("batch_first")
    if batch_first not in (True, False):
        return None
    batch = shape[0] if batch_first else shape[1]
    layers, directions = _int(arguments.get("num_layers")), arguments.get("bidirectional")
    size = hidden
    if name == "LSTM" and position == 0 and _int(arguments.get("proj_size")) not in (None, 0):
        size = _int(arguments["proj_size"])
    expected = (None if layers is None or directions not in (True, False) else layers * (2 if directions else 1),
                batch, size)
    if not batch_differs and all(D.same(e, g) is not False for e, g in zip(expected, state) if e is not None):
        return None
    layout = "(batch, sequence, features)" if batch_first else "(sequence, batch, features)"
    which = f"hidden[{position}]" if name == "LSTM" else "hidden"
    return Misfit("state", "hidden_size", expected, state,
                  f"expects a hidden state of (num_layers × directions, batch, hidden_size) = "
                  f"{D.shape_text(expected)} for its input {D.shape_text(shape)}, which it reads as {layout} "
                  f"(batch_first={batch_first}), but gets {D.shape_text(state)} (torch: `Expected {which} size "
                  f"({', '.join(D.text(d) for d in expected)}), got [{', '.join(D.text(d) for d in state)}]`)")


def _last_dimension(parameter: str, what: str):
    """Layers that read (sequence, batch, features) or (batch, sequence, features) and check the
    features: `MultiheadAttention(embed_dim)`, `Transformer*Layer(d_model)`."""
    def apply(arguments, shape):
        if not _known(shape):
            return None
        if len(shape) not in (2, 3):
            return Misfit("rank", None, (2, 3), len(shape), f"expects 2-D or 3-D {what}, gets {len(shape)}-D")
        size = _int(arguments[parameter])
        if size is not None and D.same(shape[-1], size) is False:
            return Misfit("features", parameter, size, shape[-1],
                          f"expects {parameter} {size} in the {what}'s last dimension, gets {D.text(shape[-1])}")
        return shape

    return apply


_attention = _last_dimension("embed_dim", "query")
_transformer_layer = _last_dimension("d_model", "input")


# -- reshaping layers --------------------------------------------------------------------------

def flatten_shape(shape: D.Shape, start: Any, end: Any) -> D.Shape:
    if not _known(shape) or _int(start) is None or _int(end) is None:
        return None
    rank = len(shape)
    if rank == 0:
        return (1,)
    first, last = start % rank if -rank <= start < rank else None, end % rank if -rank <= end < rank else None
    if first is None or last is None or first > last:
        return None
    return shape[:first] + (D.product(shape[first:last + 1]),) + shape[last + 1:]


def _flatten(arguments, shape):
    return flatten_shape(shape, arguments["start_dim"], arguments["end_dim"])


def _unflatten(arguments, shape):
    if not _known(shape):
        return None
    dim = _int(arguments["dim"])
    sizes = arguments["unflattened_size"]
    if dim is None or not isinstance(sizes, tuple) or not -len(shape) <= dim < len(shape):
        return None
    dim %= len(shape)
    sizes = tuple(_int(s) for s in sizes)
    if -1 in sizes or None in sizes:
        return None
    return shape[:dim] + sizes + shape[dim + 1:]


def _upsample(arguments, shape):
    if not _known(shape) or len(shape) < 3:
        return None
    n = len(shape) - 2
    size, scale = arguments["size"], arguments["scale_factor"]
    if size is not None and size is not UNKNOWN:
        sizes = _tuple(size, n)
        return shape[:2] + (sizes if sizes is not None else (None,) * n)
    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        return shape[:2] + tuple(_scaled(d, scale) for d in shape[2:])
    return shape[:2] + (None,) * n


def _scaled(dim: D.Dim, scale) -> D.Dim:
    if D.is_known(dim):
        return int(dim * scale)
    if isinstance(scale, int) or (isinstance(scale, float) and scale.is_integer()):
        return D.mul(dim, int(scale))
    return None


def _pixel_shuffle(arguments, shape):
    if not _known(shape) or len(shape) < 3:
        return None
    r = _int(arguments["upscale_factor"])
    if r is None:
        return None
    channels = shape[-3]
    if D.is_known(channels) and channels % (r * r):
        return Misfit("features", "upscale_factor", r, channels,
                      f"needs channels divisible by {r}×{r}={r * r}, gets {channels}")
    return shape[:-3] + (D.floordiv(channels, r * r), D.mul(shape[-2], r), D.mul(shape[-1], r))


def _padding(n: int, reflection: bool = False):
    def apply(arguments, shape):
        if not _known(shape) or len(shape) < n:
            return None
        padding = arguments["padding"]
        pads = _tuple(padding, 2 * n)
        if pads is None or None in pads:
            return None
        out = list(shape)
        for axis in range(n):
            left, right = pads[2 * axis], pads[2 * axis + 1]
            length = shape[len(shape) - 1 - axis]
            if reflection:
                padded = D.reflect(length, left, right)
                if D.is_known(length) and padded is None:
                    return Misfit("window", "padding", max(left, right), length,
                                  f"pads by reflection by {max(left, right)}, which needs an input larger than that, "
                                  f"but its input is only {_spatial_text(shape[len(shape) - n:])}")
                out[len(shape) - 1 - axis] = padded
            else:
                out[len(shape) - 1 - axis] = D.add(length, left + right)
        return tuple(out)

    return apply


# -- the table ---------------------------------------------------------------------------------

def _params(*names_and_defaults) -> Tuple[Tuple[str, Any], ...]:
    found = []
    for item in names_and_defaults:
        found.append((item, REQUIRED) if isinstance(item, str) else item)
    return tuple(found)


_CONV = _params("in_channels", "out_channels", "kernel_size", ("stride", 1), ("padding", 0), ("dilation", 1),
                ("groups", 1), ("bias", True), ("padding_mode", "zeros"), ("device", None), ("dtype", None))
_CONV_T = _params("in_channels", "out_channels", "kernel_size", ("stride", 1), ("padding", 0),
                  ("output_padding", 0), ("groups", 1), ("bias", True), ("dilation", 1),
                  ("padding_mode", "zeros"), ("device", None), ("dtype", None))
_MAXPOOL = _params("kernel_size", ("stride", None), ("padding", 0), ("dilation", 1), ("return_indices", False),
                   ("ceil_mode", False))
_AVGPOOL = _params("kernel_size", ("stride", None), ("padding", 0), ("ceil_mode", False),
                   ("count_include_pad", True), ("divisor_override", None))
_AVGPOOL1D = _params("kernel_size", ("stride", None), ("padding", 0), ("ceil_mode", False), ("count_include_pad", True))
_NORM = _params("num_features", ("eps", 1e-5), ("momentum", 0.1), ("affine", True), ("track_running_stats", True),
                ("device", None), ("dtype", None))
_INSTANCE = _params("num_features", ("eps", 1e-5), ("momentum", 0.1), ("affine", False),
                    ("track_running_stats", False), ("device", None), ("dtype", None))
_RNN = _params("input_size", "hidden_size", ("num_layers", 1), ("bias", True), ("batch_first", False),
               ("dropout", 0.0), ("bidirectional", False), ("device", None), ("dtype", None))
_RNN_TANH = _params("input_size", "hidden_size", ("num_layers", 1), ("nonlinearity", "tanh"), ("bias", True),
                    ("batch_first", False), ("dropout", 0.0), ("bidirectional", False), ("device", None), ("dtype", None))
_LSTM = _params("input_size", "hidden_size", ("num_layers", 1), ("bias", True), ("batch_first", False),
                ("dropout", 0.0), ("bidirectional", False), ("proj_size", 0), ("device", None), ("dtype", None))
_TRANSFORMER_LAYER = _params("d_model", "nhead", ("dim_feedforward", 2048), ("dropout", 0.1), ("activation", "relu"),
                             ("layer_norm_eps", 1e-5), ("batch_first", False), ("norm_first", False),
                             ("bias", True), ("device", None), ("dtype", None))

LAYERS: Dict[str, Contract] = {}


def _add(name: str, parameters, apply, returns_pair: bool = False) -> None:
    LAYERS[name] = Contract(name, parameters, apply, returns_pair)


def _feature_dropout(arguments, shape):
    """`Dropout1d/2d/3d` zero whole channels: a 1-D input has none (`Feature dropout requires at
    least 2 dimensions in the input`, measured on torch 2.13)."""
    if shape is not None and len(shape) < 2:
        return Misfit("rank", None, 2, len(shape), f"zeroes whole channels and needs at least a 2-D input, gets "
                                                    f"{len(shape)}-D {D.shape_text(shape)}")
    return shape


for _name in IDENTITY_LAYERS:
    _add(_name, (("*", None),), _feature_dropout if _name in ("Dropout1d", "Dropout2d", "Dropout3d") else _same)
for _n in (1, 2, 3):
    _add(f"Conv{_n}d", _CONV, _conv(_n))
    _add(f"ConvTranspose{_n}d", _CONV_T, _conv(_n, transposed=True))
    _add(f"MaxPool{_n}d", _MAXPOOL, _pool(_n, has_dilation=True))
    _add(f"AvgPool{_n}d", _AVGPOOL1D if _n == 1 else _AVGPOOL, _pool(_n, has_dilation=False))
    _add(f"AdaptiveAvgPool{_n}d", _params("output_size"), _adaptive(_n))
    _add(f"AdaptiveMaxPool{_n}d", _params("output_size", ("return_indices", False)), _adaptive(_n))
    _add(f"BatchNorm{_n}d", _NORM, _batchnorm(_n - 1))
    _add(f"InstanceNorm{_n}d", _INSTANCE, _instancenorm(_n))
_add("Linear", _params("in_features", "out_features", ("bias", True), ("device", None), ("dtype", None)), _linear)
_add("LayerNorm", _params("normalized_shape", ("eps", 1e-5), ("elementwise_affine", True), ("bias", True),
                          ("device", None), ("dtype", None)), _layernorm)
_add("GroupNorm", _params("num_groups", "num_channels", ("eps", 1e-5), ("affine", True), ("device", None),
                          ("dtype", None)), _groupnorm)
_add("Embedding", _params("num_embeddings", "embedding_dim", ("padding_idx", None), ("max_norm", None),
                          ("norm_type", 2.0), ("scale_grad_by_freq", False), ("sparse", False), ("_weight", None),
                          ("_freeze", False), ("device", None), ("dtype", None)), _embedding)
_add("RNN", _RNN_TANH, _recurrent(False), returns_pair=True)
_add("GRU", _RNN, _recurrent(False), returns_pair=True)
_add("LSTM", _LSTM, _recurrent(True), returns_pair=True)
_CELL = _params("input_size", "hidden_size", ("bias", True), ("device", None), ("dtype", None))
_add("LSTMCell", _CELL, _cell, returns_pair=True)
_add("GRUCell", _CELL, _cell)
_add("RNNCell", _params("input_size", "hidden_size", ("bias", True), ("nonlinearity", "tanh"), ("device", None),
                        ("dtype", None)), _cell)
_add("MultiheadAttention", _params("embed_dim", "num_heads", ("dropout", 0.0), ("bias", True), ("add_bias_kv", False),
                                   ("add_zero_attn", False), ("kdim", None), ("vdim", None), ("batch_first", False),
                                   ("device", None), ("dtype", None)), _attention, returns_pair=True)
_add("TransformerEncoderLayer", _TRANSFORMER_LAYER, _transformer_layer)
_add("TransformerDecoderLayer", _TRANSFORMER_LAYER, _transformer_layer)
_add("Flatten", _params(("start_dim", 1), ("end_dim", -1)), _flatten)
_add("Unflatten", _params("dim", "unflattened_size"), _unflatten)
_add("Upsample", _params(("size", None), ("scale_factor", None), ("mode", "nearest"), ("align_corners", None),
                         ("recompute_scale_factor", None)), _upsample)
_add("PixelShuffle", _params("upscale_factor"), _pixel_shuffle)
for _n, _name in ((1, "ZeroPad1d"), (2, "ZeroPad2d"), (1, "ReflectionPad1d"), (2, "ReflectionPad2d"),
                  (1, "ReplicationPad1d"), (2, "ReplicationPad2d")):
    _add(_name, _params("padding"), _padding(_n, reflection=_name.startswith("Reflection")))


def contract(qualified: Optional[str]) -> Optional[Contract]:
    """The contract of a torch layer class (`torch.nn.Conv2d`, `torch.nn.modules.conv.Conv2d`)."""
    if not qualified or not qualified.startswith("torch.nn."):
        return None
    return LAYERS.get(qualified.rsplit(".", 1)[-1])


# Parameters that tell what a layer was built for (the number a fix rewrites).
FEATURE_PARAMETERS = ("in_features", "in_channels", "num_features", "num_channels", "input_size",
                      "embed_dim", "d_model", "normalized_shape")
