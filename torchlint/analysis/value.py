"""The abstract values of the value model: what the analysis knows about one runtime value.

A `Value` has independent facets, each with its own small lattice and join:

- **kind**: what sort of object it is (a tensor, a parameter, a module, a loss criterion, a loss
  tensor, an optimizer, a DataLoader or one of its batches, a number, a container, ...);
- **autograd**: whether it takes part in autograd (a leaf that requires grad, certainly has a
  graph, certainly has none, may have one);
- **layout**: contiguous, permuted by a known permutation, or unknown;
- **device**: where it lives, symbolically (the host, a hard-coded CUDA device, a device
  expression such as `device`, unknown);
- **shape**: the size expression of each dimension, where the code spells them out;

plus a few facts that only some kinds carry (a module's class and layers, a criterion's class, the
node that made an object, the activation that produced a tensor, the parameter whose memory a
tensor shares).

Every facet answers "unknown" unless the code makes the fact certain: rules ask for certain facts
only, so unknown stays silent. Values are immutable and hashable (they key function summaries).
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

# -- kinds -------------------------------------------------------------------------------------
UNKNOWN = "unknown"
BOTTOM = "bottom"  # no value yet (a cycle being solved, a path that never runs)
TENSOR = "tensor"
PARAMETER = "parameter"  # an nn.Parameter / a tensor created with requires_grad=True
LOSS = "loss"  # a loss tensor: a criterion's output, or arithmetic on one
INPUT = "input"  # an entry point's argument of unknown type (may be a tensor)
MODULE = "module"
CRITERION = "criterion"  # an instance of a `torch.nn.*Loss` class
OPTIMIZER = "optimizer"
SCHEDULER = "scheduler"
LOADER = "loader"  # a DataLoader (or a known dataset): iterating it gives batches
BATCH = "batch"  # one item a loader yields: host tensors, as a tensor, tuple or dict
NUMBER = "number"
STRING = "string"
NONE = "none"
CONTAINER = "container"  # list, tuple, dict, set, generator, `model.parameters()`
DEVICE = "device"  # a torch.device or a device string
DTYPE = "dtype"
FUNCTION = "function"  # a same-file function or method
CLASS = "class"  # a same-file class
INSTANCE = "instance"  # an instance of a same-file class that is not a module
GRAD_SCALER = "grad_scaler"

TENSOR_KINDS = frozenset({TENSOR, PARAMETER, LOSS})

# -- autograd ----------------------------------------------------------------------------------
AG_UNKNOWN = "unknown"
AG_NONE = "none"  # certainly no graph: made under no_grad, detached, data, a factory
AG_LEAF = "leaf"  # certainly a leaf that requires grad
AG_GRAPH = "graph"  # certainly carries a graph (has a grad_fn)
AG_REQUIRES = "requires"  # requires grad, leaf or not
AG_MAYBE = "maybe"  # may carry a graph: computed from inputs whose status is not known

_AG_REQUIRING = frozenset({AG_LEAF, AG_GRAPH, AG_REQUIRES})

# -- grad modes (where a value is made) -------------------------------------------------------
GRAD_OFF = "off"
GRAD_ON = "on"
GRAD_UNKNOWN = "unknown"  # `set_grad_enabled(flag)`, or callers that disagree
GRAD_INHERITED = "inherited"  # whatever the caller runs under (taken as on)

# -- devices -----------------------------------------------------------------------------------
HOST = "host"  # certainly the CPU: a factory without `device=`, a loader's batch, `.cpu()`
CUDA = "cuda"  # a hard-coded CUDA device: `.cuda()`, `"cuda"`, `torch.cuda.FloatTensor`
CHOSEN = "chosen"  # a device expression the program chose (`device`, `args.device`): may be CUDA
META = "meta"


class Device:
    """Where a tensor or module lives: `where` is HOST, CUDA, CHOSEN or META; `spelled` is the
    device expression's text for CHOSEN (two values with the same text are on the same device);
    `node` is the call that put it there (a `.cuda()`, a `.to(device)`, a loader loop)."""

    __slots__ = ("where", "spelled", "node")

    def __init__(self, where: str, spelled: Optional[str] = None, node: Any = None) -> None:
        self.where = where
        self.spelled = spelled
        self.node = node

    def key(self) -> tuple:
        return (self.where, self.spelled)

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    @property
    def may_be_cuda(self) -> bool:
        return self.where in (CUDA, CHOSEN)

    def __repr__(self) -> str:
        return f"Device({self.where}{', ' + self.spelled if self.spelled else ''})"


def device_named(text: str, node: Any = None) -> Device:
    """The device a device string names (`"cuda:0"`, `"cpu"`, `"mps"`; the caller has checked it
    is one, with `torch_api.DEVICE_STRING`)."""
    where = text.split(":")[0]
    return Device(CUDA if where == "cuda" else (HOST if where == "cpu" else (META if where == "meta" else CHOSEN)),
                  text if where not in ("cuda", "cpu", "meta") else None, node)


def join_devices(a: Optional[Device], b: Optional[Device]) -> Optional[Device]:
    if a is None or b is None:
        return None
    if a == b:
        return a
    return None


# -- layouts -----------------------------------------------------------------------------------
CONTIGUOUS = "contiguous"
PERMUTED = "permuted"
MAYBE_PERMUTED = "maybe_permuted"  # made from a permuted tensor by an op that may keep its strides
LAYOUT_UNKNOWN = "unknown"


class Layout:
    """How a tensor's elements lie in memory relative to its dimensions.

    PERMUTED: a contiguous tensor transposed by `operation` (`permute`, `transpose`, `t`, `T`, ...)
    with literal arguments `numbers`, at `source` (the transposing expression); `order` is where
    each dimension comes from when the rank is known (`rank`), else None."""

    __slots__ = ("state", "source", "operation", "numbers", "order", "base_rank")

    def __init__(self, state: str, source: Any = None, operation: Optional[str] = None,
                 numbers: Tuple[int, ...] = (), order: Optional[Tuple[int, ...]] = None,
                 base_rank: Optional[int] = None) -> None:
        self.state = state
        self.source = source
        self.operation = operation
        self.numbers = numbers
        self.order = order
        self.base_rank = base_rank

    def key(self) -> tuple:
        return (self.state, self.operation, self.numbers, self.order, id(self.source))

    def __eq__(self, other) -> bool:
        return isinstance(other, Layout) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return f"Layout({self.state}{', ' + str(self.order) if self.order else ''})"


LAYOUT_CONTIGUOUS = Layout(CONTIGUOUS)
LAYOUT_MAYBE = Layout(MAYBE_PERMUTED)
LAYOUT_NOT_KNOWN = Layout(LAYOUT_UNKNOWN)


def join_layouts(a: Layout, b: Layout) -> Layout:
    if a == b:
        return a
    if a.state == PERMUTED and b.state == PERMUTED and (
            (a.order is not None and a.order == b.order)
            or (a.order is None and b.order is None and (a.operation, a.numbers, a.base_rank) == (
                b.operation, b.numbers, b.base_rank))):
        return Layout(PERMUTED, a.source, a.operation, a.numbers, a.order, a.base_rank)
    return LAYOUT_NOT_KNOWN


# -- the value ---------------------------------------------------------------------------------
class Value:
    """One abstract value. Facets not given are unknown.

    - `module`: for MODULE, a `ModuleInfo`;
    - `detail`: a kind-specific fact (a CRITERION's loss class, an OPTIMIZER's parameter owners,
      a FUNCTION's or CLASS's node, a STRING's text, a DEVICE's spelling);
    - `site`: the node that made this object (its identity: two modules built by the same
      call are the same module);
    - `items`: for a tuple/list of known length, the value of each element;
    - `element`: for a container (or a batch), the join of its elements' values;
    - `activation`: ("softmax" | "sigmoid", node) when the tensor is that activation's output;
    - `alias`: the parameter (a `cst.Param`) whose memory this tensor shares: the argument
      itself or a view of it;
    - `optional`: the value may also be None;
    - `role`: a role known only from how the code names or uses the value ("optimizer",
      "scaler"), for values of unknown kind.
    """

    __slots__ = ("kind", "autograd", "layout", "device", "shape", "dtype", "module", "detail",
                 "site", "items", "element", "activation", "alias", "optional", "role", "_key",
                 "_hash")

    def __init__(self, kind: str = UNKNOWN, autograd: str = AG_UNKNOWN, layout: Layout = LAYOUT_NOT_KNOWN,
                 device: Optional[Device] = None, shape: Optional[tuple] = None, dtype: Optional[str] = None,
                 module: Optional["ModuleInfo"] = None, detail: Any = None, site: Any = None,
                 items: Optional[Tuple["Value", ...]] = None, element: Optional["Value"] = None,
                 activation: Optional[tuple] = None, alias: Any = None, optional: bool = False,
                 role: Optional[str] = None) -> None:
        self.kind = kind
        self.autograd = autograd
        self.layout = layout
        self.device = device
        self.shape = shape
        self.dtype = dtype
        self.module = module
        self.detail = detail
        self.site = site
        self.items = items
        self.element = element
        self.activation = activation
        self.alias = alias
        self.optional = optional
        self.role = role
        self._key = None
        self._hash = None

    # -- identity ---------------------------------------------------------------------------
    def key(self) -> tuple:
        key = self._key
        if key is None:
            key = self._key = (
                self.kind, self.autograd, self.layout.key(), None if self.device is None else self.device.key(),
                None if self.shape is None else tuple(id(d.size) for d in self.shape), self.dtype,
                None if self.module is None else self.module.key(), _identity(self.detail), id(self.site),
                None if self.items is None else tuple(i.key() for i in self.items),
                None if self.element is None else self.element.key(),
                None if self.activation is None else (self.activation[0], id(self.activation[1])),
                id(self.alias), self.optional, self.role,
            )
        return key

    def __eq__(self, other) -> bool:
        return self is other or (isinstance(other, Value) and self.key() == other.key())

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self.key())
        return self._hash

    def but(self, **changes) -> "Value":
        """A copy with some facets changed."""
        copy = Value(self.kind, self.autograd, self.layout, self.device, self.shape, self.dtype, self.module,
                     self.detail, self.site, self.items, self.element, self.activation, self.alias, self.optional,
                     self.role)
        for name, value in changes.items():
            if name not in _FIELD_SET:
                raise TypeError(f"Value has no facet {name!r}")
            setattr(copy, name, value)
        return copy

    def __repr__(self) -> str:
        parts = [self.kind]
        if self.autograd != AG_UNKNOWN:
            parts.append(f"ag={self.autograd}")
        if self.layout.state != LAYOUT_UNKNOWN:
            parts.append(repr(self.layout))
        if self.device is not None:
            parts.append(repr(self.device))
        if self.shape is not None:
            parts.append(f"rank={len(self.shape)}")
        if self.module is not None:
            parts.append(repr(self.module))
        if self.role:
            parts.append(f"role={self.role}")
        return "Value(" + ", ".join(parts) + ")"

    # -- questions --------------------------------------------------------------------------
    @property
    def is_tensor(self) -> bool:
        return self.kind in TENSOR_KINDS

    @property
    def requires_grad(self) -> bool:
        """Certainly requires grad (a leaf or a result with a graph)."""
        return self.autograd in _AG_REQUIRING

    @property
    def may_have_graph(self) -> bool:
        return self.autograd in (AG_GRAPH, AG_REQUIRES, AG_MAYBE)

    @property
    def is_leaf_requiring_grad(self) -> bool:
        return self.autograd == AG_LEAF

    @property
    def has_no_graph(self) -> bool:
        return self.autograd == AG_NONE

    @property
    def is_permuted(self) -> bool:
        return self.layout.state == PERMUTED

    @property
    def is_zero_dim(self) -> bool:
        return self.shape is not None and len(self.shape) == 0


_FIELDS = ("kind", "autograd", "layout", "device", "shape", "dtype", "module", "detail", "site", "items",
           "element", "activation", "alias", "optional", "role")
_FIELD_SET = frozenset(_FIELDS)


def _identity(detail: Any) -> Any:
    if detail is None or isinstance(detail, (str, int, float, tuple, frozenset)):
        return detail
    return id(detail)


class ModuleInfo:
    """What is known of a module: its class (`qualified` for torch/torchvision classes, `klass`
    for a same-file class; `origin` for a class of another project file), the first Dropout/BatchNorm-like layer it holds (`stochastic`, a
    description), whether it certainly has no parameters or buffers (`stateless`), the activation
    its output always ends in (`activation`: "softmax"/"sigmoid"), and its submodules when it is
    a container built here (`parts`)."""

    __slots__ = ("qualified", "klass", "stochastic", "stateless", "activation", "parts", "output", "origin",
                 "held", "_key")

    def __init__(self, qualified: Optional[str] = None, klass: Any = None, stochastic: Optional[str] = None,
                 stateless: bool = False, activation: Optional[str] = None,
                 parts: Optional[Tuple[Value, ...]] = None, output: Optional[Value] = None,
                 origin: Optional[str] = None, held: Optional[Tuple[Tuple[str, str], ...]] = None) -> None:
        self.qualified = qualified
        self.klass = klass
        self.stochastic = stochastic
        self.stateless = stateless
        self.activation = activation
        self.parts = parts
        # A class of another project file (`torchlint.analysis.project`): what its forward
        # returns (layout and rank; its graph is decided where it is called), and where the
        # class is defined ("model.py:4").
        self.output = output
        self.origin = origin
        # ... and which of its attributes hold its Dropout/BatchNorm layers, (attribute,
        # description) each: what a subclass here inherits unless it assigns the attribute again.
        self.held = held
        self._key = None

    def key(self) -> tuple:
        if self._key is None:
            self._key = (self.qualified, id(self.klass), self.stochastic, self.stateless, self.activation,
                         None if self.parts is None else tuple(p.key() for p in self.parts),
                         None if self.output is None else self.output.key(), self.origin, self.held)
        return self._key

    def __eq__(self, other) -> bool:
        return isinstance(other, ModuleInfo) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    @property
    def class_name(self) -> Optional[str]:
        if self.klass is not None:
            return self.klass.name.value
        if self.qualified is not None:
            return self.qualified.rsplit(".", 1)[-1]
        return None

    def __repr__(self) -> str:
        return f"ModuleInfo({self.class_name}{', ' + self.stochastic if self.stochastic else ''})"


def join_modules(a: Optional[ModuleInfo], b: Optional[ModuleInfo]) -> Optional[ModuleInfo]:
    if a is None or b is None:
        return None
    if a == b:
        return a
    stochastic = a.stochastic if a.stochastic is not None and b.stochastic is not None else None
    activation = a.activation if a.activation == b.activation else None
    same_class = a.qualified == b.qualified and a.klass is b.klass and a.origin == b.origin
    return ModuleInfo(a.qualified if same_class else None, a.klass if same_class else None, stochastic,
                      a.stateless and b.stateless, activation,
                      output=a.output if same_class and a.output == b.output else None,
                      origin=a.origin if same_class else None)


# -- constants ---------------------------------------------------------------------------------
UNKNOWN_VALUE = Value()
BOTTOM_VALUE = Value(BOTTOM)
NONE_VALUE = Value(NONE, AG_NONE)
NUMBER_VALUE = Value(NUMBER, AG_NONE)
STRING_VALUE = Value(STRING, AG_NONE)


def _join_autograd(a: str, b: str) -> str:
    if a == b:
        return a
    if AG_UNKNOWN in (a, b):
        return AG_UNKNOWN
    if a in _AG_REQUIRING and b in _AG_REQUIRING:
        return AG_REQUIRES
    return AG_MAYBE


def _join_kinds(a: str, b: str) -> str:
    if a == b:
        return a
    if a in TENSOR_KINDS and b in TENSOR_KINDS:
        return TENSOR
    if (a == INPUT and b in TENSOR_KINDS) or (b == INPUT and a in TENSOR_KINDS):
        return TENSOR
    return UNKNOWN


def join(a: Value, b: Value) -> Value:
    """The least value both `a` and `b` are: every facet that differs becomes unknown (the kinds of
    tensors join to a tensor; None joins with anything as an optional value)."""
    if a is b:
        return a
    if a.kind == BOTTOM:
        return b
    if b.kind == BOTTOM:
        return a
    if a.kind == NONE and b.kind != NONE:
        return b if b.optional else b.but(optional=True)
    if b.kind == NONE and a.kind != NONE:
        return a if a.optional else a.but(optional=True)
    if a == b:
        return a
    kind = _join_kinds(a.kind, b.kind)
    if kind == UNKNOWN:
        role = a.role if a.role == b.role else None
        if role is None and {a.kind, b.kind} == {OPTIMIZER, UNKNOWN}:
            role = "optimizer" if "optimizer" in (a.role, b.role) else None
        return Value(UNKNOWN, _join_autograd(a.autograd, b.autograd), optional=a.optional or b.optional, role=role)
    items = None
    if a.items is not None and b.items is not None and len(a.items) == len(b.items):
        items = tuple(join(x, y) for x, y in zip(a.items, b.items))
    element = None
    if a.element is not None and b.element is not None:
        element = join(a.element, b.element)
    return Value(
        kind,
        _join_autograd(a.autograd, b.autograd),
        join_layouts(a.layout, b.layout),
        join_devices(a.device, b.device),
        a.shape if a.shape is not None and b.shape is not None and len(a.shape) == len(b.shape)
        and all(x.size is y.size for x, y in zip(a.shape, b.shape)) else None,
        a.dtype if a.dtype == b.dtype else None,
        join_modules(a.module, b.module),
        a.detail if _identity(a.detail) == _identity(b.detail) else None,
        a.site if a.site is b.site else None,
        items,
        element,
        a.activation if a.activation == b.activation or (
            a.activation is not None and b.activation is not None and a.activation[0] == b.activation[0]) else None,
        a.alias if a.alias is b.alias else None,
        a.optional or b.optional,
        a.role if a.role == b.role else None,
    )


def identity(value: Value) -> Any:
    """What tells two objects apart: the node that made it, or the parameter it came in by."""
    return value.site if value.site is not None else value.alias


def join_all(values) -> Value:
    result = BOTTOM_VALUE
    for value in values:
        result = join(result, value)
        if result.kind == UNKNOWN and result.autograd == AG_UNKNOWN and not result.role:
            return result
    return result
