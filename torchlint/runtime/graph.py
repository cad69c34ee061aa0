"""Autograd graph facts the detectors report: the node a tensor came from (through views),
how many nodes a graph has and how many bytes of saved tensors it still holds.

Bytes "held by a graph" are those of the distinct storages it saved, parameters left out: the
model holds its weights whatever becomes of the graph, so charging them to every graph that saved
them (an evaluation call, a retained loss, a step's sample) would give one graph as many sizes as
there are ways of counting it. TL106, TL003, TL006 and the memory samples all count this way.
"""

from __future__ import annotations

from typing import AbstractSet, Any, Dict, Iterable, Optional, Tuple

# Nodes that only reshape or copy their input: the value a loss sees through them is still the
# softmax's / sigmoid's output.
_PASS_THROUGH = (
    "ViewBackward", "ReshapeAliasBackward", "UnsafeViewBackward", "SqueezeBackward", "UnsqueezeBackward",
    "PermuteBackward", "TransposeBackward", "TBackward", "CloneBackward", "ToCopyBackward", "ExpandBackward",
    "SliceBackward", "SelectBackward", "IndexBackward", "AsStridedBackward", "FlattenBackward",
    "ContiguousBackward", "AliasBackward",
)
MAX_NODES = 20_000


def node_name(node: Any) -> str:
    try:
        return node.name()
    except Exception:  # noqa: BLE001 - a custom node without a name
        return type(node).__name__


def producer(tensor: Any, depth: int = 6) -> Optional[str]:
    """The name of the autograd node that produced `tensor`, looking through view/copy nodes
    (`SoftmaxBackward0` for `softmax(x).view(-1, c)`); None without a grad_fn."""
    node = getattr(tensor, "grad_fn", None)
    for _ in range(depth):
        if node is None:
            return None
        name = node_name(node)
        if not name.startswith(_PASS_THROUGH):
            return name
        inputs = [fn for fn, _ in node.next_functions if fn is not None]
        node = inputs[0] if len(inputs) == 1 else None
    return None


def walk(roots: Iterable[Any], limit: int = MAX_NODES) -> Dict[int, Any]:
    """Every node reachable from `roots` (grad_fn nodes), by id; the dict keeps them alive so
    that ids stay unique while it exists."""
    seen: Dict[int, Any] = {}
    stack = [node for node in roots if node is not None]
    while stack and len(seen) < limit:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        try:
            stack.extend(fn for fn, _ in node.next_functions if fn is not None)
        except Exception:  # noqa: BLE001
            continue
    return seen


def is_parameter(tensor: Any) -> bool:
    """A leaf tensor that requires grad (a parameter), or a view of one (`weight.t()`, which
    `nn.Linear` saves)."""
    try:
        base = tensor._base if tensor._base is not None else tensor
        return bool(base.requires_grad and base.is_leaf)
    except Exception:  # noqa: BLE001 - not a tensor
        return False


def saved_bytes(nodes: Dict[int, Any], parameters: AbstractSet[Tuple[str, int]] = frozenset()) -> int:
    """Bytes of distinct storages the nodes still hold for backward (0 for values backward has
    already freed), without parameters: `parameters` are their storage keys (what a saved-tensor
    hook hands back is a detached view, which no longer says it is one)."""
    storages: Dict[Tuple[str, int], int] = {}
    for node in nodes.values():
        for attr in dir(node):
            if not attr.startswith("_saved_"):
                continue
            try:
                value = getattr(node, attr)
            except Exception:  # noqa: BLE001 - freed by backward, or not a tensor
                continue
            for tensor in value if isinstance(value, (tuple, list)) else (value,):
                nbytes = storage_key_bytes(tensor)
                if nbytes is not None and nbytes[0] not in parameters and not is_parameter(tensor):
                    storages[nbytes[0]] = nbytes[1]
    return sum(storages.values())


def storage_key_bytes(tensor: Any) -> Optional[Tuple[Tuple[str, int], int]]:
    try:
        storage = tensor.untyped_storage()
        return (str(tensor.device), storage.data_ptr() or id(storage)), storage.nbytes()
    except Exception:  # noqa: BLE001 - not a tensor, sparse, or a subclass without storage
        return None


def storage_keys(tensors: Iterable[Any]) -> set:
    """The storage keys of `tensors` (the parameters of the script's models and optimizers)."""
    keys = set()
    for tensor in tensors:
        found = storage_key_bytes(tensor)
        if found is not None:
            keys.add(found[0])
    return keys


def tensor_in(value: Any) -> Optional[Any]:
    """The first tensor in a module's output (a tensor, or a tuple/list/dict holding one)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        for item in value:
            if isinstance(item, torch.Tensor):
                return item
    if isinstance(value, dict):
        for item in value.values():
            if isinstance(item, torch.Tensor):
                return item
    return None


def describe(tensor: Any) -> str:
    """shape, dtype, device, and strides when not contiguous."""
    try:
        text = f"shape {tuple(tensor.shape)}, {str(tensor.dtype).replace('torch.', '')}, {tensor.device}"
        if tensor.layout.__repr__() == "torch.strided" and not tensor.is_contiguous():
            text += f", strides {tuple(tensor.stride())} (not contiguous)"
        return text
    except Exception:  # noqa: BLE001
        return type(tensor).__name__


def mib(nbytes: float) -> str:
    if nbytes < 1024 * 1024:
        return f"{nbytes / 1024:.1f} KiB"
    return f"{nbytes / (1024 * 1024):.2f} MiB"
