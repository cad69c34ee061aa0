"""Where code chooses its device and which code runs only under that choice (TL008), and which
code may run under autocast (TL009): hard-coded CUDA placements, the file's device choice
(`torch.device("cuda" if torch.cuda.is_available() else "cpu")`, `if args.cuda:`, a `--no-cuda`
option), guards of that choice (`if use_cuda:`, `assert torch.cuda.is_available()`, a caller
that calls under one), and `with` blocks that may change dtypes.

These are facts about the code's control structure and spelling, not about values: a condition is
a device guard when it reads the device setting, whatever value it has. Each answers "no" when
unsure in the direction that keeps the rules silent (a `with` of unknown meaning may autocast).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis import devices
from torchlint.analysis.scopes import dotted_name
from torchlint.analysis.semantic import keyword, method_call
from torchlint.analysis.value import CRITERION, MODULE
from torchlint.positions import code_for_node

if TYPE_CHECKING:
    from torchlint.analysis.semantic import Semantic

ACCELERATORS = ("cuda", "mps", "xpu", "npu", "hpu")
DEVICE_PARAMETERS = {"device", "dev"}
# Owners whose `.device` is the device the code chose, not where some tensor is.
CONFIG_OWNERS = ("self", "args", "opt", "opts", "config", "cfg", "hparams", "params", "FLAGS", "conf")
_CUDA_METHOD_KEYWORDS = ("device", "non_blocking", "memory_format")
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
# torch.cuda calls that fail on a machine without CUDA (measured on torch 2.13, CPU build).
_CUDA_ONLY_CALLS = ("torch.cuda.current_device", "torch.cuda.get_device_name",
                    "torch.cuda.set_device", "torch.cuda.synchronize", "torch.cuda.Event",
                    "torch.cuda.Stream", "torch.cuda.get_device_properties",
                    "torch.cuda.get_device_capability", "torch.cuda.current_stream",
                    "torch.cuda.device")
# Functions whose name says they deal with devices: their callers decide when they run.
_DEVICE_HELPER_NAME = re.compile(r"cuda|gpu|device|accel", re.IGNORECASE)
_EXITS = {"exit", "quit", "_exit", "skip", "skipTest", "SkipTest", "importorskip", "fail"}
# Context managers that certainly leave dtypes alone.
_DTYPE_NEUTRAL_CONTEXTS = ("torch.no_grad", "torch.inference_mode", "torch.enable_grad",
                           "torch.set_grad_enabled", "torch.autograd.no_grad",
                           "torch.autograd.profiler.*", "torch.profiler.*")
_DTYPE_NEUTRAL_BUILTINS = {"open", "print", "tqdm"}


def cached(sem: "Semantic", key, compute):
    """One answer per file: device facts are asked for many nodes of the same file."""
    cache = sem.__dict__.setdefault("_device_facts", {})
    if key not in cache:
        cache[key] = compute()
    return cache[key]


def string_value(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    if isinstance(expr, cst.SimpleString):
        try:
            value = expr.evaluated_value
        except Exception:  # noqa: BLE001 - odd literal
            return None
        return value if isinstance(value, str) else None
    return None


def positional(call: cst.Call) -> List[cst.BaseExpression]:
    return [a.value for a in call.args if a.keyword is None and not a.star]


def _text(sem: "Semantic", node: cst.CSTNode) -> str:
    return code_for_node(sem.module, node)


# -- hard-coded CUDA placements -----------------------------------------------------------------

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
    value = string_value(expr)
    if value is not None:
        return (":" in value) if _CUDA_STRING.match(value) else None
    if isinstance(expr, cst.Call) and sem.is_torch(expr, "torch.device"):
        given = positional(expr)
        if not given or keyword(expr, "type") is not None:
            return None
        inner = _cuda_device_literal(sem, given[0])
        if inner is None:
            return None
        return inner or len(given) > 1 or keyword(expr, "index") is not None
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
        if any(a.star for a in node.args) or len(positional(node)) > 1 or any(
                a.keyword is not None and a.keyword.value not in _CUDA_METHOD_KEYWORDS for a in node.args):
            return None  # not torch's `.cuda(device=None, non_blocking=False, memory_format=...)`
        return HardCodedCuda(node, node, bool(positional(node)) or keyword(node, "device") is not None, "method")
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
    if name.startswith("torch.") or sem.values.of(call).kind in (MODULE, CRITERION):
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


# -- device choices and their guards ------------------------------------------------------------

def _is_device_value(sem: "Semantic", expr: Optional[cst.BaseExpression]) -> bool:
    """A device written out: `"cuda"`, `"cpu"`, `torch.device(...)`, a legacy tensor type
    (`torch.cuda.FloatTensor`), `.cuda()`."""
    if expr is None:
        return False
    value = string_value(expr)
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
    already is (`x.is_cuda`, `x.device.type == "cuda"`, `on_cuda = next(m.parameters()).is_cuda`),
    nor one that merely calls `.cuda()` on the way (`if predict(x.cuda()) != y:`)."""
    text = _text(sem, test)
    if "is_available" in text:
        return True
    if _MULTI_GPU_WORDS.search(text):
        return False
    return any(_CHOICE_WORDS.search(dotted) and not _follows_a_tensor(sem, node)
               and not _is_called(sem, node) and _names_a_setting(sem, node)
               for node, dotted in _references(sem, test))


def _is_called(sem: "Semantic", node: cst.CSTNode) -> bool:
    """`….cuda` of `torch.tensor(d).cuda()` in `if predict(x0 + torch.tensor(d).cuda()) != y0:`:
    a placement made while computing the condition, not a setting the condition reads."""
    parent = sem.parent(node)
    return isinstance(parent, cst.Call) and parent.func is node


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
                isinstance(ref, cst.Attribute) and (dotted_name(ref) or "").split(".")[0] in CONFIG_OWNERS
                for ref, _ in _references(sem, value))):
            return True
    return False


def _references(sem: "Semantic", expr: cst.CSTNode) -> Iterator[Tuple[cst.CSTNode, str]]:
    """The names and whole attribute chains read in `expr` (`args.cuda`, `x.device.type`), with
    their dotted spelling; call chains are split at the call (`next(m.parameters()).is_cuda`
    gives `….is_cuda` and `m.parameters`)."""
    for node in [expr, *sem.index.descendants(expr)]:
        if type(node) not in (cst.Name, cst.Attribute):
            continue
        parent = sem.parent(node)
        if isinstance(parent, cst.Attribute) and (parent.value is node or parent.attr is node):
            continue  # part of a longer chain
        if isinstance(node, cst.Attribute):
            yield node, dotted_name(node) or "…." + node.attr.value
        else:
            yield node, node.value


def _follows_a_tensor(sem: "Semantic", node: cst.CSTNode, seen: frozenset = frozenset()) -> bool:
    """`x.is_cuda`, `x.device`, `x.device.type` for a tensor-like `x` (not `args`/`self`/a
    config), or a name bound only to such values (`seen`: the names being followed, so that
    `d = d.device` ends)."""
    if isinstance(node, cst.Attribute):
        chain = dotted_name(node) or "…." + node.attr.value
        parts = chain.split(".")
        if parts[-1] == "is_cuda" or parts[-1] == "get_device":
            return True
        # `x.device`, `self.keys.device` follow a tensor; `args.device`, `self.device` are chosen
        return any(part == "device" and parts[i - 1] not in CONFIG_OWNERS
                   for i, part in enumerate(parts) if i > 0)
    if isinstance(node, cst.Name) and node.value not in seen:
        bindings = sem.scopes.lookup(node.value, node) or []
        values = [b.value for b in bindings if b.kind == "assign" and b.value is not None]
        seen = seen | {node.value}
        return bool(bindings) and len(values) == len(bindings) and all(
            any(_follows_a_tensor(sem, ref, seen) for ref, _ in _references(sem, v)) for v in values)
    return False


def _sets_cuda_default_type(sem: "Semantic", call: cst.Call) -> bool:
    """`torch.set_default_tensor_type("torch.cuda.FloatTensor")` (or the type itself)."""
    if not sem.is_torch(call, "torch.set_default_tensor_type") or not call.args:
        return False
    value = call.args[0].value
    text = string_value(value) or sem.qualified_name(value) or ""
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
    return cached(sem, "requires_cuda", compute)


def file_device_choice(sem: "Semantic") -> Optional[cst.CSTNode]:
    """The first place this file chooses its device at run time, or None: a conditional device
    (`torch.device("cuda" if torch.cuda.is_available() else "cpu")`), an `if` on the condition
    that moves something (`if args.cuda: model.cuda()`), a flag computed from
    `torch.cuda.is_available()` (`use_cuda = ...`), or a `--cuda`/`--no-cuda`/`--device`
    command-line option."""
    def compute() -> List[cst.CSTNode]:
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
                flags = [string_value(a.value) for a in call.args if a.keyword is None]
                if any(f is not None and _DEVICE_FLAG.match(f) for f in flags):
                    found.append(call)
        return sorted(found, key=sem.index.order.__getitem__)
    if _requires_cuda_anyway(sem):
        return None
    found = cached(sem, "file_choices", compute)
    return found[0] if found else None


def file_device_choices(sem: "Semantic") -> List[cst.CSTNode]:
    """Every place `file_device_choice` considers, in document order (empty when it is None)."""
    if file_device_choice(sem) is None:
        return []
    return cached(sem, "file_choices", lambda: [])


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
    return cached(sem, "guard_words", compute)


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


def guarded_by_device_condition(sem: "Semantic", node: cst.CSTNode) -> bool:
    """Whether `node` runs only under a device condition: inside `if torch.cuda.is_available():`
    / `if args.cuda:` (either branch), `x.cuda() if use_cuda else x`, `use_cuda and x.cuda()`,
    `with torch.cuda.device(i):`, a `try` with handlers, after `assert torch.cuda.is_available()`
    or `if not use_gpu: return`, in a function decorated with a CUDA skip, or in a function that
    some same-file caller calls under such a condition (callers of callers, however many)."""
    guarded, functions = _guarded_here(sem, node)
    return guarded or bool(functions) and _some_function_in(
        functions, functions_called_where(sem, "device_guard", _guarded_here))


def _guarded_here(sem: "Semantic", node: cst.CSTNode) -> Tuple[bool, List[cst.FunctionDef]]:
    """Whether the code around `node`, up to the module, guards it; else the functions it is in."""
    functions: List[cst.FunctionDef] = []
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)):
            if child is not ancestor.test and _is_guard_condition(sem, ancestor.test):
                return True, []
        elif isinstance(ancestor, cst.BooleanOperation):
            if child is ancestor.right and _is_guard_condition(sem, ancestor.left):
                return True, []
        elif isinstance(ancestor, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            comp: Optional[cst.CompFor] = ancestor.for_in
            while comp is not None:
                if any(_is_guard_condition(sem, clause.test) for clause in comp.ifs):
                    return True, []
                comp = comp.inner_for_in
        elif isinstance(ancestor, cst.With):
            if child is ancestor.body and any(_is_guard_condition(sem, i.item) for i in ancestor.items):
                return True, []
        elif isinstance(ancestor, cst.Try):
            if child is ancestor.body and ancestor.handlers:
                return True, []
        elif isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            if any(_is_guard_condition(sem, d.decorator) for d in ancestor.decorators):
                return True, []
            if isinstance(ancestor, cst.FunctionDef):
                functions.append(ancestor)
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)) and _guarded_by_earlier_exit(sem, child, ancestor):
            return True, []
        child = ancestor
    return False, functions


def _some_function_in(functions: List[cst.FunctionDef], found: Set[int]) -> bool:
    return any(id(function) in found for function in functions)


def functions_called_where(sem: "Semantic", fact: str,
                           holds_here: Callable[["Semantic", cst.CSTNode], Tuple[bool, List[cst.FunctionDef]]]
                           ) -> Set[int]:
    """The functions (by id) that some same-file call (`f(...)`, `obj.f(...)`, outside `f`)
    runs where `fact` holds: where `holds_here` says so, or inside a function already found. A
    least fixpoint over the file's call graph, computed once per fact: each round adds the
    functions that a found place calls, so recursion and mutual calls end, in at most as many
    rounds as there are functions."""
    def compute() -> Set[int]:
        calls_by_name: dict = {}
        for call in sem.index.nodes(cst.Call):
            func = call.func
            spelled = func.value if type(func) is cst.Name else (
                func.attr.value if type(func) is cst.Attribute else None)
            if spelled is not None:
                calls_by_name.setdefault(spelled, []).append(call)
        places: dict = {}
        pending = []
        for function in sem.index.nodes(cst.FunctionDef):
            calls = [c for c in calls_by_name.get(function.name.value, ()) if not sem.index.contains(function, c)]
            if calls:
                pending.append((function, calls))
        found: Set[int] = set()
        changed = True
        while changed:
            changed = False
            still = []
            for function, calls in pending:
                for call in calls:
                    if id(call) not in places:
                        places[id(call)] = holds_here(sem, call)
                    holds, around = places[id(call)]
                    if holds or _some_function_in(around, found):
                        found.add(id(function))
                        changed = True
                        break
                else:
                    still.append((function, calls))
            pending = still
        return found
    return cached(sem, ("functions_called_where", fact), compute)


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
    value = string_value(expr)
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



# -- autocast (TL009) ---------------------------------------------------------------------------

def _is_dtype_neutral_context(sem: "Semantic", item: cst.BaseExpression) -> bool:
    if sem.is_torch(item, *_DTYPE_NEUTRAL_CONTEXTS):
        return True
    return isinstance(item, cst.Call) and isinstance(item.func, cst.Name) and \
        item.func.value in _DTYPE_NEUTRAL_BUILTINS


def may_run_under_autocast(sem: "Semantic", node: cst.CSTNode) -> bool:
    """Whether `node` may run under autocast: inside `torch.autocast(...)` /
    `torch.cuda.amp.autocast()` (block or decorator), inside any `with` whose context manager is
    not known to leave dtypes alone (`with ctx:`), or in a function some same-file caller calls
    that way (callers of callers, however many)."""
    inside, functions = _autocast_here(sem, node)
    return inside or bool(functions) and _some_function_in(
        functions, functions_called_where(sem, "autocast", _autocast_here))


def _autocast_here(sem: "Semantic", node: cst.CSTNode) -> Tuple[bool, List[cst.FunctionDef]]:
    functions: List[cst.FunctionDef] = []
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, cst.With) and child is ancestor.body:
            if not all(_is_dtype_neutral_context(sem, i.item) for i in ancestor.items):
                return True, []
        elif isinstance(ancestor, cst.FunctionDef):
            for decorator in ancestor.decorators:
                text = _text(sem, decorator.decorator)
                if "autocast" in text or "amp" in text:
                    return True, []
            functions.append(ancestor)
        child = ancestor
    return False, functions


__all__ = [
    "ACCELERATORS", "CONFIG_OWNERS", "DEVICE_PARAMETERS", "HardCodedCuda", "device_name_in_scope",
    "device_parameter", "file_device_choice", "guarded_by_device_condition", "hard_coded_cuda",
    "in_device_helper", "may_run_under_autocast",
]
