"""Where models and batches are, and in which dtype, for the device family (TL007, TL009).

The value model says where each value is (its device facet: a `.cuda()`, a `.to(device)`, a
DataLoader's host batches) and in which dtype (its dtype facet: `x.half()`, `model.half()`),
through assignments, branches, loops, helpers and same-file callers. This module asks it and adds
what a rule needs on top: whether a device expression may name an accelerator, whether a
DataLoader's batches are certainly CPU tensors (its `collate_fn` and dataset), whether something
before a use may have moved a batch in place, and whether a framework moves batches itself.

Like every fact, each answers "no" (None, False) whenever the code does not make the answer
certain, so the rules built on it stay silent.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis import devices, training
from torchlint.analysis.device_guards import ACCELERATORS, CONFIG_OWNERS, cached, positional, string_value
from torchlint.analysis.scopes import dotted_name
from torchlint.analysis.semantic import MODULE_SELF_METHODS, keyword, method_call, method_call_in
from torchlint.analysis.torch_api import HALF_DTYPES, LOADERS
from torchlint.analysis.value import BATCH, CRITERION, HOST, INPUT, LOADER, MODULE, TENSOR_KINDS, UNKNOWN, Value
from torchlint.positions import code_for_node

if TYPE_CHECKING:
    from torchlint.analysis.semantic import Semantic

PARALLEL_WRAPPERS = ("DataParallel", "DistributedDataParallel", "FullyShardedDataParallel", "DDP",
                     "FSDP")
# Frameworks that move each batch to the model's device themselves.
_BATCH_MOVING_FRAMEWORKS = ("lightning", "pytorch_lightning", "accelerate", "ignite",
                            "transformers.Trainer", "transformers.trainer", "transformers.Seq2SeqTrainer")
# Tensor methods that keep a batch element on its device (and are not moves).
_SAME_DEVICE_METHODS = {
    "view", "reshape", "float", "long", "int", "double", "half", "bfloat16", "bool", "squeeze",
    "unsqueeze", "flatten", "permute", "transpose", "t", "contiguous", "clone", "detach",
    "view_as", "expand", "narrow", "type_as", "requires_grad_",
}
# Calls that only read their argument: a batch passed to them is not moved in place.
_READING_FUNCTIONS = {"len", "print", "isinstance", "type", "str", "repr", "range", "enumerate",
                      "zip", "float", "int", "id", "hash", "bool", "Variable"}
_MOVE_ATTRIBUTES = devices.DEVICE_MOVE_METHODS | {"to", "data", "pin_memory", "set_", "copy_"}
# Container methods that may put moved tensors into a batch dict or list.
_MUTATING_METHODS = {"update", "setdefault", "__setitem__", "append", "extend", "insert", "pop",
                     "clear"}
# How much of a dataset expression is read for moves before giving up (and assuming one).
_MOVE_SEARCH_LIMIT = 64
# A same-file class whose source says this may cast its weights or its input.
_CASTING_CLASS = re.compile(r"half|float|bfloat16|dtype|\.to\(|\.type\(|autocast|amp")


def iter_call_arguments(call: cst.Call) -> Iterator[cst.BaseExpression]:
    """The argument values of `call`, positional and keyword (not `*args`/`**kwargs`)."""
    for arg in call.args:
        if not arg.star:
            yield arg.value


# -- device values ------------------------------------------------------------------------------

def device_may_be_accelerator(sem: "Semantic", expr: Optional[cst.BaseExpression]) -> bool:
    """Whether the device `expr` may be an accelerator: `"cuda"`, `"cuda:0"`, `f"cuda:{rank}"`,
    `torch.device("cuda" if ... else "cpu")`, a `device` parameter, a `device` name whose value
    is not certainly the CPU, `args.device`, `self.device`. Not `"cpu"`, `"meta"`, a tensor's
    `.device` (what is moved there follows that tensor) or anything unknown."""
    return _device_test(sem, expr, _may_be_accelerator, set())


def device_is_cpu(sem: "Semantic", expr: Optional[cst.BaseExpression]) -> bool:
    """Whether the device `expr` is certainly the CPU: `"cpu"`, `torch.device("cpu")`, a name
    bound only to those."""
    return _device_test(sem, expr, _is_cpu, set())


def _device_test(sem: "Semantic", expr, test, seen: Set[int]) -> bool:
    if expr is None or id(expr) in seen:
        return False
    seen.add(id(expr))
    return test(sem, expr, seen)


def _bound_values(sem: "Semantic", name: cst.Name) -> Optional[List[cst.BaseExpression]]:
    """The expressions `name` may hold here: the one assignment that reaches it, else (a global
    or closure variable) every assignment of its scope; None when a binding is not a plain
    assignment (a parameter, a loop target, an import)."""
    assigned = sem.assigned_value(name)
    if assigned is not None:
        return [assigned]
    if sem.reaching_definition(name) is not None or sem.values.flow.reaching(name):
        return None  # bound here, but not by one plain assignment
    bindings = sem.scopes.lookup(name.value, name) or []
    values = [b.value for b in bindings if b.kind == "assign" and b.value is not None]
    return values if bindings and len(values) == len(bindings) else None


def _may_be_accelerator(sem: "Semantic", expr: cst.BaseExpression, seen: Set[int]) -> bool:
    value = string_value(expr)
    if value is not None:
        return value.split(":")[0] in ACCELERATORS
    if isinstance(expr, cst.FormattedString):
        head = "".join(p.value for p in expr.parts if isinstance(p, cst.FormattedStringText))
        return head.startswith(ACCELERATORS)
    if isinstance(expr, cst.IfExp):
        return _device_test(sem, expr.body, _may_be_accelerator, seen) or \
            _device_test(sem, expr.orelse, _may_be_accelerator, seen)
    if isinstance(expr, cst.Call):
        if sem.is_torch(expr, "torch.cuda.current_device"):
            return True
        if sem.is_torch(expr, "torch.device"):
            first = keyword(expr, "type") or next(iter(positional(expr)), None)
            return _device_test(sem, first, _may_be_accelerator, seen)
        return False
    if isinstance(expr, cst.Name):
        imported = devices.imported_device(sem, expr)
        if imported is not None:  # `from config import device as dev2`: what config.py makes it
            return imported.may_be_cuda
        if not devices.is_device_expr(sem, expr):
            return False
        values = _bound_values(sem, expr)
        if values is None:
            return True  # a parameter or a binding we cannot follow, named like a device
        return any(_device_test(sem, v, _may_be_accelerator, seen) for v in values)
    if isinstance(expr, cst.Attribute):
        owner = dotted_name(expr.value) or ""
        return expr.attr.value in ("device", "dev") and owner.split(".")[0] in CONFIG_OWNERS
    return False


def _is_cpu(sem: "Semantic", expr: cst.BaseExpression, seen: Set[int]) -> bool:
    value = string_value(expr)
    if value is not None:
        return value == "cpu"
    if isinstance(expr, cst.Call) and sem.is_torch(expr, "torch.device"):
        first = keyword(expr, "type") or next(iter(positional(expr)), None)
        return _device_test(sem, first, _is_cpu, seen)
    if isinstance(expr, cst.Name):
        imported = devices.imported_device(sem, expr)
        if imported is not None:
            return imported.where == HOST
        values = _bound_values(sem, expr)
        return bool(values) and all(_device_test(sem, v, _is_cpu, seen) for v in values)
    return False


def _moves_to_accelerator(sem: "Semantic", move: cst.CSTNode) -> bool:
    """Whether the device move `move` (`.cuda()`, `.to(device)`) may put its receiver on an
    accelerator."""
    if not devices.is_device_move(sem, move):
        return False
    if move.func.attr.value in ACCELERATORS:
        return True
    return device_may_be_accelerator(sem, devices.device_argument(sem, move))


# -- where a model is ---------------------------------------------------------------------------

def _module_value(sem: "Semantic", model: cst.BaseExpression) -> Optional[Value]:
    value = sem.values.of(model)
    return value if value.kind == MODULE and value.module is not None else None


def _is_parallel_wrapper(value: Value) -> bool:
    qualified = value.module.qualified or ""
    return qualified.rsplit(".", 1)[-1] in PARALLEL_WRAPPERS


def model_device_move(sem: "Semantic", model: cst.BaseExpression) -> Optional[cst.Call]:
    """The device move that certainly put the module `model` on a device that may be an
    accelerator before this use of it runs (the value model's device facet: `Net().cuda()`,
    `model.to(device)` earlier in the same block, a parameter every caller passes moved,
    `self.model = Net().to(device)`). None when the model is unmoved, moved to the CPU or to a
    tensor's device, moved on some paths only, wrapped in `DataParallel` (which scatters its
    inputs itself), or not certainly a module."""
    value = _module_value(sem, model)
    if value is None or value.device is None or not value.device.may_be_cuda or _is_parallel_wrapper(value):
        return None
    move = value.device.node
    if not isinstance(move, cst.Call) or not _moves_to_accelerator(sem, move):
        return None
    return move


def device_origin(sem: "Semantic", move: cst.Call) -> Optional[str]:
    """Where another file of the project defines the device `move` moves to ("config.py:3"),
    when its argument is a name imported from there whose value that file gives; else None."""
    argument = devices.device_argument(sem, move)
    if type(argument) is not cst.Name or sem.project is None:
        return None
    qualified = sem.scopes.import_name(argument)
    fact = sem.project.fact(qualified) if qualified is not None else None
    return fact.origin if fact is not None and fact.kind == "value" else None


def has_parameters(sem: "Semantic", model: cst.BaseExpression) -> bool:
    """Whether `model` is a module that may hold parameters or buffers: not a stateless layer
    (`nn.ReLU()`), not a Dropout and not a loss (`nn.CrossEntropyLoss()`), whose calls work on
    any device."""
    value = sem.values.of(model)
    if value.kind == CRITERION:
        return False
    if value.kind == MODULE and value.module is not None:
        if value.module.stateless:
            return False
        qualified = value.module.qualified or ""
        if qualified.startswith("torch.nn.") and (qualified.endswith("Loss") or "Dropout" in qualified):
            return False
    return True


def model_output_move(sem: "Semantic", expr: cst.BaseExpression) -> Optional[Tuple[cst.Call, cst.Call]]:
    """When `expr` is the output of a module call whose module sits on an accelerator (`output`
    after `output = model(data)`, or `model(data)` itself, through same-device methods such as
    `.view()`), the (module call, model move)."""
    seen: Set[int] = set()
    while True:
        if isinstance(expr, cst.Name):
            if id(expr) in seen:
                return None
            seen.add(id(expr))
            expr = sem.assigned_value(expr)
            if expr is None:
                return None
            continue
        if method_call_in(expr, _SAME_DEVICE_METHODS):
            expr = expr.func.value
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        else:
            break
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, (cst.Name, cst.Attribute)):
        return None
    if not has_parameters(sem, expr.func):
        return None
    move = model_device_move(sem, expr.func)
    return (expr, move) if move is not None else None


def module_moves_its_inputs(sem: "Semantic", model: cst.BaseExpression) -> bool:
    """Whether the module `model` is an instance of a same-file class whose `forward` moves
    something (`x = x.to(self.device)`): such a model takes CPU batches."""
    value = _module_value(sem, model)
    if value is None or value.module.klass is None:
        return False
    forward = sem.values.method(value.module.klass, "forward")
    return forward is not None and _function_moves(sem, forward)


def is_loss_call(sem: "Semantic", call: cst.Call) -> bool:
    """A loss call (`F.cross_entropy(...)`, `criterion(...)`), also when the criterion was moved
    or switched first (`criterion = nn.CrossEntropyLoss().cuda()`)."""
    return training.is_loss_call(sem, call) or sem.values.of(call.func).kind == CRITERION


# -- where a batch comes from -------------------------------------------------------------------

def _iteration_source(sem: "Semantic", iterable: cst.BaseExpression) -> Tuple[cst.BaseExpression, bool]:
    """The iterable under `enumerate(...)` / `tqdm(...)`, and whether `enumerate` added an index."""
    indexed = False
    for _ in range(3):
        if not isinstance(iterable, cst.Call) or not iterable.args or iterable.args[0].keyword is not None:
            break
        name = dotted_name(iterable.func) or ""
        if name == "enumerate":
            indexed = True
        elif name.split(".")[-1] not in ("tqdm", "trange", "iter"):
            break
        iterable = iterable.args[0].value
    return iterable, indexed


def _function_moves(sem: "Semantic", function: cst.CSTNode) -> bool:
    """Whether anything under `function` (following same-file calls) moves a tensor."""
    return any(devices.is_device_move(sem, c) or keyword(c, "device") is not None
               for c in sem.calls_under(function))


def _collate_moves(sem: "Semantic", collate: cst.BaseExpression) -> bool:
    """Whether a DataLoader's `collate_fn` may move batches (True when it cannot be read)."""
    if isinstance(collate, cst.Name) and collate.value == "None":
        return False
    if isinstance(collate, cst.Lambda):
        return _function_moves(sem, collate)
    name = sem.qualified_name(collate) or ""
    if name.endswith("default_collate"):
        return False
    if isinstance(collate, cst.Name):
        functions = [f for f in sem.index.nodes(cst.FunctionDef) if f.name.value == collate.value]
        if len(functions) == 1:
            return _function_moves(sem, functions[0])
    return True


def _mentions_move(sem: "Semantic", expr: cst.CSTNode) -> bool:
    """Whether `expr`, or what the names in it are bound to, contains a device move or a
    `device=` argument (`TensorDataset(x.to(device), y)`, `MyData(device)`). True when there is
    too much to read."""
    pending = [expr]
    seen: Set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if len(seen) > _MOVE_SEARCH_LIMIT:
            return True
        for node in [current, *sem.index.descendants(current)]:
            if type(node) is cst.Call and (devices.is_device_move(sem, node) or keyword(node, "device") is not None):
                return True
            if type(node) is not cst.Name:
                if type(node) is cst.Call and type(node.func) is cst.Name:
                    for binding in sem.scopes.lookup(node.func.value, node) or ():
                        if binding.kind == "class" and _function_moves(sem, binding.node):
                            return True
                continue
            if devices.is_device_expr(sem, node):
                return True
            value = sem.assigned_value(node)
            if value is not None:
                pending.append(value)
                continue
            for binding in sem.scopes.lookup(node.value, node) or ():
                if binding.kind == "assign" and binding.value is not None:
                    pending.append(binding.value)
    return False


def _loader_yields_cpu_batches(sem: "Semantic", call: cst.Call) -> bool:
    """A `DataLoader(...)` whose batches are certainly CPU tensors: its `collate_fn` (if any)
    moves nothing, and its dataset is not built from moved tensors or by a same-file class
    that moves them."""
    given = positional(call)
    if len(given) > 6 or any(a.star for a in call.args):
        return False  # collate_fn passed positionally, or unknown arguments
    collate = keyword(call, "collate_fn")
    if collate is not None and _collate_moves(sem, collate):
        return False
    dataset = keyword(call, "dataset") or (given[0] if given else None)
    return dataset is not None and not _mentions_move(sem, dataset)


def _origin_of(sem: "Semantic", site) -> Optional[cst.CSTNode]:
    """For a loader's site (its construction, or an annotated `loader: DataLoader` parameter),
    the node that says its batches are CPU tensors, or None."""
    if isinstance(site, cst.Param):
        return site
    if isinstance(site, cst.Call) and sem.is_torch(site, *LOADERS):
        return site if cached(sem, ("cpu_batches", id(site)), lambda: _loader_yields_cpu_batches(sem, site)) else None
    return None


def loader_origin(sem: "Semantic", iterable: cst.BaseExpression) -> Optional[cst.CSTNode]:
    """When iterating `iterable` certainly yields a `torch.utils.data.DataLoader`'s CPU batches,
    the node that says so: the `DataLoader(...)` construction the value model traced it to (a
    name, `self.loader`, a parameter every caller passes one for) or the `loader: DataLoader`
    parameter."""
    value = sem.values.of(iterable)
    return _origin_of(sem, value.site) if value.kind == LOADER else None


class BatchElement:
    """A value that is certainly (part of) a batch as a DataLoader yielded it, unmoved."""

    def __init__(self, loop: cst.For, loader: cst.BaseExpression, site, names: Set[str]) -> None:
        self.loop = loop
        self.loader = loader  # the loop's iterable as written (`train_loader`)
        self.site = site  # the loader's construction or annotated parameter
        self.names = names  # the names it went through (`batch`, `inputs`)


def is_loader_loop(sem: "Semantic", loop: cst.CSTNode) -> bool:
    """Whether `loop` is a `for` over the certain CPU batches of a DataLoader (see
    `loader_origin`): the cheap question TL007 asks first."""
    def compute() -> bool:
        if not isinstance(loop, cst.For):
            return False
        source, _ = _iteration_source(sem, loop.iter)
        return loader_origin(sem, source) is not None
    return cached(sem, ("loader_loop", id(loop)), compute)


def _host_batch_site(sem: "Semantic", value: Value):
    """The loader site of a value that is a DataLoader batch (or part of it) still on the host."""
    if value.kind != BATCH and not (value.kind in TENSOR_KINDS and value.role == "batch"):
        return None
    device = value.device
    if device is None or device.where != HOST or device.node is None:
        return None
    return device.node


def unmoved_batch_element(sem: "Semantic", expr: cst.BaseExpression) -> Optional[BatchElement]:
    """When `expr` is certainly a DataLoader batch (or part of it) that nothing moved, in a loop
    over that loader around it: the loop target itself, unpacked (`x, y = batch`), indexed
    (`batch["input_ids"]`), wrapped in `Variable(...)`, or through same-device methods
    (`x.view(-1, 784)`). A move on some path (`if cuda: x = x.cuda()`), a helper's result, or a
    new tensor made from it (`torch.cat([x, x])`) ends the certainty."""
    site = _host_batch_site(sem, sem.values.of(expr))
    if site is None or _origin_of(sem, site) is None:
        return None
    for loop in sem.enclosing_loops(expr):
        if not isinstance(loop, cst.For):
            continue
        source, _ = _iteration_source(sem, loop.iter)
        loader = sem.values.of(source)
        if loader.kind == LOADER and loader.site is site:
            return BatchElement(loop, source, site, _names_through(sem, expr))
    return None


def _names_through(sem: "Semantic", expr: cst.BaseExpression) -> Set[str]:
    """The names a value went through on its way to `expr` (`batch`, `inputs` for `inputs`
    after `inputs, labels = batch`), following the assignments that may reach each."""
    names: Set[str] = set()
    pending = [expr]
    seen: Set[int] = set()
    while pending:
        current = pending.pop()
        while True:
            if isinstance(current, cst.Subscript):
                current = current.value
            elif method_call_in(current, _SAME_DEVICE_METHODS):
                current = current.func.value
            elif isinstance(current, cst.Call) and len(current.args) == 1 and \
                    sem.is_torch(current, "torch.autograd.Variable", "torch.autograd.variable.Variable"):
                current = current.args[0].value
            else:
                break
        if isinstance(current, (cst.Tuple, cst.List)):
            pending.extend(e.value for e in current.elements)
            continue
        if not isinstance(current, cst.Name) or id(current) in seen:
            continue
        seen.add(id(current))
        names.add(current.value)
        for definition in sem.values.flow.reaching(current) or ():
            if definition.kind == "assign" and definition.value is not None:
                pending.append(definition.value)
    return names


def batch_touched_before(sem: "Semantic", element: BatchElement, use: cst.CSTNode) -> bool:
    """Whether, in the loop body before `use`, one of the element's names is handed to something
    that might move it in place: a helper call (`to_device(batch)`), a bare `batch.to(device)`
    (a `BatchEncoding` moves itself), an item assignment (`batch[k] = batch[k].cuda()`)."""
    here = sem.index.order[use]
    for node in sem.index.descendants(element.loop.body, cst.Name):
        if node.value not in element.names or sem.index.order[node] >= here or sem.index.contains(use, node):
            continue
        if _may_move_in_place(sem, node):
            return True
    return False


def _may_move_in_place(sem: "Semantic", name: cst.Name) -> bool:
    node: cst.CSTNode = name
    parent = sem.parent(node)
    if isinstance(parent, cst.Attribute) and parent.attr is node:
        return False
    while isinstance(parent, (cst.Element, cst.Tuple, cst.List)):
        node, parent = parent, sem.parent(parent)
    if isinstance(parent, cst.Attribute) and parent.value is node:
        if parent.attr.value in _MOVE_ATTRIBUTES or parent.attr.value in _MUTATING_METHODS:
            return True
        return _is_store_target(sem, parent)
    if isinstance(parent, cst.Subscript) and parent.value is node:
        return _is_store_target(sem, parent)
    if isinstance(parent, cst.Arg):
        call = sem.parent(parent)
        return not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)
                    and call.func.value in _READING_FUNCTIONS)
    return isinstance(parent, (cst.Del, cst.Global, cst.Nonlocal))


def _is_store_target(sem: "Semantic", node: cst.CSTNode) -> bool:
    parent = sem.parent(node)
    return isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.Del)) or (
        isinstance(parent, cst.AnnAssign) and parent.target is node)


def batches_moved_by_framework(sem: "Semantic", node: cst.CSTNode) -> bool:
    """Whether a framework moves the batches here: Lightning `*_step` methods (and any file using
    Lightning, accelerate, Ignite or the Hugging Face `Trainer`), `accelerator.prepare(...)`."""
    def file_uses_framework() -> bool:
        for names in sem.scopes.bindings.values():
            for bindings in names.values():
                for binding in bindings:
                    qualified = binding.qualified_name or ""
                    if binding.kind == "import" and qualified.startswith(_BATCH_MOVING_FRAMEWORKS):
                        return True
        for call in sem.index.nodes(cst.Call):
            if method_call(call, "prepare", "setup_dataloaders", "setup"):
                owner = (dotted_name(call.func.value) or "").lower()
                if "accelerator" in owner or "fabric" in owner:
                    return True
        return False
    if cached(sem, "framework", file_uses_framework):
        return True
    method = sem.method_of(node)
    return method is not None and method.name.value.endswith("_step")


# -- dtypes (TL009) -----------------------------------------------------------------------------

def _is_half_dtype(sem: "Semantic", expr: Optional[cst.BaseExpression]) -> bool:
    name = sem.qualified_name(expr) if expr is not None else None
    return name is not None and name.startswith("torch.") and name.count(".") == 1 and \
        name.split(".")[1] in HALF_DTYPES


def _is_half_spelling(sem: "Semantic", call: cst.Call) -> bool:
    """`.half()`, `.bfloat16()`, or a call with a half dtype among its arguments."""
    if method_call(call, "half", "bfloat16") and not call.args:
        return True
    return any(_is_half_dtype(sem, a.value) or (sem.qualified_name(a.value) or "").endswith(
        ("HalfTensor", "BFloat16Tensor")) for a in call.args)


def may_hold_half(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    """A cheap filter before `half_conversion`: the file converts something to half precision."""
    return cached(sem, "converts_to_half",
                  lambda: any(_is_half_spelling(sem, call) for call in sem.index.nodes(cst.Call)))


def half_conversion(sem: "Semantic", expr: cst.BaseExpression) -> Optional[cst.CSTNode]:
    """`expr` itself when it is certainly a float16/bfloat16 tensor (the value model's dtype
    facet: `x.half()`, `x.to(torch.float16)`, `x.to(device, torch.half)`, a factory with
    `dtype=torch.float16`, a name bound to one, through moves and views)."""
    value = sem.values.of(expr)
    if value.kind in TENSOR_KINDS and value.dtype in HALF_DTYPES:
        return expr
    if value.kind in (UNKNOWN, INPUT) and _spelled_half_conversion(sem, expr):
        return expr  # `x.half()` of a value the model cannot name: a module is no model input
    return None


def _spelled_half_conversion(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    """`x.half()`, `x.to(torch.float16)`, `x.type(torch.HalfTensor)`, then moved or viewed."""
    while method_call(expr, "cuda", "cpu", "contiguous", "view", "reshape", "unsqueeze", "squeeze",
                      "permute", "transpose", "clone", "detach", "flatten") or \
            (method_call(expr, "to") and devices.is_device_move(sem, expr) and keyword(expr, "dtype") is None
             and len(positional(expr)) == 1):
        expr = expr.func.value
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
        return False
    method = expr.func.attr.value
    if method in ("half", "bfloat16"):
        return not expr.args
    if method == "to":
        return _is_half_dtype(sem, keyword(expr, "dtype")) or any(_is_half_dtype(sem, p) for p in positional(expr))
    if method == "type" and len(expr.args) == 1:
        return (sem.qualified_name(expr.args[0].value) or "").endswith(("HalfTensor", "BFloat16Tensor"))
    return False


def _converts_dtype(sem: "Semantic", call: cst.Call) -> bool:
    """A module method call that may change its parameters' dtype: `.half()`, `.bfloat16()`,
    `.double()`, `.type(...)`, `.to(dtype)`, `.to(device, dtype)`, `.to(x)` (unknown)."""
    method = call.func.attr.value
    if method in ("half", "bfloat16", "double", "type", "to_empty"):
        return True
    if method != "to":
        return False
    if keyword(call, "dtype") is not None or len(positional(call)) > 1:
        return True
    return not devices.is_device_move(sem, call)


def _converted_names(sem: "Semantic") -> Set[str]:
    """Every receiver spelling (`model`, `self.net`) that some call in the file may convert."""
    def compute() -> Set[str]:
        return {dotted_name(c.func.value) for c in sem.index.nodes(cst.Call)
                if method_call_in(c, MODULE_SELF_METHODS) and _converts_dtype(sem, c)} - {None}
    return cached(sem, "converted_names", compute)


def _sets_default_dtype(sem: "Semantic") -> bool:
    return cached(sem, "sets_default_dtype", lambda: any(
        sem.is_torch(c, "torch.set_default_dtype", "torch.set_default_tensor_type")
        for c in sem.index.nodes(cst.Call)))


def float32_module(sem: "Semantic", model: cst.BaseExpression) -> Optional[cst.Call]:
    """When the module `model` certainly has float32 parameters, its construction: the value
    model's dtype facet says float32 (built by torch.nn or torchvision without `dtype=`, or by a
    same-file class, and only moved since), the class's source never mentions dtypes or casts,
    and no call anywhere in the file converts that spelling (`model.half()` in another function,
    `model.to(torch.bfloat16)`). None otherwise."""
    spelled = dotted_name(model)
    if spelled is None or _sets_default_dtype(sem) or spelled in _converted_names(sem):
        return None
    value = _module_value(sem, model)
    if value is None or value.dtype != "float32" or _is_parallel_wrapper(value):
        return None
    construction = value.site
    if not isinstance(construction, cst.Call) or any(a.star for a in construction.args):
        return None
    if value.module.stateless or not has_parameters(sem, model):
        return None
    klass = value.module.klass
    if klass is not None and _CASTING_CLASS.search(code_for_node(sem.module, klass)):
        return None  # the class may cast its weights or its input
    return construction


__all__ = [
    "BatchElement", "batch_touched_before", "batches_moved_by_framework", "device_is_cpu",
    "device_may_be_accelerator", "float32_module", "half_conversion", "has_parameters",
    "is_loader_loop", "is_loss_call", "iter_call_arguments", "loader_origin", "may_hold_half",
    "model_device_move", "model_output_move", "module_moves_its_inputs", "unmoved_batch_element",
]
