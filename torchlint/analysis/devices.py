"""Facts about devices and module structure: device moves, device arguments, tensor factories,
and how a file spells `torch.nn`.

All answers are conservative: an argument is a device only when the code makes it plain
(`"cuda"`, `torch.device(...)`, a name like `device`/`dev`/`x.device`), never a dtype
(`torch.float16`, `dtype=...`) or something unknown (`.to(other_tensor)`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, List, Optional

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.semantic import keyword, method_call_in
from torchlint.analysis.value import DEVICE, STRING, Device, device_named

if TYPE_CHECKING:
    from torchlint.analysis.semantic import Semantic

DEVICE_MOVE_METHODS = {"cuda", "cpu", "xpu", "mps"}
DTYPE_NAMES = api.DTYPE_NAMES
_DEVICE_NAME = re.compile(r"(^|_)(device|dev)s?($|_)|^(cuda|gpu)(_?\w*)?$", re.IGNORECASE)
STATELESS_MODULES = api.STATELESS_MODULES
# torch.Tensor factories that build a fresh tensor at `torch.<name>(...)`.
TENSOR_FACTORIES = {
    "tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange", "linspace",
    "logspace", "eye", "as_tensor", "randperm", "from_numpy", "triu", "tril", "cat", "stack",
    "FloatTensor", "LongTensor", "Tensor", "BoolTensor", "IntTensor", "DoubleTensor",
}
# Tensor methods that keep a fresh tensor a tensor on the same device (`torch.ones(3).float()`).
TENSOR_PRESERVING_METHODS = {
    "float", "long", "bool", "int", "double", "half", "view", "reshape", "unsqueeze", "squeeze",
    "triu", "tril", "t", "transpose", "permute", "expand", "repeat", "flatten", "contiguous",
    "clone", "detach", "fill_", "zero_", "normal_", "uniform_", "mul", "add", "sub", "div",
    "exp", "log", "cumsum", "masked_fill", "masked_fill_", "logical_not", "bitwise_not", "abs",
    "sqrt", "pow", "neg", "sin", "cos", "__invert__",
}


def is_dtype_expr(semantic: "Semantic", expr: cst.BaseExpression) -> bool:
    """`torch.float16`, `torch.half`, a name or attribute spelled like a dtype (`dtype`, `x.dtype`)."""
    name = semantic.qualified_name(expr)
    if name is not None and name.startswith("torch.") and name.split(".")[-1] in DTYPE_NAMES \
            and name.count(".") == 1:
        return True
    if isinstance(expr, cst.Name):
        return "dtype" in expr.value.lower()
    if isinstance(expr, cst.Attribute):
        return "dtype" in expr.attr.value.lower()
    return False


def is_device_name(name: str) -> bool:
    """Whether an identifier is spelled like a device (`device`, `dev`, `train_device`, `gpu`)."""
    return bool(_DEVICE_NAME.search(name))


def is_device_expr(semantic: "Semantic", expr: cst.BaseExpression) -> bool:
    """Whether `expr` is certainly a device: `"cuda"`, `"cuda:0"`, `torch.device(...)`, a name
    or attribute named like a device (`device`, `dev`, `self.device`, `x.device`, `args.gpu`),
    `f"cuda:{rank}"`. Dtypes and unknown values (other tensors) are not."""
    if is_dtype_expr(semantic, expr):
        return False
    if type(expr) is cst.SimpleString:
        try:
            value = expr.evaluated_value
        except Exception:  # noqa: BLE001 - odd literal
            return False
        return isinstance(value, str) and bool(api.DEVICE_STRING.match(value))
    if type(expr) is cst.FormattedString:
        head = "".join(p.value for p in expr.parts if isinstance(p, cst.FormattedStringText))
        return head.startswith(("cuda", "xpu", "npu", "hpu"))
    if type(expr) is cst.Call:
        return semantic.is_torch(expr, "torch.device", "torch.cuda.current_device")
    if isinstance(expr, cst.Name):
        return bool(_DEVICE_NAME.search(expr.value)) or imported_device(semantic, expr) is not None
    if isinstance(expr, cst.Attribute):
        return bool(_DEVICE_NAME.search(expr.attr.value))
    return False


def imported_device(semantic: "Semantic", name: cst.BaseExpression) -> Optional["Device"]:
    """The device a name imported from another file of the project holds, whatever this file
    calls it (`dev2` after `from config import device as dev2`, config.py's `device =
    torch.device(...)`, or `eval_device = "cpu"`): resolved through the import binding, not by
    the name's spelling. None for any other name, or a value that file does not make a device."""
    if type(name) is not cst.Name or semantic.project is None:
        return None
    qualified = semantic.scopes.import_name(name)
    if qualified is None or qualified.split(".")[0] in ("torch", "torchvision"):
        return None
    fact = semantic.project.fact(qualified)
    if fact is None or fact.kind != "value":
        return None
    value = fact.value
    if value.kind == DEVICE and isinstance(value.detail, Device):
        return value.detail
    if value.kind == STRING and isinstance(value.detail, str) and api.DEVICE_STRING.match(value.detail):
        return device_named(value.detail)
    return None


def device_argument(semantic: "Semantic", call: cst.Call) -> Optional[cst.BaseExpression]:
    """For a device move (see `is_device_move`), the device expression (`None` for `.cuda()`,
    `.cpu()` without argument)."""
    if not isinstance(call.func, cst.Attribute):
        return None
    if call.func.attr.value in DEVICE_MOVE_METHODS:
        device = keyword(call, "device")
        if device is None and call.args and call.args[0].keyword is None:
            device = call.args[0].value
        return device
    device = keyword(call, "device")
    if device is not None:
        return device
    if call.args and call.args[0].keyword is None:
        return call.args[0].value
    return None


def is_device_move(semantic: "Semantic", call: cst.CSTNode) -> bool:
    """`.cuda()`, `.cuda(rank)`, `.cpu()`, `.to(device)`, `.to("cuda")`, `.to(torch.device(...))`,
    `.to(device=...)`, `.to(device, dtype)`. Not `.to(torch.float16)`, `.to(dtype=...)`,
    `.half()`, `.float()`, nor `.to(other_tensor)` (unknown)."""
    if type(call) is not cst.Call or type(call.func) is not cst.Attribute:
        return False
    method = call.func.attr.value
    if method in DEVICE_MOVE_METHODS:
        # `.cpu()` with arguments is not the torch method (e.g. a config object)
        return method != "cpu" or not call.args
    if method != "to":
        return False
    if keyword(call, "device") is not None:
        return True
    if not call.args or call.args[0].keyword is not None:
        return False
    return is_device_expr(semantic, call.args[0].value)


def tensor_factories(semantic: "Semantic", expr: cst.BaseExpression) -> Optional[List[cst.Call]]:
    """When `expr` certainly builds a fresh tensor from torch factories — `torch.zeros(...)`,
    `torch.tensor([...])`, chained with tensor-preserving methods (`torch.ones(n, n).tril().bool()`),
    indexed (`torch.arange(n)[:, None]`), or in arithmetic with numbers or other such tensors
    (`1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))`) — the factory calls; else None."""
    while True:
        if method_call_in(expr, TENSOR_PRESERVING_METHODS) and semantic.qualified_name(expr.func) is None:
            expr = expr.func.value
        elif type(expr) is cst.Subscript:
            expr = expr.value
        elif type(expr) is cst.UnaryOperation:
            expr = expr.expression
        else:
            break
    if type(expr) is cst.BinaryOperation:
        left = tensor_factories(semantic, expr.left)
        right = tensor_factories(semantic, expr.right)
        if left is None and right is None:
            return None
        for side, found in ((expr.left, left), (expr.right, right)):
            if found is None and not _is_number_like(side):
                return None
        return (left or []) + (right or [])
    if not isinstance(expr, cst.Call):
        return None
    name = semantic.call_name(expr)
    if name is not None and name.count(".") == 1 and name.startswith("torch.") \
            and name.split(".")[1] in TENSOR_FACTORIES:
        return [expr]
    return None


def _is_number_like(expr: cst.BaseExpression) -> bool:
    """A number literal, or a plain name / arithmetic on them (`dim`, `n_classes`, `2 * d`)."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return _is_number_like(expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        return _is_number_like(expr.left) and _is_number_like(expr.right)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and \
            isinstance(expr.func.value, cst.Name) and expr.func.value.value == "math":
        return True
    return isinstance(expr, cst.Name) and expr.value not in ("True", "False", "None")


def torch_nn_spelling(semantic: "Semantic", member: str) -> Optional[str]:
    """How this file can spell `torch.nn.<member>` with its own imports: `nn.ModuleList` after
    `import torch.nn as nn` / `from torch import nn`, `ModuleList` after `from torch.nn import
    ModuleList`, `torch.nn.ModuleList` after `import torch`. None when nothing is imported."""
    table = semantic.scopes.bindings.get(semantic.module, {})
    candidates = []
    for name, bindings in table.items():
        if any(b.kind != "import" for b in bindings) or len({b.qualified_name for b in bindings}) != 1:
            continue
        qualified = bindings[0].qualified_name
        if qualified == f"torch.nn.{member}":
            candidates.append((0, name))
        elif qualified == "torch.nn":
            candidates.append((1, f"{name}.{member}"))
        elif qualified == "torch":
            candidates.append((2, f"{name}.nn.{member}"))
    if not candidates:
        return None
    return sorted(candidates)[0][1]
