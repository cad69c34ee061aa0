"""Where a model's input shape comes from: the data pipeline that feeds it, or a tensor the code
builds with literal sizes.

- a batch of a `DataLoader` over a torchvision dataset (MNIST family 1×28×28, CIFAR10/100 and SVHN
  3×32×32, STL10 3×96×96, ImageFolder 3×?×?), its transforms applied (`Resize`, `CenterCrop`,
  `RandomResizedCrop`, `RandomCrop`, `Grayscale`, `Pad`; size-keeping ones such as `ToTensor`,
  `Normalize` or flips), or over a `TensorDataset` of tensors built with literal sizes;
- a tensor factory with literal sizes (`torch.randn(2, 3, 32, 32)`);
- `summary(model, (3, 32, 32))` (torchsummary: no batch) and `summary(model, input_size=(1, 3,
  32, 32))` (torchinfo: with the batch).

The batch dimension is always the symbol N (a model must work for every batch size, the last
partial batch included); the literal batch size, where the code fixes one, is kept for messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.tensor_shape import dims as D
from torchlint.analysis.tensor_shape import ops
from torchlint.analysis.tensor_shape.callees import bind_call, project_function
from torchlint.analysis.tensor_shape.modules import UNKNOWN, _frozen
from torchlint.analysis.tensor_shape.modules import evaluate as _evaluate


def evaluate(sem, node, env, depth):
    """A constant argument, lists as tuples."""
    return _frozen(_evaluate(sem, node, env, depth))

BATCH = D.symbol("N")

DATASETS = {
    "MNIST": (1, 28, 28), "FashionMNIST": (1, 28, 28), "KMNIST": (1, 28, 28), "EMNIST": (1, 28, 28),
    "QMNIST": (1, 28, 28), "CIFAR10": (3, 32, 32), "CIFAR100": (3, 32, 32), "SVHN": (3, 32, 32),
    "STL10": (3, 96, 96), "ImageFolder": (3, None, None), "Omniglot": (1, 105, 105),
    "LSUN": (3, None, None), "ImageNet": (3, None, None), "CelebA": (3, 218, 178),
    "FakeData": (3, 224, 224),  # its `image_size` argument, when given, replaces this
}

# How many samples each split holds (torchvision's documentation): (train, test).
DATASET_LENGTHS = {
    "MNIST": (60000, 10000), "FashionMNIST": (60000, 10000), "KMNIST": (60000, 10000),
    "CIFAR10": (50000, 10000), "CIFAR100": (50000, 10000), "SVHN": (73257, 26032), "STL10": (5000, 8000),
}

_SIZE_KEEPING = frozenset({
    "ToTensor", "PILToTensor", "ConvertImageDtype", "Normalize", "RandomHorizontalFlip", "RandomVerticalFlip",
    "ColorJitter", "RandomGrayscale", "GaussianBlur", "RandomErasing", "ToImage", "ToDtype", "RandomInvert",
    "RandomAutocontrast", "RandomEqualize", "RandomAdjustSharpness", "RandomPosterize", "RandomSolarize",
    "AutoAugment", "RandAugment", "TrivialAugmentWide", "AugMix", "RandomPerspective",
})




@dataclass
class Source:
    """A known input: its per-sample shape (without the batch), where it comes from ("CIFAR10
    3×32×32 (line 8)") and the batch size the code fixes."""

    sample: Tuple[D.Dim, ...]
    label: str  # what it is ("CIFAR10 3×32×32"); `description` adds where
    batch_size: Optional[int] = None
    batched: bool = True
    length: Optional[int] = None  # samples in the dataset, where the code fixes it
    drop_last: bool = False
    where: Any = None  # (semantic, node) of what made it: its line is found only when a message needs it
    batch_note: str = ""  # the command-line option whose default the batch size is ("--batch-size")

    @property
    def description(self) -> str:
        """`CIFAR10 3×32×32 (line 8)`: computed once, when a message or a table needs it."""
        cached = self.__dict__.get("_description")
        if cached is None:
            cached = self.label + (_line(*self.where) if self.where is not None else "")
            self.__dict__["_description"] = cached
        return cached

    @property
    def batch_sizes(self) -> Tuple[int, ...]:
        """The batch sizes that certainly occur: the loader's, and the last partial batch's."""
        if self.batch_size is None:
            return ()
        sizes = [self.batch_size]
        if self.length is not None and not self.drop_last and self.length % self.batch_size:
            sizes.append(self.length % self.batch_size)
        return tuple(sizes)

    def batch_text(self, size: int) -> str:
        """Why a batch of `size` occurs: "the last batch of MNIST's 60000 samples (60000 = 468×128 + 96)"."""
        note = f", {self.batch_note}'s default" if self.batch_note else ""
        if size == self.batch_size:
            return f"batch_size={size}{note}"
        name = self.label.split(" ")[0]
        return (f"the last batch of {name}'s {self.length} samples ({self.length} = "
                f"{self.length // self.batch_size}×{self.batch_size} + {size}; batch size {self.batch_size}{note})")
    @property
    def shape(self) -> D.Shape:
        return ((BATCH,) + tuple(self.sample)) if self.batched else tuple(self.sample)


def line_of(sem, node) -> Optional[int]:
    """The 1-based line where `node` starts in its own file."""
    from torchlint.positions import node_ranges

    found = node_ranges(sem.module, [node], sem.index).get(node)
    return found[0][0] if found else None


def _line(sem, node) -> str:
    line = line_of(sem, node)
    return f" (line {line})" if line else ""


def _strip(sem, expr: cst.BaseExpression) -> cst.BaseExpression:
    """`x.to(device)`, `x.cuda()`, `x.float()`, `Variable(x)`: the same tensor's shape."""
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and \
                expr.func.attr.value in ("to", "cuda", "float", "double", "half", "cpu", "requires_grad_", "contiguous"):
            expr = expr.func.value
            continue
        if isinstance(expr, cst.Call) and expr.args and sem.qualified_name(expr.func) in (
                "torch.autograd.Variable", "torch.autograd.variable.Variable"):
            expr = expr.args[0].value
            continue
        return expr


def batch_origin(sem, expr: cst.BaseExpression, depth: int = 0) -> Optional[Tuple[cst.BaseExpression, Tuple[int, ...]]]:
    """The loader a batch element comes from and its position in the batch: `data` of `for i,
    (data, target) in enumerate(loader)` is (loader, (0,))."""
    if depth > 8:
        return None
    expr = _strip(sem, expr)
    if isinstance(expr, cst.Subscript):  # `data[0]` of `for i, data in enumerate(loader)`
        position = _constant_index(expr)
        inner = batch_origin(sem, expr.value, depth + 1) if position is not None else None
        return None if inner is None else (inner[0], inner[1] + (position,))
    if not isinstance(expr, cst.Name):
        return None
    definition = sem.reaching_definition(expr)
    if definition is None or definition.path is None:
        return None
    if definition.kind == "for":
        iterable, path = definition.value, tuple(definition.path)
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) \
                and iterable.func.value == "enumerate" and iterable.args:
            if not path or path[0] != 1:
                return None
            iterable, path = iterable.args[0].value, path[1:]
        return iterable, path
    if definition.kind == "assign" and definition.value is not None:
        value = definition.value
        path = tuple(definition.path)
        if path and isinstance(value, (cst.Tuple, cst.List)):
            elements = value.elements
            if path[0] >= len(elements) or isinstance(elements[path[0]], cst.StarredElement):
                return None
            inner = batch_origin(sem, elements[path[0]].value, depth + 1)
            return None if inner is None else (inner[0], inner[1] + path[1:])
        if isinstance(_strip(sem, value), cst.Call) and isinstance(_strip(sem, value).func, cst.Name) \
                and _strip(sem, value).func.value == "next":
            call = _strip(sem, value)
            if call.args and isinstance(call.args[0].value, cst.Call) and isinstance(call.args[0].value.func, cst.Name) \
                    and call.args[0].value.func.value == "iter" and call.args[0].value.args:
                return call.args[0].value.args[0].value, path
        inner = batch_origin(sem, value, depth + 1)
        return None if inner is None else (inner[0], inner[1] + path)
    return None


def _constant_index(subscript: cst.Subscript) -> Optional[int]:
    """`k` of `batch[k]` for a literal k >= 0; None for anything else."""
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return None
    index = subscript.slice[0].slice.value
    return int(index.value) if isinstance(index, cst.Integer) else None


def _bound(sem, node, params):
    """(semantic, expression) for `node`: a parameter of the function being followed
    (`transform` of `create_dataloaders(..., transform=data_transform)`) stands for the argument
    its caller passes, in the caller's file."""
    if params and isinstance(node, cst.Name) and node.value in params:
        definition = sem.reaching_definition(node)
        if definition is not None and definition.kind == "param":
            return params[node.value]
    return sem, node


def _evaluated(sem, node, params):
    return evaluate(*_bound(sem, node, params), {}, 0)


def loader_source(sem, loader_call: cst.Call, params=None) -> Optional[Source]:
    """The per-sample shape a DataLoader's dataset yields as its first element. `params` binds
    the parameters of a function that builds the loader to its caller's arguments (see
    `returned_loader`)."""
    dataset = None
    batch_size = None
    for position, argument in enumerate(a for a in loader_call.args if a.keyword is None):
        if position == 0:
            dataset = argument.value
        elif position == 1:
            batch_size = _evaluated(sem, argument.value, params)
    for argument in loader_call.args:
        if argument.keyword is not None and argument.keyword.value == "dataset":
            dataset = argument.value
        if argument.keyword is not None and argument.keyword.value == "batch_size":
            batch_size = _evaluated(sem, argument.value, params)
        if argument.star == "**":
            options = _keyword_dict(sem, argument.value)
            batch_size = options.get("batch_size", batch_size) if options is not None else None
        elif argument.star:
            batch_size = None
    drop_last = next((_evaluated(sem, a.value, params) for a in loader_call.args
                      if a.keyword is not None and a.keyword.value == "drop_last"), False)
    for argument in loader_call.args:
        if argument.star == "**":
            options = _keyword_dict(sem, argument.value)
            drop_last = options.get("drop_last", drop_last) if options is not None else UNKNOWN
    if dataset is None:
        return None
    source = dataset_source(*_bound(sem, dataset, params), 0, params)
    if source is not None and isinstance(batch_size, int) and not isinstance(batch_size, bool) and batch_size > 0:
        source.batch_size = batch_size
        source.batch_note = _option_of(sem, loader_call)
        source.drop_last = drop_last is not False
        if any(a.star == "*" for a in loader_call.args) or not isinstance(drop_last, bool):
            source.length = None
    elif source is not None:
        source.length = None
    return source


def _option_of(sem, loader_call: cst.Call) -> str:
    """`--batch-size` when the loader's batch size is `args.batch_size` (directly or through a
    `**kwargs` dict literal): the finding then names the default it used."""
    nodes = [a.value for a in loader_call.args if a.keyword is not None and a.keyword.value == "batch_size"]
    for argument in loader_call.args:
        if argument.star == "**" and isinstance(argument.value, cst.Name):
            literal = sem.assigned_value(argument.value)
            if isinstance(literal, cst.Dict):
                nodes += [e.value for e in literal.elements if isinstance(e, cst.DictElement)
                          and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == "batch_size"]
    for node in nodes:
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
            return "--" + node.attr.value.replace("_", "-")
    return ""


def _keyword_dict(sem, expr: cst.BaseExpression) -> Optional[dict]:
    """The keywords `**kwargs` passes, where `kwargs` is a dict literal assigned once and only
    `.update()`d with dict literals (a key an update may add is unknown)."""
    if not isinstance(expr, cst.Name):
        return None
    value = sem.assigned_value(expr)
    if isinstance(value, cst.IfExp):  # `{'num_workers': 1} if args.cuda else {}`: keys of either
        first, second = _dict_literal(sem, value.body), _dict_literal(sem, value.orelse)
        if first is None or second is None:
            return None
        return {key: UNKNOWN for key in set(first) | set(second)}
    if not isinstance(value, cst.Dict):
        return None
    options = _dict_literal(sem, value)
    if options is None:
        return None
    for call in sem.index.calls_named({"update"}):
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == expr.value:
            added = _dict_literal(sem, sem.assigned_value(call.args[0].value) if call.args and
                                  isinstance(call.args[0].value, cst.Name) else (call.args[0].value if call.args else None))
            if added is None:
                return None
            for key in added:
                options[key] = UNKNOWN  # whether the update runs is not known
    for call in sem.index.calls_named({"__setitem__", "pop", "setdefault"}):
        if isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name) \
                and call.func.value.value == expr.value:
            return None
    return options


def _dict_literal(sem, node) -> Optional[dict]:
    if not isinstance(node, cst.Dict):
        return None
    found = {}
    for element in node.elements:
        if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
            return None
        found[element.key.evaluated_value] = evaluate(sem, element.value, {}, 0)
    return found


def _call_of(sem, expr: cst.BaseExpression) -> Optional[cst.Call]:
    value = sem.assigned_value(expr) if isinstance(expr, cst.Name) else expr
    return value if isinstance(value, cst.Call) else None


def dataset_source(sem, expr: cst.BaseExpression, depth: int, params=None) -> Optional[Source]:
    if isinstance(expr, cst.Name) and depth <= 4:
        branches = _branch_values(sem, expr)
        if branches is not None:
            return _joined([dataset_source(sem, value, depth + 1, params) for value in branches], sem, expr)
    call = _call_of(sem, expr)
    if call is None or depth > 4:
        return None
    qualified = sem.qualified_name(call.func) or ""
    short = qualified.rsplit(".", 1)[-1]
    if qualified.startswith("torch.utils.data") and short in ("Subset", "random_split") and call.args:
        return dataset_source(*_bound(sem, call.args[0].value, params), depth + 1, params)
    if qualified.startswith("torch.utils.data") and short == "TensorDataset" and call.args:
        first = tensor_source(sem, call.args[0].value)
        if first is None:
            return None
        whole = _whole(first)
        if not whole:
            return None
        return Source(tuple(whole[1:]), f"TensorDataset of {D.shape_text(whole)}",
                      length=whole[0] if D.is_known(whole[0]) else None, where=(sem, call))
    if not qualified.startswith("torchvision.datasets.") or short not in DATASETS:
        return None
    shape = list(DATASETS[short])
    if short == "FakeData":
        given = next((evaluate(sem, a.value, {}, 0) for a in call.args
                      if a.keyword is not None and a.keyword.value == "image_size"), shape)
        if not isinstance(given, (tuple, list)) or len(given) != 3:
            return None
        shape = [d if isinstance(d, int) and not isinstance(d, bool) else None for d in given]
    transform = None
    for argument in call.args:
        if argument.keyword is not None and argument.keyword.value == "transform":
            transform = argument.value
    misfits: List[Tuple[cst.Call, int, int]] = []
    if transform is not None:
        shape = _transformed(*_bound(sem, transform, params), shape, misfits)
        if shape is None:
            return None
    if any(d is None for d in shape):
        return None
    source = Source(tuple(shape), f"{short} {'×'.join(str(d) for d in shape)}", where=(sem, call))
    source.length = _dataset_length(sem, call, short) if not params else None
    return source


def _branch_values(sem, name: cst.Name) -> Optional[List[cst.BaseExpression]]:
    """The values of a name the arms of an `if`/`elif` chain assign (`dataset = dset.CIFAR10(...)`
    in one arm, `dataset = dset.MNIST(...)` in the next), when more than one may reach it and each
    is a plain assignment; None otherwise."""
    definitions = sem.values.flow.reaching(name)
    if not definitions or len(definitions) < 2 or len(definitions) > 8:
        return None
    if any(d.kind != "assign" or d.path != () or d.value is None for d in definitions):
        return None
    return [d.value for d in definitions]


def _joined(sources: List[Optional[Source]], sem, name: cst.Name) -> Optional[Source]:
    """What every arm's dataset certainly shares: a dimension the arms disagree on is unknown
    (CIFAR10 3×64×64 or MNIST 1×64×64: ?×64×64). None unless every arm's dataset is known."""
    if not sources or any(s is None or not s.batched for s in sources):
        return None
    ranks = {len(s.sample) for s in sources}
    if len(ranks) != 1:
        return None
    sample = tuple(dims[0] if all(D.same(d, dims[0]) for d in dims[1:]) else None
                   for dims in zip(*(s.sample for s in sources)))
    if all(d is None for d in sample):
        return None
    names = sorted({s.label.split(" ")[0] for s in sources})
    label = f"{'/'.join(names)} {D.shape_text(sample)} (whichever `{name.value}` is assigned)"
    return Source(sample, label, where=(sem, name))


def _dataset_length(sem, call: cst.Call, short: str) -> Optional[int]:
    lengths = DATASET_LENGTHS.get(short)
    if lengths is None or any(a.star for a in call.args):
        return None
    keywords = {a.keyword.value: evaluate(sem, a.value, {}, 0) for a in call.args if a.keyword is not None}
    if short in ("SVHN", "STL10"):
        split = keywords.get("split", "train")
        return {"train": lengths[0], "test": lengths[1]}.get(split) if isinstance(split, str) else None
    positional = [a for a in call.args if a.keyword is None]
    train = keywords.get("train", evaluate(sem, positional[1].value, {}, 0) if len(positional) > 1 else True)
    if train is True:
        return lengths[0]
    if train is False:
        return lengths[1]
    return None


def normalize_misfits(sem, call: cst.Call) -> List[Tuple[cst.Call, int, int]]:
    """The `Normalize` transforms of a torchvision dataset's transform whose statistics have
    neither one value nor one per channel of the images: (call, values given, channels)."""
    qualified = sem.qualified_name(call.func) or ""
    short = qualified.rsplit(".", 1)[-1]
    if not qualified.startswith("torchvision.datasets.") or short not in DATASETS:
        return []
    misfits: List[Tuple[cst.Call, int, int]] = []
    for argument in call.args:
        if argument.keyword is not None and argument.keyword.value == "transform":
            _transformed(sem, argument.value, list(DATASETS[short]), misfits)
    return misfits


def _transformed(sem, transform: cst.BaseExpression, shape: list, misfits: list) -> Optional[list]:
    call = _call_of(sem, transform)
    if call is None:
        return None
    qualified = sem.qualified_name(call.func) or ""
    short = qualified.rsplit(".", 1)[-1]
    if not qualified.startswith("torchvision.transforms"):
        return None
    if short == "Compose":
        if len(call.args) != 1 or not isinstance(call.args[0].value, (cst.List, cst.Tuple)):
            return None
        for element in call.args[0].value.elements:
            if isinstance(element, cst.StarredElement):
                return None
            shape = _transformed(sem, element.value, shape, misfits)
            if shape is None:
                return None
        return shape
    arguments = [evaluate(sem, a.value, {}, 0) for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: evaluate(sem, a.value, {}, 0) for a in call.args if a.keyword is not None}
    first = arguments[0] if arguments else keywords.get("size", UNKNOWN)
    if short in _SIZE_KEEPING:
        if short == "Normalize":
            mean = arguments[0] if arguments else keywords.get("mean", UNKNOWN)
            if isinstance(mean, tuple) and isinstance(shape[0], int) and len(mean) not in (1, shape[0]):
                misfits.append((call, len(mean), shape[0]))
        return shape
    if short == "Grayscale":
        channels = arguments[0] if arguments else keywords.get("num_output_channels", 1)
        return [channels if isinstance(channels, int) else None] + shape[1:]
    if short in ("Resize", "CenterCrop", "RandomCrop", "RandomResizedCrop", "RandomSizedCrop", "Scale"):
        if isinstance(first, int) and not isinstance(first, bool):
            if short == "Resize" or short == "Scale":
                if shape[1] is not None and shape[1] == shape[2]:
                    return [shape[0], first, first]
                return [shape[0], None, None]
            return [shape[0], first, first]
        if isinstance(first, tuple) and len(first) == 2 and all(isinstance(v, int) for v in first):
            return [shape[0], first[0], first[1]]
        if isinstance(first, tuple) and len(first) == 1 and isinstance(first[0], int):
            return [shape[0], first[0], first[0]]
        return None
    if short == "Pad":
        padding = first
        if isinstance(padding, int) and all(isinstance(d, int) for d in shape[1:]):
            return [shape[0], shape[1] + 2 * padding, shape[2] + 2 * padding]
        return None
    if short in ("RandomRotation", "RandomAffine"):
        return shape if keywords.get("expand", False) is False else None
    return None


def tensor_source(sem, expr: cst.BaseExpression) -> Optional[Source]:
    """A tensor built with literal sizes (`torch.randn(2, 3, 32, 32)`): its whole shape as
    `sample`, not batched."""
    call = _call_of(sem, _strip(sem, expr))
    if call is None:
        return None
    qualified = sem.qualified_name(call.func) or ""
    parts = qualified.split(".")
    if len(parts) != 2 or parts[0] != "torch" or \
            parts[1] not in ops.LITERAL_FACTORIES | ops.DATA_CONSTRUCTORS | {"randint"}:
        return None
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args):
        return None
    if parts[1] == "randint":
        sizes = [a.value for a in call.args if a.keyword is not None and a.keyword.value == "size"]
        if not sizes and positional:
            sizes = [positional[-1].value]
        if len(sizes) != 1:
            return None
        value = evaluate(sem, sizes[0], {}, 0)
        dims = value if isinstance(value, tuple) else None
    else:
        values = [evaluate(sem, a.value, {}, 0) for a in positional]
        if parts[1] in ops.DATA_CONSTRUCTORS:
            if len(values) != 1 or not isinstance(values[0], tuple):
                if parts[1] == "tensor" or len(values) < 2:
                    return None  # `torch.tensor(3.0)`, `torch.FloatTensor(n)`: no data shape to read
                dims = tuple(values)  # `torch.FloatTensor(2, 3)`: sizes
            else:
                dims = _data_shape(values[0])
        else:
            dims = values[0] if len(values) == 1 and isinstance(values[0], tuple) else tuple(values)
    if not dims or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        return None
    label = f"`{short_text(sem, call)}`"
    if len(dims) in (4, 5):  # images and volumes: the batch comes first, and any batch size must work
        return Source(tuple(dims[1:]), label, batch_size=dims[0], where=(sem, call))
    return Source(tuple(dims), label, batched=False, where=(sem, call))


def _data_shape(data: Any) -> Optional[Tuple[int, ...]]:
    """The shape of nested literal data (`[[1, 2], [3, 4]]`: (2, 2)); None when ragged or unknown."""
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        return ()
    if not isinstance(data, tuple) or not data:
        return None
    inner = [_data_shape(item) for item in data]
    if inner[0] is None or any(shape != inner[0] for shape in inner):
        return None
    return (len(data),) + inner[0]


def _whole(source: Source) -> Tuple[D.Dim, ...]:
    """All the dimensions of a tensor the code builds, its first included (a factory's image
    tensor keeps its first size as `batch_size`)."""
    if source.batched:
        return ((source.batch_size,) if source.batch_size is not None else (None,)) + tuple(source.sample)
    return tuple(source.sample)


def range_source(sem, call: cst.Call) -> Optional[Source]:
    """`torch.arange(start, end, step)` / `torch.linspace(start, end, steps)` with literal bounds:
    a 1-D tensor of known length."""
    qualified = sem.qualified_name(call.func) or ""
    if qualified not in ("torch.arange", "torch.linspace") or any(a.star for a in call.args):
        return None
    positional = [evaluate(sem, a.value, {}, 0) for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: evaluate(sem, a.value, {}, 0) for a in call.args if a.keyword is not None}
    numbers = (int, float)
    if qualified == "torch.linspace":
        steps = positional[2] if len(positional) > 2 else keywords.get("steps")
        length = steps if isinstance(steps, int) and not isinstance(steps, bool) else None
    else:
        values = positional + [keywords[k] for k in ("start", "end", "step") if k in keywords][len(positional):]
        if len(values) == 1:
            values = [0, values[0], 1]
        elif len(values) == 2:
            values = values + [1]
        if len(values) != 3 or not all(isinstance(v, numbers) and not isinstance(v, bool) for v in values) \
                or values[2] == 0:
            return None
        import math

        length = max(0, math.ceil((values[1] - values[0]) / values[2]))
    if length is None:
        return None
    return Source((length,), f"`{short_text(sem, call)}`", batched=False, where=(sem, call))


def short_text(sem, node, limit: int = 40) -> str:
    """`node`'s code on one line, cut at `limit` characters: how messages quote the user's code."""
    text = " ".join(sem.source(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def element_shape(sem, expr: cst.BaseExpression) -> Optional[Tuple[D.Shape, str]]:
    """The batched shape of element k of a batch from a loader over a known dataset: the labels
    of a classification dataset are (N,); element k of a TensorDataset is its tensor's shape."""
    origin = batch_origin(sem, expr)
    if origin is None or len(origin[1]) != 1:
        return None
    loader = sem.values.of(origin[0])
    site = getattr(loader, "site", None)
    if loader.kind != "loader" or not isinstance(site, cst.Call) or site not in sem.index.order:
        return None
    dataset = next((a.value for a in site.args if a.keyword is None and not a.star), None)
    for argument in site.args:
        if argument.keyword is not None and argument.keyword.value == "dataset":
            dataset = argument.value
    call = _call_of(sem, dataset) if dataset is not None else None
    if call is None:
        return None
    qualified = sem.qualified_name(call.func) or ""
    short = qualified.rsplit(".", 1)[-1]
    position = origin[1][0]
    if qualified.startswith("torch.utils.data") and short == "TensorDataset":
        tensors = [a.value for a in call.args if a.keyword is None and not a.star]
        if position >= len(tensors):
            return None
        source = tensor_source(sem, tensors[position])
        whole = _whole(source) if source is not None else None
        if not whole:
            return None
        return (BATCH,) + tuple(whole[1:]), Source((), f"TensorDataset of {source.label}", where=source.where)
    if qualified.startswith("torchvision.datasets.") and short in DATASETS and short != "ImageFolder" and position == 1:
        return (BATCH,), Source((), f"{short} class labels", where=(sem, call))
    if short == "ImageFolder" and position == 1:
        return (BATCH,), Source((), "ImageFolder class labels", where=(sem, call))
    return None


# In-place methods that change a tensor's shape: after one, the shape its definition gave is gone.
SHAPE_CHANGING_INPLACE = frozenset({"resize_", "resize_as_", "t_", "transpose_", "squeeze_", "unsqueeze_",
                                    "as_strided_", "set_", "swapdims_", "swapaxes_", "unflatten_"})


def reshaped_in_place(sem, name: cst.Name) -> bool:
    """Whether the function (or module) that reads `name` calls a shape-changing in-place method
    on it anywhere (`images.resize_(64, 784)`): its definition no longer tells its shape."""
    scope = sem.function_of(name)
    for call in sem.index.calls_named(SHAPE_CHANGING_INPLACE):
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name.value \
                and sem.function_of(call) is scope:
            return True
    return False


def element_source(sem, name: cst.Name) -> Optional[Tuple[D.Shape, Source]]:
    """The batched shape of the batch element `name` is bound to, and where it comes from."""
    origin = batch_origin(sem, name)
    if origin is None or len(origin[1]) != 1:
        return None
    iterable, path = origin
    loader = sem.values.of(iterable)
    site = getattr(loader, "site", None)
    if loader.kind != "loader" or not isinstance(site, cst.Call) or site not in sem.index.order:
        if path != (0,):
            return None
        source = returned_loader(sem, iterable)
        return None if source is None else (source.shape, source)
    if path == (0,):
        source = loader_source(sem, site)
        return None if source is None else (source.shape, source)
    found = element_shape(sem, name)
    if found is None:
        return None
    shape, labels = found
    images = loader_source(sem, site)
    source = Source(tuple(shape[1:]), labels.label, where=labels.where)
    if images is not None:
        source.batch_size, source.length, source.drop_last = images.batch_size, images.length, images.drop_last
    return shape, source


def summary_source(sem, call: cst.Call) -> Optional[Tuple[cst.BaseExpression, Source]]:
    """`summary(model, (3, 32, 32))` (torchsummary) or `summary(model, input_size=(1, 3, 32, 32))`
    (torchinfo): the model and its input."""
    qualified = sem.qualified_name(call.func) or ""
    if qualified not in ("torchsummary.summary", "torchsummary.torchsummary.summary", "torchinfo.summary",
                         "torchinfo.torchinfo.summary"):
        return None
    positional = [a.value for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if not positional:
        return None
    size_node = positional[1] if len(positional) > 1 else keywords.get("input_size")
    if size_node is None:
        return None
    size = evaluate(sem, size_node, {}, 0)
    if not isinstance(size, tuple) or not size or not all(isinstance(d, int) and not isinstance(d, bool) for d in size):
        return None
    label = f"`{short_text(sem, call)}`"
    if qualified.startswith("torchsummary"):
        return positional[0], Source(tuple(size), label, where=(sem, call))
    return positional[0], Source(tuple(size[1:]), label, where=(sem, call))


def returned_loader(sem, expr: cst.BaseExpression) -> Optional[Source]:
    """The loader a project function builds and returns, as the caller binds it:
    `train_dataloader, test_dataloader, class_names = data_setup.create_dataloaders(...,
    transform=data_transform, batch_size=BATCH_SIZE)`, read through data_setup.py's `DataLoader(
    train_data, batch_size=batch_size)` with the caller's transform and batch size."""
    if not isinstance(expr, cst.Name):
        return None
    definition = sem.reaching_definition(expr)
    if definition is None or definition.kind != "assign" or definition.path is None or \
            not isinstance(definition.value, cst.Call) or len(definition.path) > 1:
        return None
    call = definition.value
    found = project_function(sem, call.func)
    if found is None:
        return None
    function, function_sem = found
    params = bind_call(sem, call, function)
    if params is None:
        return None
    returns = [node for node in function_sem.index.descendants(function) if isinstance(node, cst.Return)
               and function_sem.function_of(node) is function]
    if len(returns) != 1 or returns[0].value is None:
        return None
    returned = returns[0].value
    if definition.path:
        if not isinstance(returned, (cst.Tuple, cst.List)) or definition.path[0] >= len(returned.elements):
            return None
        returned = returned.elements[definition.path[0]].value
    built = function_sem.assigned_value(returned) if isinstance(returned, cst.Name) else returned
    if not isinstance(built, cst.Call) or \
            (function_sem.qualified_name(built.func) or "").rsplit(".", 1)[-1] != "DataLoader":
        return None
    source = loader_source(function_sem, built, params)
    if source is not None and source.where is not None:
        where = sem.elsewhere(source.where[1]) if function_sem is not sem else None  # "data_setup.py:6"
        if where is not None:
            source.label = f"{source.label} ({where}, from `{function.name.value}()`)"
            source.where = None
    return source


def loader_of(sem, expr: cst.BaseExpression) -> Optional[Source]:
    """What the loader `expr` holds yields as its first element: a DataLoader this file builds, or
    one a project function builds and returns."""
    loader = sem.values.of(expr)
    site = getattr(loader, "site", None)
    if loader.kind == "loader" and isinstance(site, cst.Call) and site in sem.index.order:
        return loader_source(sem, site)
    return returned_loader(sem, expr)
