"""Device and dtype state for the device family (TL007–TL009): where a model certainly is, where a
batch certainly comes from, whether a file chooses its device, and whether code runs under a
guard of that choice or under autocast.

Each question is one small function taking the `Semantic` object, so that it can later be
answered by the value model's device facet instead. Like every fact, each answers "no" (None,
False) whenever the code does not make the answer certain, so the rules built on it stay silent:
a model moved in one branch only, a batch that went through a helper, a device expression of
unknown value, a `with` block whose context manager is unknown.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator, List, Optional, Set, Tuple, Union

import libcst as cst

from torchlint.analysis import devices, training
from torchlint.analysis.dataflow import _mentions_binding
from torchlint.analysis.scopes import dotted_name
from torchlint.analysis.semantic import MODULE_SELF_METHODS, keyword, method_call

if TYPE_CHECKING:
    from torchlint.analysis.semantic import Semantic

# Device types other than the CPU that a model can be moved to for training.
ACCELERATORS = ("cuda", "mps", "xpu", "npu", "hpu")
DATALOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
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
_CUDA_METHOD_KEYWORDS = ("device", "non_blocking", "memory_format")
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_CUDA_STRING = re.compile(r"^cuda(:\d+)?$")
_LEGACY_CUDA_TYPE = re.compile(r"^torch\.cuda\.[A-Z]\w*Tensor$")
# Spelled in a condition, these make an `if` a guard of the device choice.
_GUARD_WORDS = re.compile(r"cuda|gpu|device|cpu|is_available|accel|mps|xpu|npu|distributed|"
                          r"local_rank|backend", re.IGNORECASE)
# Spelled in a condition, these make it a device choice (the branches pick the device).
_CHOICE_WORDS = re.compile(r"cuda|gpu|cpu|device|is_available|mps", re.IGNORECASE)
_DEVICE_FLAG = re.compile(r"^--?((no|use|disable|enable)[-_](cuda|gpu|cpu|accel)|cuda|cpu|device)$")
# Conditions that pick among GPUs (how many, which one), not between the CPU and a GPU.
_MULTI_GPU_WORDS = re.compile(r"device_count|n_?gpus?\b|num_gpus?|world_size|rank|gpu_ids|\bgpus\b",
                              re.IGNORECASE)
DEVICE_PARAMETERS = {"device", "dev"}
# Owners whose `.device` is the device the code chose, not where some tensor is.
_CONFIG_OWNERS = ("self", "args", "opt", "opts", "config", "cfg", "hparams", "params", "FLAGS", "conf")
# torch.cuda calls that fail on a machine without CUDA (measured on torch 2.13, CPU build).
_CUDA_ONLY_CALLS = ("torch.cuda.current_device", "torch.cuda.get_device_name",
                    "torch.cuda.set_device", "torch.cuda.synchronize", "torch.cuda.Event",
                    "torch.cuda.Stream", "torch.cuda.get_device_properties",
                    "torch.cuda.get_device_capability", "torch.cuda.current_stream",
                    "torch.cuda.device")
# Functions whose name says they deal with devices: their callers decide when they run.
_DEVICE_HELPER_NAME = re.compile(r"cuda|gpu|device|accel", re.IGNORECASE)
_EXITS = {"exit", "quit", "_exit", "skip", "skipTest", "SkipTest", "importorskip", "fail"}
HALF_DTYPES = {"float16", "half", "bfloat16"}
_AUTOCASTS = ("torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast",
              "torch.cpu.amp.autocast", "torch.amp.autocast_mode.autocast",
              "torch.cuda.amp.autocast_mode.autocast")
# Context managers that certainly leave dtypes alone.
_DTYPE_NEUTRAL_CONTEXTS = ("torch.no_grad", "torch.inference_mode", "torch.enable_grad",
                           "torch.set_grad_enabled", "torch.autograd.no_grad",
                           "torch.autograd.profiler.*", "torch.profiler.*")
_DTYPE_NEUTRAL_BUILTINS = {"open", "print", "tqdm"}

# "unmoved": the model is certainly where it was built (the CPU); a Call: the move that put it on
# a device that may be an accelerator; None: not certain.
UNMOVED = "unmoved"
ModelState = Union[cst.Call, str, None]


def _cached(sem: "Semantic", key, compute):
    cache = sem.__dict__.setdefault("_device_state", {})
    if key not in cache:
        cache[key] = compute()
    return cache[key]


def _string_value(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.SimpleString):
        try:
            value = expr.evaluated_value
        except Exception:  # noqa: BLE001 - odd literal
            return None
        return value if isinstance(value, str) else None
    return None


def _positional(call: cst.Call) -> List[cst.BaseExpression]:
    return [a.value for a in call.args if a.keyword is None and not a.star]


def _text(sem: "Semantic", node: cst.CSTNode) -> str:
    return sem.module.code_for_node(node)


# -- device values ------------------------------------------------------------------------------

def device_may_be_accelerator(sem: "Semantic", expr: Optional[cst.BaseExpression], depth: int = 4) -> bool:
    """Whether the device `expr` may be an accelerator: `"cuda"`, `"cuda:0"`, `f"cuda:{rank}"`,
    `torch.device("cuda" if ... else "cpu")`, a `device` parameter, a `device` name whose value
    is not certainly the CPU, `args.device`, `self.device`. Not `"cpu"`, `"meta"`, a tensor's
    `.device` (what is moved there follows that tensor) or anything unknown."""
    if expr is None or depth <= 0:
        return False
    value = _string_value(expr)
    if value is not None:
        return value.split(":")[0] in ACCELERATORS
    if isinstance(expr, cst.FormattedString):
        head = "".join(p.value for p in expr.parts if isinstance(p, cst.FormattedStringText))
        return head.startswith(ACCELERATORS)
    if isinstance(expr, cst.IfExp):
        return device_may_be_accelerator(sem, expr.body, depth - 1) or \
            device_may_be_accelerator(sem, expr.orelse, depth - 1)
    if isinstance(expr, cst.Call):
        if sem.is_torch(expr, "torch.cuda.current_device"):
            return True
        if sem.is_torch(expr, "torch.device"):
            first = keyword(expr, "type") or next(iter(_positional(expr)), None)
            return device_may_be_accelerator(sem, first, depth - 1)
        return False
    if isinstance(expr, cst.Name):
        if not devices.is_device_expr(sem, expr):
            return False
        reached = sem.reaching_value(expr)
        if reached is not None and reached is not expr:
            return device_may_be_accelerator(sem, reached, depth - 1)
        bindings = sem.scopes.lookup(expr.value, expr) or []
        values = [b.value for b in bindings if b.kind == "assign" and b.value is not None]
        if bindings and len(values) == len(bindings):
            return any(device_may_be_accelerator(sem, v, depth - 1) for v in values)
        return True  # a parameter or a binding we cannot follow, named like a device
    if isinstance(expr, cst.Attribute):
        owner = dotted_name(expr.value) or ""
        return expr.attr.value in ("device", "dev") and owner.split(".")[0] in _CONFIG_OWNERS
    return False


def device_is_cpu(sem: "Semantic", expr: Optional[cst.BaseExpression], depth: int = 4) -> bool:
    """Whether the device `expr` is certainly the CPU: `"cpu"`, `torch.device("cpu")`, a name
    bound only to those."""
    if expr is None or depth <= 0:
        return False
    value = _string_value(expr)
    if value is not None:
        return value == "cpu"
    if isinstance(expr, cst.Call) and sem.is_torch(expr, "torch.device"):
        first = keyword(expr, "type") or next(iter(_positional(expr)), None)
        return device_is_cpu(sem, first, depth - 1)
    if isinstance(expr, cst.Name):
        reached = sem.reaching_value(expr)
        if reached is not None and reached is not expr:
            return device_is_cpu(sem, reached, depth - 1)
        bindings = sem.scopes.lookup(expr.value, expr) or []
        return bool(bindings) and all(
            b.kind == "assign" and b.value is not None and device_is_cpu(sem, b.value, depth - 1)
            for b in bindings)
    return False


def _move_state(sem: "Semantic", move: cst.Call) -> ModelState:
    """What a device move leaves a module as: the move when its device may be an accelerator,
    UNMOVED for the CPU, None when the device is unknown."""
    if move.func.attr.value in ACCELERATORS:
        return move
    device = devices.device_argument(sem, move)
    if device_may_be_accelerator(sem, device):
        return move
    if move.func.attr.value == "cpu" or device_is_cpu(sem, device):
        return UNMOVED
    return None


# -- where a model is ---------------------------------------------------------------------------

def is_parallel_wrapper(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    """`nn.DataParallel(...)`, `DistributedDataParallel(...)`, FSDP: wrappers that move (scatter)
    their inputs to the wrapped model's devices themselves."""
    if not isinstance(expr, cst.Call):
        return False
    name = sem.qualified_name(expr.func) or dotted_name(expr.func) or ""
    return name.split(".")[-1] in PARALLEL_WRAPPERS


def _chain_state(sem: "Semantic", value: cst.BaseExpression, depth: int) -> ModelState:
    """Where the module `value` (`Net().to(device).train()`, `model.cuda()`, `Net()`) is."""
    expr = value
    outermost_move: Optional[cst.Call] = None
    while method_call(expr, *MODULE_SELF_METHODS):
        if devices.is_device_move(sem, expr):
            if outermost_move is None:
                outermost_move = expr
        elif expr.func.attr.value in ("to", "type", "to_empty"):
            return None  # `.to(x)` of unknown meaning
        expr = expr.func.value
    if isinstance(expr, cst.Name):
        base: ModelState = _name_state(sem, expr, depth - 1)
    elif is_parallel_wrapper(sem, expr):
        return None
    elif sem.is_module_construction(expr):
        base = UNMOVED
    else:
        return None
    if base is None:
        return None
    if outermost_move is not None:
        return _move_state(sem, outermost_move)
    return base


def dominates(sem: "Semantic", statement: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Whether `statement` certainly runs before `node` each time `node` runs: it stands earlier in
    a block that holds `node` (at any depth, in the same function)."""
    line = sem.parent(statement)
    holder = line if isinstance(statement, cst.BaseSmallStatement) and isinstance(
        line, cst.SimpleStatementLine) else statement
    block = sem.parent(holder)
    body = getattr(block, "body", None)
    if not isinstance(body, (list, tuple)):
        return False
    position = next((i for i, item in enumerate(body) if item is holder), None)
    if position is None or sem.function_of(statement) is not sem.function_of(node):
        return False
    child = node
    for ancestor in sem.ancestors(node):
        if ancestor is block:
            later = next((i for i, item in enumerate(body) if item is child), None)
            return later is not None and later > position
        child = ancestor
    return False


def _statement_moves(sem: "Semantic", name: str, scope: Optional[cst.CSTNode]) -> List[cst.Call]:
    """Bare statements that move `name` in `scope` (a function, or None for module code):
    `model.to(device)`, `model.cuda()`, `model.cuda().train()`."""
    def compute() -> List[cst.Call]:
        root = scope if scope is not None else sem.module
        found = []
        for call in sem.index.descendants(root, cst.Call):
            if sem.function_of(call) is not scope or not devices.is_device_move(sem, call):
                continue
            if dotted_name(call.func.value) != name:
                continue
            outer: cst.CSTNode = call
            while True:
                parent = sem.parent(outer)
                if isinstance(parent, cst.Attribute) and isinstance(sem.parent(parent), cst.Call) \
                        and sem.parent(parent).func is parent:
                    outer = sem.parent(parent)
                    continue
                break
            if sem.is_expression_statement(outer):
                found.append(call)
        return found
    return _cached(sem, ("statement_moves", name, scope), compute)


def _name_state(sem: "Semantic", name: cst.Name, depth: int) -> ModelState:
    """Where the module bound to `name` is at this use of it."""
    if depth <= 0:
        return None
    definition = sem.reaching_definition(name)
    if definition is None:
        return None
    if definition.kind == "assign" and definition.value is not None:
        state = _chain_state(sem, definition.value, depth)
    elif definition.kind == "param":
        state = _parameter_state(sem, name, depth)
    else:
        return None
    scope = sem.function_of(name)
    start = sem.index.order[definition.statement]
    here = sem.index.order[name]
    loops = sem.enclosing_loops(name)
    for move in _statement_moves(sem, name.value, scope):
        position = sem.index.order[move]
        if start < position < here:
            if not dominates(sem, sem.statement_of(move), name):
                return None  # moved on some paths only
            state = _move_state(sem, move)
        elif position > here and any(sem.index.contains(loop, move) for loop in loops):
            return None  # moved later in the loop: a second iteration sees it moved
    return state


def _parameter_state(sem: "Semantic", name: cst.Name, depth: int) -> ModelState:
    """For a parameter, the state every same-file call of its function passes (None when the
    function is never called here or the callers disagree)."""
    values = argument_values(sem, name)
    if not values:
        return None
    states = [_expression_state(sem, v, depth - 1) for v in values]
    if any(s is None for s in states):
        return None
    moves = [s for s in states if s is not UNMOVED]
    if moves and len(moves) != len(states):
        return None
    return moves[0] if moves else UNMOVED


def _expression_state(sem: "Semantic", expr: cst.BaseExpression, depth: int) -> ModelState:
    if isinstance(expr, cst.Name):
        return _name_state(sem, expr, depth)
    if isinstance(expr, cst.Call):
        return _chain_state(sem, expr, depth)
    return None


def argument_values(sem: "Semantic", parameter: cst.Name) -> List[cst.BaseExpression]:
    """The expressions that the same-file calls of the function defining `parameter` (a use of a
    parameter name) pass for it; empty when there is no call or one passes it in a way we cannot
    read (`*args`, `**kwargs`, a missing argument)."""
    function = sem.function_of(parameter)
    if function is None or sem.class_of_method(function) is not None:
        return []
    params = list(function.params.posonly_params) + list(function.params.params)
    position = next((i for i, p in enumerate(params) if p.name.value == parameter.value), None)
    kwonly = any(p.name.value == parameter.value for p in function.params.kwonly_params)
    if position is None and not kwonly:
        return []
    values: List[cst.BaseExpression] = []
    calls = [c for c in sem.index.nodes(cst.Call)
             if isinstance(c.func, cst.Name) and c.func.value == function.name.value]
    for call in calls:
        if function not in sem.resolve_local_function(call, call):
            continue
        if any(a.star for a in call.args):
            return []
        value = keyword(call, parameter.value)
        if value is None and position is not None:
            positional = _positional(call)
            value = positional[position] if position < len(positional) else None
        if value is None:
            return []
        values.append(value)
    return values


def _self_attribute_state(sem: "Semantic", attribute: cst.Attribute) -> ModelState:
    """`self.model` assigned only modules that are moved (`self.model = Net().to(device)`)."""
    values = sem.self_attribute_assignments(attribute)
    if not values:
        return None
    states = [_chain_state(sem, v, 3) for v in values]
    if any(s is None or s is UNMOVED for s in states):
        return None
    return states[0]


def model_device_move(sem: "Semantic", model: cst.BaseExpression) -> Optional[cst.Call]:
    """The device move that certainly put the module `model` (a name, or `self.attr`) on a
    device that may be an accelerator before this use of it runs: `model = Net().cuda()`,
    `model = Net(); model.to(device)`, a parameter every caller passes moved. None when the
    model is unmoved, moved to the CPU, moved on some paths only, wrapped in `DataParallel`
    (which scatters its inputs itself), or not certainly a module."""
    if isinstance(model, cst.Name):
        state = _name_state(sem, model, 4)
    elif isinstance(model, cst.Attribute) and isinstance(model.value, cst.Name) and \
            model.value.value == "self":
        state = _self_attribute_state(sem, model)
    else:
        return None
    return state if isinstance(state, cst.Call) else None


def model_output_move(sem: "Semantic", expr: cst.BaseExpression, depth: int = 3) -> Optional[Tuple[cst.Call, cst.Call]]:
    """When `expr` is the output of a module call whose module sits on an accelerator (`output`
    after `output = model(data)`, or `model(data)` itself, through same-device methods such as
    `.view()`), the (module call, model move)."""
    if depth <= 0:
        return None
    if isinstance(expr, cst.Name):
        value = sem.reaching_value(expr, depth=1)
        return model_output_move(sem, value, depth - 1) if value is not None and value is not expr else None
    while method_call(expr, *_SAME_DEVICE_METHODS) or isinstance(expr, cst.Subscript):
        expr = expr.func.value if isinstance(expr, cst.Call) else expr.value
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, (cst.Name, cst.Attribute)):
        return None
    if not has_parameters(sem, expr.func):
        return None
    move = model_device_move(sem, expr.func)
    return (expr, move) if move is not None else None


def module_moves_its_inputs(sem: "Semantic", model: cst.BaseExpression) -> bool:
    """Whether the module `model` is built from a same-file class whose `forward` moves
    something (`x = x.to(self.device)`): such a model takes CPU batches."""
    value: Optional[cst.BaseExpression] = model
    if isinstance(model, cst.Name):
        value = sem.reaching_value(model)
    elif isinstance(model, cst.Attribute):
        values = sem.self_attribute_assignments(model)
        value = values[0] if len(values) == 1 else None
    while method_call(value, *MODULE_SELF_METHODS):
        value = value.func.value
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name):
        return False
    for binding in sem.scopes.lookup(value.func.value, value) or ():
        if binding.kind == "class":
            for method in sem.index.descendants(binding.node, cst.FunctionDef):
                if method.name.value == "forward" and _function_moves(sem, method):
                    return True
    return False


def is_loss_call(sem: "Semantic", call: cst.Call) -> bool:
    """A loss call (`F.cross_entropy(...)`, `criterion(...)`), also when the criterion was moved
    or switched first (`criterion = nn.CrossEntropyLoss().cuda()`)."""
    if training.is_loss_call(sem, call):
        return True
    if not isinstance(call.func, cst.Name):
        return False
    value = sem.reaching_value(call.func)
    while method_call(value, *MODULE_SELF_METHODS):
        value = value.func.value
    return isinstance(value, cst.Call) and training.is_loss_class(sem, value.func)


def has_parameters(sem: "Semantic", model: cst.BaseExpression) -> bool:
    """Whether `model` is a module that may hold parameters or buffers: not a stateless layer
    (`nn.ReLU()`) and not a loss (`nn.CrossEntropyLoss()`), whose calls work on any device."""
    value = model
    if isinstance(model, cst.Name):
        reached = sem.reaching_value(model)
        value = reached if reached is not None else model
    while method_call(value, *MODULE_SELF_METHODS):
        value = value.func.value
    if isinstance(value, cst.Call):
        if devices.is_stateless_module_construction(sem, value):
            return False
        name = sem.qualified_name(value.func) or ""
        if name.startswith("torch.nn.") and (name.endswith("Loss") or "Dropout" in name):
            return False
    return True


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


def _mentions_move(sem: "Semantic", expr: cst.CSTNode, depth: int = 3) -> bool:
    """Whether `expr`, or what the names in it are bound to, contains a device move or a
    `device=` argument (`TensorDataset(x.to(device), y)`, `MyData(device)`)."""
    if depth <= 0:
        return True
    nodes = [expr] + list(sem.index.descendants(expr))
    for node in nodes:
        if isinstance(node, cst.Call) and (devices.is_device_move(sem, node) or keyword(node, "device") is not None):
            return True
        if isinstance(node, cst.Name) and devices.is_device_expr(sem, node):
            return True
        if isinstance(node, cst.Name):
            value = sem.reaching_value(node, depth=1)
            if value is not None and value is not node and _mentions_move(sem, value, depth - 1):
                return True
            if value is None:
                for binding in sem.scopes.lookup(node.value, node) or ():
                    if binding.kind == "assign" and binding.value is not None and \
                            _mentions_move(sem, binding.value, depth - 1):
                        return True
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            for binding in sem.scopes.lookup(node.func.value, node) or ():
                if binding.kind == "class" and _function_moves(sem, binding.node):
                    return True
    return False


def _loader_yields_cpu_batches(sem: "Semantic", call: cst.Call) -> bool:
    """A `DataLoader(...)` whose batches are certainly CPU tensors: its `collate_fn` (if any)
    moves nothing, and its dataset is not built from moved tensors or by a same-file class
    that moves them."""
    positional = _positional(call)
    if len(positional) > 6 or any(a.star for a in call.args):
        return False  # collate_fn passed positionally, or unknown arguments
    collate = keyword(call, "collate_fn")
    if collate is not None and _collate_moves(sem, collate):
        return False
    dataset = keyword(call, "dataset") or (positional[0] if positional else None)
    return dataset is not None and not _mentions_move(sem, dataset)


def loader_origin(sem: "Semantic", iterable: cst.BaseExpression, depth: int = 3) -> Optional[cst.CSTNode]:
    """When iterating `iterable` certainly yields a `torch.utils.data.DataLoader`'s CPU batches,
    the node that says so (the `DataLoader(...)` call or the `loader: DataLoader` parameter):
    a construction, a name or `self.attr` bound only to one, a parameter annotated `DataLoader`,
    or a parameter every same-file caller passes one for."""
    if depth <= 0:
        return None
    if isinstance(iterable, cst.Call):
        if sem.is_torch(iterable, *DATALOADERS):
            return iterable if _loader_yields_cpu_batches(sem, iterable) else None
        return None
    if isinstance(iterable, cst.Name):
        definition = sem.reaching_definition(iterable)
        if definition is not None and definition.kind == "assign" and definition.value is not None:
            return loader_origin(sem, definition.value, depth - 1)
        if definition is not None and definition.kind == "param":
            param = definition.target
            annotation = param.annotation.annotation if param.annotation is not None else None
            if annotation is not None and sem.is_torch(annotation, *DATALOADERS):
                return param
            values = argument_values(sem, iterable)
            origins = [loader_origin(sem, v, depth - 1) for v in values]
            return origins[0] if origins and all(o is not None for o in origins) else None
        if definition is not None:
            return None
        bindings = sem.scopes.lookup(iterable.value, iterable) or []
        if not bindings or sem.scopes.scope_of(bindings[0].node) is not sem.module:
            return None
        values = [b.value for b in bindings if b.kind == "assign" and b.value is not None]
        if len(values) != len(bindings):
            return None
        origins = [loader_origin(sem, v, depth - 1) for v in values]
        return origins[0] if all(o is not None for o in origins) else None
    if isinstance(iterable, cst.Attribute) and isinstance(iterable.value, cst.Name) and \
            iterable.value.value == "self":
        values = sem.self_attribute_assignments(iterable)
        origins = [loader_origin(sem, v, depth - 1) for v in values]
        return origins[0] if origins and all(o is not None for o in origins) else None
    return None


class BatchElement:
    """A value that is certainly (part of) a batch as a DataLoader yielded it, unmoved."""

    def __init__(self, loop: cst.For, loader: cst.BaseExpression, names: Set[str]) -> None:
        self.loop = loop
        self.loader = loader  # the loop's iterable as written (`train_loader`)
        self.names = names  # the names it went through (`batch`, `inputs`)


def _batch_names(sem: "Semantic", loop: cst.For) -> Set[str]:
    """Names the loop target binds to batch content (not the index `enumerate` adds)."""
    _, indexed = _iteration_source(sem, loop.iter)
    target = loop.target
    if indexed:
        if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != 2:
            return set()
        target = target.elements[1].value
    names: Set[str] = set()
    stack = [target]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            names.add(current.value)
        elif isinstance(current, (cst.Tuple, cst.List)):
            stack.extend(e.value for e in current.elements)
    return names


def is_loader_loop(sem: "Semantic", loop: cst.CSTNode) -> bool:
    """Whether `loop` is a `for` over the certain CPU batches of a DataLoader (see
    `loader_origin`) that binds batch content: the cheap question TL007 asks first."""
    def compute() -> bool:
        if not isinstance(loop, cst.For) or not _batch_names(sem, loop):
            return False
        source, _ = _iteration_source(sem, loop.iter)
        return loader_origin(sem, source) is not None
    return _cached(sem, ("loader_loop", loop), compute)


def unmoved_batch_element(sem: "Semantic", expr: cst.BaseExpression, depth: int = 6) -> Optional[BatchElement]:
    """When `expr` is certainly a DataLoader batch (or part of it) that nothing moved: the loop
    target itself, unpacked (`x, y = batch`), indexed (`batch["input_ids"]`), wrapped in
    `Variable(...)`, or through same-device methods (`x.view(-1, 784)`). A name rebound on the
    way (`data = data.to(device)`, `x = helper(x)`, in a branch) ends the certainty."""
    if depth <= 0:
        return None
    if isinstance(expr, cst.Subscript):
        return unmoved_batch_element(sem, expr.value, depth - 1)
    if isinstance(expr, cst.Call):
        if method_call(expr, *_SAME_DEVICE_METHODS):
            return unmoved_batch_element(sem, expr.func.value, depth - 1)
        if sem.is_torch(expr, "torch.autograd.Variable", "torch.autograd.variable.Variable") and \
                len(expr.args) == 1 and expr.args[0].keyword is None:
            return unmoved_batch_element(sem, expr.args[0].value, depth - 1)
        return None
    if not isinstance(expr, cst.Name):
        return None
    definition = sem.reaching_definition(expr)
    loop = _loop_target_reaching(sem, expr) if definition is None else None
    if definition is None and loop is None:
        return None
    found: Optional[BatchElement] = None
    if definition is not None and definition.kind == "for" and isinstance(definition.statement, cst.For):
        loop = definition.statement
    if loop is not None:
        if expr.value in _batch_names(sem, loop):
            source, _ = _iteration_source(sem, loop.iter)
            if loader_origin(sem, source) is not None:
                found = BatchElement(loop, source, set())
    elif definition.kind == "assign" and definition.value is not None:
        found = unmoved_batch_element(sem, definition.value, depth - 1)
    elif definition.kind == "other" and isinstance(definition.statement, cst.Assign):
        found = _unpacked_element(sem, definition.statement, expr.value, depth)
    if found is not None:
        found.names.add(expr.value)
    return found


def _loop_target_reaching(sem: "Semantic", name: cst.Name) -> Optional[cst.For]:
    """The `for` loop whose target binding of `name` certainly reaches this use, where the
    general dataflow gives up because the loop body rebinds the name later
    (`for images, labels in loader: images = images.view(-1, 784)`): the loop target is bound
    afresh at the top of every iteration, so only rebindings before the use count."""
    child: cst.CSTNode = name
    for ancestor in sem.ancestors(name):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda) + _COMPREHENSIONS):
            return None
        body = getattr(ancestor, "body", None)
        if isinstance(body, (list, tuple)) and not isinstance(ancestor, cst.Module):
            for statement in body:
                if statement is child:
                    break
                if _mentions_binding(statement, name.value, sem.index):
                    return None
        if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
            if isinstance(ancestor, cst.For) and name.value in _target_names(ancestor.target):
                return ancestor
            if _mentions_binding(ancestor.body, name.value, sem.index):
                return None  # an inner loop rebinding it reaches by its back edge
        if isinstance(ancestor, cst.Module):
            return None
        child = ancestor
    return None


def _target_names(target: cst.BaseExpression) -> Set[str]:
    names: Set[str] = set()
    stack = [target]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            names.add(current.value)
        elif isinstance(current, (cst.Tuple, cst.List)):
            stack.extend(e.value for e in current.elements)
        elif isinstance(current, cst.StarredElement):
            stack.append(current.value)
    return names


def _unpacked_element(sem: "Semantic", assign: cst.Assign, name: str, depth: int) -> Optional[BatchElement]:
    """`x, y = batch` (every name is part of the batch) or `x, y = batch[0], batch[1]`."""
    if len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    names = [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
    if name not in names:
        return None
    value = assign.value
    if isinstance(value, (cst.Tuple, cst.List)):
        if len(value.elements) != len(names) or any(isinstance(e, cst.StarredElement) for e in value.elements):
            return None
        return unmoved_batch_element(sem, value.elements[names.index(name)].value, depth - 1)
    if isinstance(value, (cst.Name, cst.Subscript)):
        return unmoved_batch_element(sem, value, depth - 1)
    return None


def batch_touched_before(sem: "Semantic", element: BatchElement, use: cst.CSTNode) -> bool:
    """Whether, in the loop body before `use`, one of the element's names is handed to something
    that might move it in place: a helper call (`to_device(batch)`), a bare `batch.to(device)`
    (a `BatchEncoding` moves itself), an item assignment (`batch[k] = batch[k].cuda()`)."""
    here = sem.index.order[use]
    for node in sem.index.descendants(element.loop.body, cst.Name):
        if node.value not in element.names or sem.index.order[node] >= here:
            continue
        if sem.index.contains(use, node):
            continue
        if _may_move_in_place(sem, node):
            return True
    return False


def _may_move_in_place(sem: "Semantic", name: cst.Name) -> bool:
    node: cst.CSTNode = name
    parent = sem.parent(node)
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
    if _cached(sem, "framework", file_uses_framework):
        return True
    method = sem.method_of(node)
    return method is not None and method.name.value.endswith("_step")


# -- device choices and their guards (TL008) -----------------------------------------------------

class HardCodedCuda:
    """A hard-coded CUDA placement: `node` is what is reported, `replace` what a fix replaces
    with the device name (None: no fix), `indexed` whether it names a GPU index."""

    def __init__(self, node: cst.CSTNode, replace: Optional[cst.CSTNode], indexed: bool, kind: str) -> None:
        self.node = node
        self.replace = replace
        self.indexed = indexed
        self.kind = kind  # "method" (.cuda()), "keyword" (device="cuda"), "to" (.to("cuda")), "type"


def _cuda_device_literal(sem: "Semantic", expr: Optional[cst.BaseExpression]) -> Optional[bool]:
    """For `"cuda"`, `"cuda:0"`, `torch.device("cuda")`, `torch.device("cuda", 0)`: whether it
    names a GPU index. None when `expr` is not such a literal."""
    if expr is None:
        return None
    value = _string_value(expr)
    if value is not None:
        return (":" in value) if _CUDA_STRING.match(value) else None
    if isinstance(expr, cst.Call) and sem.is_torch(expr, "torch.device"):
        positional = _positional(expr)
        if not positional or keyword(expr, "type") is not None:
            return None
        inner = _cuda_device_literal(sem, positional[0])
        if inner is None:
            return None
        return inner or len(positional) > 1 or keyword(expr, "index") is not None
    return None


def hard_coded_cuda(sem: "Semantic", node: cst.CSTNode) -> Optional[HardCodedCuda]:
    """`x.cuda()`, `x.cuda(0)`, `torch.zeros(3, device="cuda")`, `x.to("cuda:0")`,
    `x.to(torch.device("cuda"))`, `torch.cuda.FloatTensor` (the legacy CUDA tensor types)."""
    if type(node) is cst.Attribute:
        if not (node.attr.value.endswith("Tensor") and type(node.value) is cst.Attribute
                and node.value.attr.value == "cuda"):
            return None  # spelled `<...>.cuda.<X>Tensor` before resolving the name
        name = sem.qualified_name(node)
        if name is not None and _LEGACY_CUDA_TYPE.match(name) and _places_with_type(sem, node):
            return HardCodedCuda(node, None, False, "type")
        return None
    if not isinstance(node, cst.Call):
        return None
    if method_call(node, "cuda") and sem.qualified_name(node.func) is None:
        if any(a.star for a in node.args) or len(_positional(node)) > 1 or any(
                a.keyword is not None and a.keyword.value not in _CUDA_METHOD_KEYWORDS for a in node.args):
            return None  # not torch's `.cuda(device=None, non_blocking=False, memory_format=...)`
        return HardCodedCuda(node, node, bool(_positional(node)) or keyword(node, "device") is not None, "method")
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "device" and _places(sem, node):
            indexed = _cuda_device_literal(sem, arg.value)
            if indexed is not None:
                return HardCodedCuda(node, arg.value, indexed, "keyword")
    if method_call(node, "to") and node.args and node.args[0].keyword is None:
        indexed = _cuda_device_literal(sem, node.args[0].value)
        if indexed is not None:
            return HardCodedCuda(node, node.args[0].value, indexed, "to")
    return None


def _places(sem: "Semantic", call: cst.Call) -> bool:
    """A call whose `device=` places what it makes: a torch function (`torch.zeros`,
    `torch.Generator`), a module construction (torch.nn, or a same-file module class), `.to()`,
    `x.new_zeros(...)`. Not an arbitrary function that takes a device argument
    (`check_device(a, b, device="cuda")`)."""
    name = sem.qualified_name(call.func) or ""
    if name.startswith("torch.") or sem.is_module_construction(call):
        return True
    return method_call(call, "to") or (method_call(call) and call.func.attr.value.startswith("new_"))


def _places_with_type(sem: "Semantic", node: cst.Attribute) -> bool:
    """A legacy tensor type used to make or convert a tensor — `torch.cuda.FloatTensor(3)`,
    `x.type(torch.cuda.FloatTensor)`, `Tensor = torch.cuda.FloatTensor` — not a type check
    (`isinstance(x, torch.cuda.FloatTensor)` works on any machine)."""
    parent = sem.parent(node)
    if isinstance(parent, cst.Call) and parent.func is node:
        return True
    if isinstance(parent, cst.Arg):
        call = sem.parent(parent)
        return method_call(call, "type", "new") or (isinstance(call, cst.Call) and sem.is_torch(
            call, "torch.set_default_tensor_type"))
    return isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node


def _is_device_value(sem: "Semantic", expr: Optional[cst.BaseExpression]) -> bool:
    """A device written out: `"cuda"`, `"cpu"`, `torch.device(...)`, a legacy tensor type
    (`torch.cuda.FloatTensor`), `.cuda()`."""
    if expr is None:
        return False
    value = _string_value(expr)
    if value is not None:
        return value.split(":")[0] in ACCELERATORS + ("cpu",)
    if isinstance(expr, cst.Call):
        return sem.is_torch(expr, "torch.device") or devices.is_device_move(sem, expr)
    if isinstance(expr, cst.Attribute):
        name = sem.qualified_name(expr) or ""
        return bool(_LEGACY_CUDA_TYPE.match(name)) or bool(re.match(r"^torch\.[A-Z]\w*Tensor$", name))
    return False


def _calls_is_available(sem: "Semantic", node: cst.CSTNode) -> bool:
    return any(sem.is_torch(c, "torch.cuda.is_available", "torch.backends.mps.is_available")
               for c in [node, *sem.index.descendants(node, cst.Call)] if isinstance(c, cst.Call))


def _is_choice_condition(sem: "Semantic", test: cst.CSTNode) -> bool:
    """A condition that picks between the CPU and an accelerator: `torch.cuda.is_available()`,
    `args.cuda`, `use_gpu`, `device == "cpu"`. Not one that counts or picks GPUs
    (`torch.cuda.device_count() > 1`, `args.ngpu > 1`), nor one that follows where a tensor
    already is (`x.is_cuda`, `x.device.type == "cuda"`, `on_cuda = next(m.parameters()).is_cuda`)."""
    text = _text(sem, test)
    if "is_available" in text:
        return True
    if _MULTI_GPU_WORDS.search(text):
        return False
    return any(_CHOICE_WORDS.search(dotted) and not _follows_a_tensor(sem, node)
               and _names_a_setting(sem, node)
               for node, dotted in _references(sem, test))


def _names_a_setting(sem: "Semantic", node: cst.CSTNode) -> bool:
    """Whether a name in a condition can hold the run's device setting: an attribute of a
    config (`args.cuda`, `self.use_gpu`), a parameter, a module-level name, or a name computed
    from `torch.cuda.is_available()` or a config. Not a local flag the code computes as it goes
    (`has_cuda_inputs = False` ... `has_cuda_inputs = True` in torch's compiled autograd)."""
    if not isinstance(node, cst.Name):
        return True
    bindings = sem.scopes.lookup(node.value, node) or []
    if not bindings:
        return True  # a global of another module, a builtin: cannot tell
    for binding in bindings:
        if binding.kind in ("param", "import") or sem.scopes.scope_of(binding.node) is sem.module:
            return True
        value = binding.value
        if value is not None and (_calls_is_available(sem, value) or any(
                isinstance(ref, cst.Attribute) and (dotted_name(ref) or "").split(".")[0] in _CONFIG_OWNERS
                for ref, _ in _references(sem, value))):
            return True
    return False


def _references(sem: "Semantic", expr: cst.CSTNode) -> Iterator[Tuple[cst.CSTNode, str]]:
    """The names and whole attribute chains read in `expr` (`args.cuda`, `x.device.type`), with
    their dotted spelling; call chains are split at the call (`next(m.parameters()).is_cuda`
    gives `….is_cuda` and `m.parameters`)."""
    for node in [expr, *sem.index.descendants(expr)]:
        if not isinstance(node, (cst.Name, cst.Attribute)):
            continue
        parent = sem.parent(node)
        if isinstance(parent, cst.Attribute) and (parent.value is node or parent.attr is node):
            continue  # part of a longer chain
        if isinstance(node, cst.Attribute):
            yield node, dotted_name(node) or "…." + node.attr.value
        else:
            yield node, node.value


def _follows_a_tensor(sem: "Semantic", node: cst.CSTNode, depth: int = 2) -> bool:
    """`x.is_cuda`, `x.device`, `x.device.type` for a tensor-like `x` (not `args`/`self`/a
    config), or a name bound only to such a value."""
    if isinstance(node, cst.Attribute):
        chain = dotted_name(node) or "…." + node.attr.value
        parts = chain.split(".")
        if parts[-1] == "is_cuda" or parts[-1] == "get_device":
            return True
        # `x.device`, `self.keys.device` follow a tensor; `args.device`, `self.device` are chosen
        return any(part == "device" and parts[i - 1] not in _CONFIG_OWNERS
                   for i, part in enumerate(parts) if i > 0)
    if isinstance(node, cst.Name) and depth > 0:
        bindings = sem.scopes.lookup(node.value, node) or []
        values = [b.value for b in bindings if b.kind == "assign" and b.value is not None]
        return bool(bindings) and len(values) == len(bindings) and all(
            any(_follows_a_tensor(sem, ref, depth - 1) for ref, _ in _references(sem, v)) for v in values)
    return False


def _sets_cuda_default_type(sem: "Semantic", call: cst.Call) -> bool:
    """`torch.set_default_tensor_type("torch.cuda.FloatTensor")` (or the type itself)."""
    if not sem.is_torch(call, "torch.set_default_tensor_type") or not call.args:
        return False
    value = call.args[0].value
    text = _string_value(value) or sem.qualified_name(value) or ""
    return text.startswith("torch.cuda.")


def _requires_cuda_anyway(sem: "Semantic") -> bool:
    """Whether the file already calls, outside any guard, something that fails without CUDA
    (`torch.cuda.current_device()`, `torch.cuda.get_device_name()`, `torch.cuda.set_device()`,
    `torch.cuda.synchronize()`, `torch.cuda.Event(...)`, `with torch.cuda.device(1):`,
    `torch.set_default_tensor_type("torch.cuda.FloatTensor")`): it is a GPU-only file in fact."""
    def compute() -> bool:
        return any((sem.is_torch(call, *_CUDA_ONLY_CALLS) or _sets_cuda_default_type(sem, call))
                   and not guarded_by_device_condition(sem, call)
                   for call in sem.index.nodes(cst.Call))
    return _cached(sem, "requires_cuda", compute)


def file_device_choice(sem: "Semantic") -> Optional[cst.CSTNode]:
    """The first place this file chooses its device at run time, or None: a conditional device
    (`torch.device("cuda" if torch.cuda.is_available() else "cpu")`), an `if` on the condition
    that moves something (`if args.cuda: model.cuda()`), a flag computed from
    `torch.cuda.is_available()` (`use_cuda = ...`), or a `--cuda`/`--no-cuda`/`--device`
    command-line option."""
    def compute() -> Optional[cst.CSTNode]:
        found: List[cst.CSTNode] = []
        for node in sem.index.nodes(cst.IfExp):
            if _is_choice_condition(sem, node.test) and (
                    _is_device_value(sem, node.body) or _is_device_value(sem, node.orelse)):
                found.append(node)
        for node in sem.index.nodes(cst.If):
            if not _is_choice_condition(sem, node.test):
                continue
            for call in sem.index.descendants(node, cst.Call):
                if devices.is_device_move(sem, call) or keyword(call, "device") is not None:
                    found.append(node)
                    break
        for kind in (cst.Assign, cst.AnnAssign):
            for node in sem.index.nodes(kind):
                if node.value is not None and _calls_is_available(sem, node.value):
                    found.append(node)
        for call in sem.index.nodes(cst.Call):
            if method_call(call, "add_argument") and call.args:
                flags = [_string_value(a.value) for a in call.args if a.keyword is None]
                if any(f is not None and _DEVICE_FLAG.match(f) for f in flags):
                    found.append(call)
        return min(found, key=sem.index.order.__getitem__) if found else None
    if _requires_cuda_anyway(sem):
        return None
    return _cached(sem, "file_choice", compute)


def device_parameter(sem: "Semantic", node: cst.CSTNode) -> Optional[cst.Param]:
    """A `device` (or `dev`) parameter of a function enclosing `node`: the caller chooses."""
    function = sem.function_of(node)
    while function is not None:
        params = function.params
        for param in list(params.posonly_params) + list(params.params) + list(params.kwonly_params):
            if param.name.value in DEVICE_PARAMETERS:
                return param
        function = sem.function_of(function)
    return None


def _guard_words(sem: "Semantic") -> re.Pattern:
    """The words that make a condition a device guard: the usual ones, plus every flag this file
    computes from `torch.cuda.is_available()` (`have_gpu = torch.cuda.is_available()`)."""
    def compute() -> re.Pattern:
        flags = set()
        for node in sem.index.nodes(cst.Assign):
            if _calls_is_available(sem, node.value):
                for target in node.targets:
                    name = dotted_name(target.target)
                    if name is not None:
                        flags.add(re.escape(name.split(".")[-1]))
        if not flags:
            return _GUARD_WORDS
        return re.compile(_GUARD_WORDS.pattern + "|" + "|".join(sorted(flags)), re.IGNORECASE)
    return _cached(sem, "guard_words", compute)


def _is_guard_condition(sem: "Semantic", test: cst.CSTNode) -> bool:
    return bool(_guard_words(sem).search(_text(sem, test)))


def _exits(block: cst.BaseSuite) -> bool:
    """Whether a block ends by leaving: return, raise, continue, break, `sys.exit()`, a skip."""
    body = block.body if isinstance(block.body, (list, tuple)) else ()
    if not body:
        return False
    last = body[-1]
    if isinstance(last, cst.SimpleStatementLine):
        small = last.body[-1]
        if isinstance(small, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
            return True
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            name = dotted_name(small.value.func) or ""
            return name.split(".")[-1] in _EXITS
    if isinstance(block, cst.SimpleStatementSuite):
        small = block.body[-1]
        return isinstance(small, (cst.Return, cst.Raise, cst.Continue, cst.Break))
    return False


def _guarded_by_earlier_exit(sem: "Semantic", block_child: cst.CSTNode, block: cst.CSTNode) -> bool:
    """An earlier statement of `block` leaves unless the device condition holds:
    `assert torch.cuda.is_available()`, `if not args.cuda: return`."""
    body = getattr(block, "body", None)
    if not isinstance(body, (list, tuple)):
        return False
    for statement in body:
        if statement is block_child:
            return False
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assert) and _is_guard_condition(sem, small.test):
                    return True
                if isinstance(small, cst.Assign) and "skip" in _text(sem, small.value) and \
                        _is_guard_condition(sem, small.value):
                    return True  # pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), ...)
        elif isinstance(statement, cst.If) and _is_guard_condition(sem, statement.test) and \
                _exits(statement.body):
            return True
    return False


def guarded_by_device_condition(sem: "Semantic", node: cst.CSTNode, depth: int = 2) -> bool:
    """Whether `node` runs only under a device condition: inside `if torch.cuda.is_available():`
    / `if args.cuda:` (either branch), `x.cuda() if use_cuda else x`, `use_cuda and x.cuda()`,
    `with torch.cuda.device(i):`, a `try` with handlers, after `assert torch.cuda.is_available()`
    or `if not use_gpu: return`, in a function decorated with a CUDA skip, or in a function that
    some same-file caller calls under such a condition."""
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)):
            if child is not ancestor.test and _is_guard_condition(sem, ancestor.test):
                return True
        elif isinstance(ancestor, cst.BooleanOperation):
            if child is ancestor.right and _is_guard_condition(sem, ancestor.left):
                return True
        elif isinstance(ancestor, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            comp: Optional[cst.CompFor] = ancestor.for_in
            while comp is not None:
                if any(_is_guard_condition(sem, clause.test) for clause in comp.ifs):
                    return True
                comp = comp.inner_for_in
        elif isinstance(ancestor, cst.With):
            if child is ancestor.body and any(_is_guard_condition(sem, i.item) for i in ancestor.items):
                return True
        elif isinstance(ancestor, cst.Try):
            if child is ancestor.body and ancestor.handlers:
                return True
        elif isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            if any(_is_guard_condition(sem, d.decorator) for d in ancestor.decorators):
                return True
            if isinstance(ancestor, cst.FunctionDef) and depth > 0 and \
                    _called_under_guard(sem, ancestor, depth - 1):
                return True
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)) and _guarded_by_earlier_exit(sem, child, ancestor):
            return True
        child = ancestor
    return False


def _same_file_calls(sem: "Semantic", function: cst.FunctionDef) -> List[cst.Call]:
    """Calls spelled like `function` (`f(...)`, `obj.f(...)`) outside it."""
    def compute() -> List[cst.Call]:
        name = function.name.value
        found = []
        for call in sem.index.nodes(cst.Call):
            func = call.func
            spelled = func.value if isinstance(func, cst.Name) else (
                func.attr.value if isinstance(func, cst.Attribute) else None)
            if spelled == name and not sem.index.contains(function, call):
                found.append(call)
        return found
    return _cached(sem, ("calls_of", function), compute)


def _called_under_guard(sem: "Semantic", function: cst.FunctionDef, depth: int) -> bool:
    return _cached(sem, ("called_under_guard", function, depth), lambda: any(
        guarded_by_device_condition(sem, call, depth) for call in _same_file_calls(sem, function)))


def in_device_helper(sem: "Semantic", node: cst.CSTNode) -> bool:
    """Whether `node` is in a function named for devices (`to_cuda`, `get_device`, a `cuda()`
    method): its callers decide when it runs."""
    function = sem.function_of(node)
    while function is not None:
        if _DEVICE_HELPER_NAME.search(function.name.value):
            return True
        function = sem.function_of(function)
    return False


def _binds_device_only(sem: "Semantic", bindings) -> bool:
    return bool(bindings) and all(
        (b.kind == "param" and b.name in DEVICE_PARAMETERS)
        or (b.kind == "assign" and b.value is not None and _is_chosen_device(sem, b.value))
        for b in bindings)


def _is_chosen_device(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    """`torch.device(...)`, `"cuda" if ... else "cpu"`, a device string."""
    if isinstance(expr, cst.IfExp):
        return _is_chosen_device(sem, expr.body) and _is_chosen_device(sem, expr.orelse)
    value = _string_value(expr)
    if value is not None:
        return value.split(":")[0] in ACCELERATORS + ("cpu",)
    return isinstance(expr, cst.Call) and sem.is_torch(expr, "torch.device")


def device_name_in_scope(sem: "Semantic", node: cst.CSTNode) -> Optional[str]:
    """The one name visible at `node` that holds the chosen device (`device`, `DEVICE`, a
    `device` parameter), or None when there is none or more than one."""
    names: Set[str] = set()
    scopes: List[cst.CSTNode] = []
    function = sem.function_of(node)
    while function is not None:
        scopes.append(function)
        function = sem.function_of(function)
    scopes.append(sem.module)
    here = sem.index.order[node]
    for scope in scopes:
        for name, bindings in sem.scopes.bindings.get(scope, {}).items():
            if not devices.is_device_name(name) or not _binds_device_only(sem, bindings):
                continue
            if scope is not sem.module or sem.function_of(node) is None:
                if any(b.kind != "param" and sem.index.order[b.node] > here for b in bindings):
                    continue  # bound only after this line
            visible = sem.scopes.lookup(name, node)
            if visible is bindings:
                names.add(name)
    return next(iter(names)) if len(names) == 1 else None


# -- dtypes (TL009) -----------------------------------------------------------------------------

def _is_half_dtype(sem: "Semantic", expr: Optional[cst.BaseExpression]) -> bool:
    name = sem.qualified_name(expr) if expr is not None else None
    return name is not None and name.startswith("torch.") and name.count(".") == 1 and \
        name.split(".")[1] in HALF_DTYPES


def may_hold_half(sem: "Semantic", expr: cst.BaseExpression) -> bool:
    """A cheap filter before `half_conversion`: the file converts something to half precision,
    and `expr` is a call or a name that some assignment in the file binds to an expression
    containing such a conversion."""
    def conversions() -> Tuple[bool, Set[str]]:
        found = False
        names: Set[str] = set()
        for call in sem.index.nodes(cst.Call):
            if not _is_half_spelling(sem, call):
                continue
            found = True
            for ancestor in sem.ancestors(call):
                if isinstance(ancestor, (cst.Assign, cst.AnnAssign)):
                    targets = ancestor.targets if isinstance(ancestor, cst.Assign) else [ancestor]
                    for target in targets:
                        names |= _target_names(target.target)
                    break
                if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                    break
        return found, names
    found, names = _cached(sem, "half_conversions", conversions)
    if not found:
        return False
    if isinstance(expr, cst.Name):
        return expr.value in names
    return isinstance(expr, cst.Call)


def _is_half_spelling(sem: "Semantic", call: cst.Call) -> bool:
    """`.half()`, `.bfloat16()`, or a call with a half dtype among its arguments."""
    if method_call(call, "half", "bfloat16") and not call.args:
        return True
    return any(_is_half_dtype(sem, a.value) or (sem.qualified_name(a.value) or "").endswith(
        ("HalfTensor", "BFloat16Tensor")) for a in call.args)


def half_conversion(sem: "Semantic", expr: cst.BaseExpression, depth: int = 4) -> Optional[cst.CSTNode]:
    """When `expr` is certainly a float16/bfloat16 tensor made from another one — `x.half()`,
    `x.bfloat16()`, `x.to(torch.float16)`, `x.to(device, torch.half)`, `x.to(dtype=...)`,
    `x.type(torch.HalfTensor)`, a factory with `dtype=torch.float16`, a name bound to one, or
    that through same-device methods — the converting call."""
    if depth <= 0:
        return None
    if isinstance(expr, cst.Name):
        value = sem.reaching_value(expr, depth=1)
        return half_conversion(sem, value, depth - 1) if value is not None and value is not expr else None
    if not isinstance(expr, cst.Call):
        return None
    if method_call(expr, "half", "bfloat16") and not expr.args:
        return expr
    if method_call(expr, "to"):
        dtype = keyword(expr, "dtype")
        positional = _positional(expr)
        if dtype is None:
            dtype = next((p for p in positional if _is_half_dtype(sem, p)), None)
        if _is_half_dtype(sem, dtype):
            return expr
        if devices.is_device_move(sem, expr) and dtype is None:
            return half_conversion(sem, expr.func.value, depth - 1)
        return None
    if method_call(expr, "type") and len(expr.args) == 1:
        name = sem.qualified_name(expr.args[0].value) or ""
        return expr if name.endswith("HalfTensor") or name.endswith("BFloat16Tensor") else None
    if method_call(expr, "cuda", "cpu", "contiguous", "view", "reshape", "unsqueeze", "squeeze",
                   "permute", "transpose", "clone", "detach", "flatten"):
        return half_conversion(sem, expr.func.value, depth - 1)
    name = sem.call_name(expr) or ""
    if name.startswith("torch.") and name.count(".") == 1 and \
            name.split(".")[1] in devices.TENSOR_FACTORIES and _is_half_dtype(sem, keyword(expr, "dtype")):
        return expr
    return None


def _converts_dtype(sem: "Semantic", call: cst.Call) -> bool:
    """A module method call that may change its parameters' dtype: `.half()`, `.bfloat16()`,
    `.double()`, `.type(...)`, `.to(dtype)`, `.to(device, dtype)`, `.to(x)` (unknown)."""
    method = call.func.attr.value
    if method in ("half", "bfloat16", "double", "type", "to_empty"):
        return True
    if method != "to":
        return False
    if keyword(call, "dtype") is not None or len(_positional(call)) > 1:
        return True
    return not devices.is_device_move(sem, call)


def float32_module(sem: "Semantic", model: cst.BaseExpression) -> Optional[cst.Call]:
    """When the module `model` certainly has float32 parameters, its construction: built by
    `torch.nn`/torchvision/timm without `dtype=` (or by a same-file class that never mentions
    dtypes or casts), moved with plain device moves only, and no call anywhere in the file
    converts that name (`model.half()`, `model.to(torch.bfloat16)`). None otherwise."""
    spelled = dotted_name(model)
    if spelled is None or _cached(sem, "sets_default_dtype", lambda: _sets_default_dtype(sem)):
        return None
    for call in _dtype_conversions(sem):
        if dotted_name(call.func.value) == spelled:
            return None
    if isinstance(model, cst.Name):
        value = sem.reaching_value(model)
    elif isinstance(model, cst.Attribute) and isinstance(model.value, cst.Name) and model.value.value == "self":
        values = sem.self_attribute_assignments(model)
        value = values[0] if len(values) == 1 else None
    else:
        value = None
    if value is None:
        return None
    while method_call(value, *MODULE_SELF_METHODS):
        if _converts_dtype(sem, value):
            return None
        value = value.func.value
    if not isinstance(value, cst.Call) or not sem.is_module_construction(value):
        return None
    if keyword(value, "dtype") is not None or any(a.star for a in value.args):
        return None
    if not has_parameters(sem, value) or is_parallel_wrapper(sem, value):
        return None
    if isinstance(value.func, cst.Name):
        for binding in sem.scopes.lookup(value.func.value, value) or ():
            if binding.kind == "class" and re.search(
                    r"half|float|bfloat16|dtype|\.to\(|\.type\(|autocast|amp", _text(sem, binding.node)):
                return None  # the class may cast its weights or its input
    return value


def _dtype_conversions(sem: "Semantic") -> List[cst.Call]:
    def compute() -> List[cst.Call]:
        return [c for c in sem.index.nodes(cst.Call)
                if method_call(c, *MODULE_SELF_METHODS) and _converts_dtype(sem, c)]
    return _cached(sem, "dtype_conversions", compute)


def _sets_default_dtype(sem: "Semantic") -> bool:
    return any(sem.is_torch(c, "torch.set_default_dtype", "torch.set_default_tensor_type")
               for c in sem.index.nodes(cst.Call))


def _is_dtype_neutral_context(sem: "Semantic", item: cst.BaseExpression) -> bool:
    if sem.is_torch(item, *_DTYPE_NEUTRAL_CONTEXTS):
        return True
    return isinstance(item, cst.Call) and isinstance(item.func, cst.Name) and \
        item.func.value in _DTYPE_NEUTRAL_BUILTINS


def may_run_under_autocast(sem: "Semantic", node: cst.CSTNode, depth: int = 2) -> bool:
    """Whether `node` may run under autocast: inside `torch.autocast(...)` /
    `torch.cuda.amp.autocast()` (block or decorator), inside any `with` whose context manager is
    not known to leave dtypes alone (`with ctx:`), or in a function some same-file caller calls
    that way."""
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, cst.With) and child is ancestor.body:
            if not all(_is_dtype_neutral_context(sem, i.item) for i in ancestor.items):
                return True
        elif isinstance(ancestor, cst.FunctionDef):
            for decorator in ancestor.decorators:
                text = _text(sem, decorator.decorator)
                if "autocast" in text or "amp" in text:
                    return True
            if depth > 0 and _cached(sem, ("called_under_autocast", ancestor, depth), lambda: any(
                    may_run_under_autocast(sem, call, depth - 1)
                    for call in _same_file_calls(sem, ancestor))):
                return True
        child = ancestor
    return False


def iter_call_arguments(call: cst.Call) -> Iterator[cst.BaseExpression]:
    """The argument values of `call`, positional and keyword (not `*args`/`**kwargs`)."""
    for arg in call.args:
        if not arg.star:
            yield arg.value


__all__ = [
    "UNMOVED", "BatchElement", "HardCodedCuda", "argument_values", "batch_touched_before",
    "batches_moved_by_framework", "device_is_cpu", "device_may_be_accelerator",
    "device_name_in_scope", "device_parameter", "dominates", "file_device_choice",
    "float32_module", "guarded_by_device_condition", "half_conversion", "hard_coded_cuda",
    "has_parameters", "in_device_helper", "is_loader_loop", "is_loss_call", "may_hold_half",
    "module_moves_its_inputs", "is_parallel_wrapper", "iter_call_arguments",
    "loader_origin", "may_run_under_autocast", "model_device_move", "model_output_move",
    "unmoved_batch_element",
]
