"""What a program saves with `torch.save`, and whether `torch.load` can read it back with
`weights_only=True` (the default since PyTorch 2.6).

Measured on torch 2.13: the weights-only unpickler reads tensors, `torch.Size`, dtypes, devices,
numbers, strings, bytes, None, and lists, tuples, sets, dicts and OrderedDicts of those (so every
`state_dict()`, of a model, an optimizer or a scheduler); it refuses (`UnpicklingError: Weights
only load failed`) an `argparse.Namespace`, a whole `nn.Module` (a model, a loss module), an
optimizer or scheduler object, NumPy scalars and arrays, a `collections.defaultdict`, and
instances of the program's own classes (a vocabulary object).

`saved_content(sem, expr)` is the one judgement of "what is in this object", asked of the object
a `torch.save` call writes; `saves(sem)` lists a file's `torch.save` calls with that judgement, and
`path_key` is what links a save to a load of the same file. The judgement needs only the semantic
model of the file that holds `expr`, so it can be asked of another file's saves once loads are
linked across a project. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.semantic import method_call, method_call_in
from torchlint.analysis.value import (CLASS, CRITERION, INSTANCE, MODULE, NONE, NUMBER, OPTIMIZER,
                                      SCHEDULER, STRING, TENSOR_KINDS)

# The verdicts.
UNLOADABLE = "unloadable"  # weights_only=True certainly refuses it
WEIGHTS = "weights"  # certainly only what weights_only=True reads
UNKNOWN = "unknown"

# -- data: what the weights-only unpickler reads or refuses (measured on torch 2.13) -------------
# Methods whose result it reads: state dicts and Python numbers/lists.
LOADABLE_METHODS = frozenset({"state_dict", "item", "tolist", "size", "dim", "numel"})
# Builtins whose result it reads (`vars(args)`: the Namespace's dict of option values).
LOADABLE_BUILTINS = frozenset({"vars", "int", "float", "str", "bool", "len", "dict", "list", "tuple"})
# Methods whose result is a NumPy value.
NUMPY_METHODS = frozenset({"numpy"})
# NumPy functions whose result is a NumPy array or scalar (numpy.<name>).
NUMPY_FUNCTIONS = frozenset({
    "array", "asarray", "zeros", "ones", "empty", "full", "arange", "linspace", "stack", "concatenate",
    "mean", "sum", "std", "var", "max", "min", "median", "average", "argmax", "argmin", "exp", "log", "sqrt",
    "float16", "float32", "float64", "int32", "int64", "uint8", "bool_",
})
# ndarray methods that give an ndarray back (`a.astype("float32")`).
NDARRAY_METHODS = frozenset({"astype", "reshape", "transpose", "copy", "squeeze", "flatten", "ravel", "clip"})
# Every NumPy function whose result is an ndarray (for a method chain rooted at one).
_NUMPY_ARRAY_ROOTS = NUMPY_FUNCTIONS | frozenset({"sin", "cos", "tanh", "abs", "clip", "where", "load",
                                                   "random.rand", "random.randn", "random.randint",
                                                   "random.uniform", "random.normal"})


def _numpy_made(sem, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """`np.sin(x)`, `np.array(v).reshape(2, 3)`: a NumPy call, or an ndarray method of one."""
    if depth > 6 or type(expr) is not cst.Call:
        return False
    name = sem.qualified_name(expr.func)
    if name is not None and name.startswith("numpy.") and name[len("numpy."):] in _NUMPY_ARRAY_ROOTS:
        return True
    return method_call_in(expr, NDARRAY_METHODS) and _numpy_made(sem, expr.func.value, depth + 1)


# Methods only an object with parameters has (an nn.Module): `model.parameters()`.
MODULE_ONLY_METHODS = frozenset({"parameters", "named_parameters", "modules", "named_modules", "children"})
# What each refused kind of value is called in a message, and what to save instead.
_KIND_WHAT = {
    MODULE: ("a whole nn.Module", "save `{name}.state_dict()` and load it into a new model"),
    CRITERION: ("a whole nn.Module (a loss module)", "save its `state_dict()` or nothing: rebuild it"),
    OPTIMIZER: ("a whole optimizer object", "save `{name}.state_dict()`"),
    SCHEDULER: ("a whole LR scheduler object", "save `{name}.state_dict()`"),
    INSTANCE: ("an instance of a class of this file", "save its fields as a dict"),
}
_MAX_DEPTH = 6


@dataclass(frozen=True)
class Content:
    """What an object holds, for `torch.load(..., weights_only=True)`: `verdict` is UNLOADABLE,
    WEIGHTS or UNKNOWN; for UNLOADABLE, `what` names the offending value ("an argparse.Namespace"),
    `node` is it, `instead` says what to save instead; `keys` are the string keys of a saved dict
    whose values are refused (`{"args": args}` → {"args"})."""

    verdict: str
    what: str = ""
    node: Optional[cst.CSTNode] = None
    instead: str = ""
    keys: FrozenSet[str] = frozenset()


_WEIGHTS = Content(WEIGHTS)
_UNKNOWN = Content(UNKNOWN)


@dataclass(frozen=True)
class Save:
    call: cst.Call  # the torch.save(...) call
    obj: cst.BaseExpression
    path: Optional[cst.BaseExpression]
    content: Content


def saved_content(sem, expr: cst.BaseExpression, _depth: int = 0) -> Content:
    """Whether `torch.load(weights_only=True)` can read `expr` back once it is saved."""
    if _depth > _MAX_DEPTH:
        return _UNKNOWN
    kind = type(expr)
    if kind in (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
                cst.FormattedString):
        return _WEIGHTS
    if kind is cst.Name and expr.value in ("True", "False", "None"):
        return _WEIGHTS
    if kind is cst.Dict:
        return _combine(sem, [(e, getattr(e, "value", None)) for e in expr.elements], _depth)
    if kind in (cst.List, cst.Tuple, cst.Set):
        return _combine(sem, [(e, None if isinstance(e, cst.StarredElement) else e.value)
                              for e in expr.elements], _depth)
    if kind is cst.Call:
        found = _call_content(sem, expr, _depth)
        if found is not None:
            return found
    value = sem.values.of(expr)
    if value.kind in TENSOR_KINDS or value.kind in (NUMBER, STRING, NONE):
        return _WEIGHTS
    if value.kind in _KIND_WHAT and not value.optional:
        what, instead = _KIND_WHAT[value.kind]
        name = sem.source(expr) if kind in (cst.Name, cst.Attribute) else "it"
        return Content(UNLOADABLE, what, expr, instead.format(name=name))
    if kind is cst.Name:
        return _name_content(sem, expr, _depth)
    return _UNKNOWN


def _name_content(sem, name: cst.Name, depth: int) -> Content:
    """What a name holds, from every assignment that may give it its value where it is saved
    (for a global read in a function: every assignment of the module). A `torch.load(...)` among
    them is skipped: it gives back what was saved (`model = Net()` ... `model = torch.load(f)`)."""
    definitions = _definitions(sem, name)
    if not definitions:
        return _used_as_module(sem, name)
    contents = []
    for definition in definitions:
        value = definition.value
        if definition.kind == "assign" and type(value) is cst.Call and is_torch_load(sem, value):
            continue  # also `encoder, decoder = torch.load(path)`: what was saved, unpacked
        if definition.kind == "assign" and definition.path and len(definition.path) == 1 and \
                type(value) in (cst.Tuple, cst.List):  # `g, d = Generator(), Discriminator()`
            elements = value.elements
            index = definition.path[0]
            value = elements[index].value if index < len(elements) and not any(
                isinstance(e, cst.StarredElement) for e in elements) else None
        elif definition.kind != "assign" or definition.path != ():
            return _UNKNOWN
        if value is None:
            return _UNKNOWN
        inner = saved_content(sem, value, depth + 1)
        if inner.verdict == UNLOADABLE and inner.node is value:
            # Name the value as the save spells it: `args`, not `parser.parse_args()`.
            inner = Content(UNLOADABLE, inner.what, name, inner.instead.replace("{name}", name.value), inner.keys)
        contents.append(inner)
    if not contents:
        return _used_as_module(sem, name)
    if all(c.verdict == UNLOADABLE for c in contents):
        return contents[0]
    if all(c.verdict == WEIGHTS for c in contents):
        return _WEIGHTS
    if not any(c.verdict == WEIGHTS for c in contents):
        return _used_as_module(sem, name)
    return _UNKNOWN


def _used_as_module(sem, name: cst.Name) -> Content:
    """A name the value model does not know (a model built from a class of another file) that the
    file calls `.parameters()` on: an object with parameters, not a dict or a tensor (only an
    nn.Module, or an instance of the program's own class, has them), so weights_only refuses it."""
    if not sem.imports_torch:
        return _UNKNOWN
    uses = sem.__dict__.get("_checkpoint_parameter_owners")
    if uses is None:
        uses = set()
        for call in sem.index.nodes(cst.Call):
            if method_call_in(call, MODULE_ONLY_METHODS) and type(call.func.value) is cst.Name:
                uses.add(call.func.value.value)
        sem.__dict__["_checkpoint_parameter_owners"] = uses
    if name.value in uses:
        return Content(UNLOADABLE, "a whole nn.Module", name,
                       f"save `{name.value}.state_dict()` and load it into a new model")
    return _UNKNOWN


def _definitions(sem, name: cst.Name):
    """The definitions that may give `name` its value where it is read; for a name its own scope
    does not bind, every definition in the scope that does."""
    flow = sem.values.flow
    definitions = flow.reaching(name)
    if definitions is None:
        return None
    if definitions == ():
        found = sem.scopes.binding_scope(name.value, name)
        if found is None:
            return None
        definitions = tuple(flow.bindings(found[0], name.value))
    return definitions


def _combine(sem, parts, depth: int) -> Content:
    """A container: refused when one element is, read when every element is."""
    verdict = WEIGHTS
    refused: Optional[Content] = None
    keys = set()
    for element, value in parts:
        if value is None:  # `**other`, `*rest`
            verdict = UNKNOWN
            continue
        content = saved_content(sem, value, depth + 1)
        if content.verdict == UNLOADABLE:
            refused = refused or content
            key = getattr(element, "key", None)
            if isinstance(key, cst.SimpleString):
                keys.add(key.evaluated_value)
        elif content.verdict == UNKNOWN:
            verdict = UNKNOWN
    if refused is not None:
        instead = refused.instead.replace("{name}", "args")
        return Content(UNLOADABLE, refused.what, refused.node, instead, frozenset(keys))
    return _WEIGHTS if verdict == WEIGHTS else _UNKNOWN


def _call_content(sem, call: cst.Call, depth: int) -> Optional[Content]:
    func = call.func
    if method_call(call, "state_dict"):
        held = _object_in_scheduler_state(sem, func.value)
        if held is not None:
            return Content(UNLOADABLE, f"a scheduler state dict holding {held}", call,
                           "save the wrapped scheduler's own `state_dict()` beside it, or pass "
                           "`weights_only=False` for a file you trust")
    if method_call_in(call, LOADABLE_METHODS):
        return _WEIGHTS
    if method_call(call, "parse_args"):
        return Content(UNLOADABLE, "an argparse.Namespace", call, "save `vars({name})` (a dict of the options)")
    if method_call_in(call, NUMPY_METHODS):
        return Content(UNLOADABLE, "a NumPy array", call, "save the tensor itself, or `.tolist()`/`.item()`")
    if isinstance(func, cst.Name) and func.value in LOADABLE_BUILTINS and sem.scopes.lookup(func.value, call) is None:
        return _WEIGHTS
    name = sem.qualified_name(func)
    if name is not None and name.startswith("numpy.") and name[len("numpy."):] in NUMPY_FUNCTIONS:
        return Content(UNLOADABLE, "a NumPy value", call, "save a tensor, or a Python number with `float(...)`")
    if method_call_in(call, NDARRAY_METHODS) and _numpy_made(sem, call.func.value):
        # `np.sin(x).astype("float64")`: an ndarray method of a NumPy result gives an ndarray
        return Content(UNLOADABLE, "a NumPy array", call, "save a tensor (`torch.from_numpy(...)`) instead")
    if name in ("argparse.Namespace",):
        return Content(UNLOADABLE, "an argparse.Namespace", call, "save a dict of the options")
    if name in ("collections.defaultdict",):
        return Content(UNLOADABLE, "a collections.defaultdict", call, "save `dict(...)` of it")
    if name == "copy.deepcopy" and call.args and call.args[0].keyword is None:
        return saved_content(sem, call.args[0].value, depth + 1)
    returned = _returned_content(sem, call, depth)
    if returned is not None:
        return returned
    value = sem.values.of(func)
    if value.kind == CLASS:  # an instance of a class of this file (not a module: those are MODULE)
        return Content(UNLOADABLE, "an instance of a class of this file", call, "save its fields as a dict")
    return None


# Learning-rate schedulers whose `state_dict()` is torch's `LRScheduler.state_dict`: every
# attribute but the optimizer. GradualWarmupScheduler (ildoonet/pytorch-gradual-warmup-lr,
# warmup_scheduler/scheduler.py, read) keeps the `after_scheduler` it is given.
_WARMUP_SCHEDULERS = {"warmup_scheduler.GradualWarmupScheduler": ("after_scheduler", 3),
                      "warmup_scheduler.scheduler.GradualWarmupScheduler": ("after_scheduler", 3)}
_SCHEDULER_BASES = ("torch.optim.lr_scheduler.LRScheduler", "torch.optim.lr_scheduler._LRScheduler")


def _object_in_scheduler_state(sem, receiver: cst.BaseExpression) -> Optional[str]:
    """What object a scheduler's `state_dict()` holds, when it certainly holds one: the
    `after_scheduler` given to a GradualWarmupScheduler, or, for a scheduler class of this file
    that derives from torch's LRScheduler and keeps its own `state_dict`, an argument stored on
    `self` that is a scheduler or an instance of a class (measured on torch 2.13: such a state
    dict saved and loaded with `weights_only=True` raises `UnpicklingError`)."""
    made = sem.assigned_value(receiver) if isinstance(receiver, (cst.Name, cst.Attribute)) else receiver
    if not isinstance(made, cst.Call):
        return None
    name = sem.qualified_name(made.func) or ""
    if name in _WARMUP_SCHEDULERS:
        keyword, position = _WARMUP_SCHEDULERS[name]
        given = argument(made, position, keyword)
        if given is not None and not (isinstance(given, cst.Name) and given.value == "None"):
            return f"the `{keyword}` object (`{' '.join(sem.source(given).split())[:40]}`)"
        return None
    klass = sem.values.of(made.func)
    klass = klass.detail if klass.kind == CLASS else None
    if not isinstance(klass, cst.ClassDef) or not any(
            (sem.qualified_name(base.value) or "") in _SCHEDULER_BASES for base in klass.bases):
        return None
    methods = {s.name.value: s for s in klass.body.body if isinstance(s, cst.FunctionDef)}
    init = methods.get("__init__")
    if "state_dict" in methods or init is None:
        return None
    params = [p.name.value for p in init.params.params][1:]
    stored = {}
    for assign in sem.index.descendants(init, cst.Assign):
        for target in assign.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self" \
                    and isinstance(assign.value, cst.Name) and assign.value.value in params:
                stored[assign.value.value] = t.attr.value
    for index, param in enumerate(params):
        if param not in stored:
            continue
        given = argument(made, index, param)
        if isinstance(given, cst.Call):
            given_name = sem.qualified_name(given.func) or ""
            if given_name.startswith("torch.optim.lr_scheduler.") or sem.values.of(given.func).kind == CLASS:
                return f"`self.{stored[param]}` (`{' '.join(sem.source(given).split())[:40]}`)"
    return None


def _returned_content(sem, call: cst.Call, depth: int) -> Optional[Content]:
    """What a same-file function returns, when every `return` of it returns a refused value
    (`def get_args(): return parser.parse_args()`), or every one returns what weights_only reads."""
    if not isinstance(call.func, cst.Name):
        return None
    targets = sem.resolve_local_function(call, call)
    if len(targets) != 1:
        return None
    returns = [r for r in sem.index.descendants(targets[0], cst.Return) if sem.function_of(r) is targets[0]]
    if not returns or any(r.value is None for r in returns):
        return None
    contents = [saved_content(sem, r.value, depth + 1) for r in returns]
    if all(c.verdict == UNLOADABLE for c in contents):
        first = contents[0]
        return Content(UNLOADABLE, first.what, call, first.instead, first.keys)
    if all(c.verdict == WEIGHTS for c in contents):
        return _WEIGHTS
    return None


def _assigned(sem, name: cst.Name) -> Optional[cst.BaseExpression]:
    """The one expression `name` certainly holds where it is read: its reaching assignment in the
    function, or, for a global the function does not bind, the module's single assignment."""
    assigned = sem.assigned_value(name)
    if assigned is not None:
        return assigned
    found = sem.scopes.binding_scope(name.value, name)
    if found is None:
        return None
    scope, bindings = found
    if scope is sem.scopes.scope_of(name) or type(scope) is not cst.Module:
        return None
    if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
        return bindings[0].value
    return None


# -- the file's saves and loads ------------------------------------------------------------------
def is_torch_save(sem, call: cst.Call) -> bool:
    return sem.is_torch(call, "torch.save")


def is_torch_load(sem, call: cst.Call) -> bool:
    return sem.is_torch(call, "torch.load")


def argument(call: cst.Call, position: int, keyword: str) -> Optional[cst.BaseExpression]:
    """The argument given at `position` or as `keyword=`."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [arg for arg in call.args if arg.keyword is None]
    if any(arg.star for arg in positional[: position + 1]):
        return None
    return positional[position].value if len(positional) > position else None


def saves(sem) -> Tuple[Save, ...]:
    """Every `torch.save(obj, path)` of the file, with what `obj` holds."""
    found = sem.__dict__.get("_checkpoint_saves")
    if found is None:
        items: List[Save] = []
        if "torch.save" in sem.called_names:
            for call in sem.index.nodes(cst.Call):
                if not is_torch_save(sem, call):
                    continue
                obj = argument(call, 0, "obj")
                if obj is None:
                    continue
                items.append(Save(call, obj, argument(call, 1, "f"), saved_content(sem, obj)))
        found = sem.__dict__["_checkpoint_saves"] = tuple(items)
    return found


def path_key(sem, expr: Optional[cst.BaseExpression]) -> Optional[str]:
    """What identifies a checkpoint path: a string's value (also through a name that certainly
    holds one), else the expression's text without spaces (`args.save_path`,
    `os.path.join(args.dir, "best.pth")`, `f"{root}/model.pt"`)."""
    if expr is None:
        return None
    if isinstance(expr, cst.Name):
        opened = _opened_path(sem, expr)
        if opened is not None:
            return path_key(sem, opened)
        assigned = _assigned(sem, expr)
        if isinstance(assigned, cst.SimpleString):
            expr = assigned
    if isinstance(expr, cst.SimpleString):
        return "str:" + str(expr.evaluated_value)
    return "expr:" + "".join(sem.source(expr).split())


def _opened_path(sem, name: cst.Name) -> Optional[cst.BaseExpression]:
    """`P` for a file object `f` certainly bound by `with open(P, ...) as f`."""
    definitions = sem.values.flow.reaching(name)
    if not definitions or len(definitions) != 1 or definitions[0].kind != "with":
        return None
    opened = definitions[0].value
    if type(opened) is cst.Call and type(opened.func) is cst.Name and opened.func.value == "open" \
            and opened.args and opened.args[0].keyword is None and not opened.args[0].star:
        return opened.args[0].value
    return None


def saves_by_path(sem) -> Dict[str, List[Save]]:
    table: Dict[str, List[Save]] = {}
    for save in saves(sem):
        key = path_key(sem, save.path)
        if key is not None:
            table.setdefault(key, []).append(save)
    return table


# -- the file name a path expression writes or reads ----------------------------------------------
def file_name(sem, expr: Optional[cst.BaseExpression], _depth: int = 0) -> Optional[str]:
    """The file name (the last path component) `expr` certainly names, or None: a string's
    (`"out/model.pt"` → `model.pt`), through a name that certainly holds one, `os.path.join(...,
    "best.pth")`, `root + "/best.pth"`, `root / "best.pth"`, `f"{root}/best.pth"`, and `args.save`
    when the file's argparse option `--save` (or a class attribute `save`) has a string default.
    What links a load to a save of another file, whose expressions cannot be compared as text."""
    if expr is None or _depth > 4:
        return None
    kind = type(expr)
    if kind is cst.SimpleString:
        value = expr.evaluated_value
        return _base_name(value) if isinstance(value, str) else None
    if kind is cst.Name:
        opened = _opened_path(sem, expr)
        if opened is not None:
            return file_name(sem, opened, _depth + 1)
        assigned = _assigned(sem, expr)
        return file_name(sem, assigned, _depth + 1) if assigned is not None else None
    if kind is cst.Attribute:
        return _option_defaults(sem).get(expr.attr.value) if type(expr.value) is cst.Name else None
    if kind is cst.Call:
        if sem.qualified_name(expr.func) in ("os.path.join", "posixpath.join") and expr.args \
                and not any(arg.star or arg.keyword for arg in expr.args):
            return file_name(sem, expr.args[-1].value, _depth + 1)
        if type(expr.func) is cst.Name and expr.func.value == "open" and sem.scopes.lookup("open", expr) is None \
                and expr.args and expr.args[0].keyword is None and not expr.args[0].star:
            return file_name(sem, expr.args[0].value, _depth + 1)  # `torch.save(x, open("a.pt", "wb"))`
        return None
    if kind is cst.BinaryOperation and type(expr.right) is cst.SimpleString:
        value = expr.right.evaluated_value
        if not isinstance(value, str):
            return None
        if type(expr.operator) is cst.Divide or (type(expr.operator) is cst.Add and value.startswith(("/", "\\"))):
            return _base_name(value)
        return None
    if kind is cst.FormattedString and expr.parts and type(expr.parts[-1]) is cst.FormattedStringText:
        tail = expr.parts[-1].value
        return _base_name(tail) if ("/" in tail or len(expr.parts) == 1) else None
    return None


def _base_name(value: str) -> Optional[str]:
    name = value.replace("\\", "/").rstrip().rsplit("/", 1)[-1]
    if not name or name in (".", "..") or any(c in name for c in "{}%*"):
        return None  # a directory, or a template (`model_%d.pt`, `ckpt_{}.pth`)
    return name


def _option_defaults(sem) -> Dict[str, str]:
    """Option name -> the file name its default names: `parser.add_argument("--save",
    default="model.pt")` (also `dest=`, and a default such as `os.path.join(root, "model.pt")`), and `save = "model.pt"` in a class body (a config class
    read as `opt.save`). A name given two different defaults is left out."""
    found = sem.__dict__.get("_checkpoint_option_defaults")
    if found is not None:
        return found
    table: Dict[str, Optional[str]] = {}

    def put(name: str, value: Optional[str]) -> None:
        if value is not None:
            table[name] = value if table.get(name, value) == value else None

    for call in sem.index.nodes(cst.Call):
        if not method_call(call, "add_argument"):
            continue
        default = argument(call, 99, "default")
        if default is None:
            continue
        dest = argument(call, 99, "dest")
        names = [a.value.evaluated_value for a in call.args if a.keyword is None and type(a.value) is cst.SimpleString]
        if type(dest) is cst.SimpleString:
            name = dest.evaluated_value
        else:
            longs = [n for n in names if isinstance(n, str) and n.startswith("--")]
            shorts = [n for n in names if isinstance(n, str)]
            name = (longs or shorts or [""])[0].lstrip("-").replace("-", "_")
        if isinstance(name, str) and name.isidentifier():
            put(name, file_name(sem, default, 1))
    for klass in sem.index.nodes(cst.ClassDef):
        for statement in klass.body.body:
            if type(statement) is not cst.SimpleStatementLine:
                continue
            for small in statement.body:
                if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name \
                        and type(small.value) is cst.SimpleString:
                    put(small.targets[0].target.value, file_name(sem, small.value, 1))
    found = sem.__dict__["_checkpoint_option_defaults"] = {k: v for k, v in table.items() if v is not None}
    return found


# -- the saves of the project's other files --------------------------------------------------------
MAX_PROJECT_FILES = 200  # files of the project directories looked at for one linted file


@dataclass(frozen=True)
class ProjectSave:
    """A `torch.save` of another file of the project: `semantic` is that file's model, `file` its
    absolute path, `name` the file name it writes when known (`file_name`)."""

    save: Save
    semantic: object
    file: str
    name: Optional[str]

    def origin(self, project) -> str:
        """"train.py:58", recorded as an origin of `project` (the finding's related location)."""
        from torchlint.analysis.project import _position  # noqa: PLC0415 - only for a finding

        line, column = _position(self.semantic, self.save.call)
        origin = f"{project.display(self.file)}:{line}"
        project.origins[origin] = (self.file, line, column)
        return origin


def project_saves(sem) -> Tuple[ProjectSave, ...]:
    """Every `torch.save` of the other Python files in the linted file's project directories (its
    own directory, the directories it adds to `sys.path`, the project root and its `src/`: where
    the scripts that could write the checkpoint it loads sit), with what each saves. A file is
    parsed only when its text has `save(`; every file read is recorded for the cache key. Asked
    only for a `torch.load` this file's own saves do not explain."""
    found = sem.__dict__.get("_checkpoint_project_saves")
    if found is not None:
        return found
    items: List[ProjectSave] = []
    project = getattr(sem, "project", None)
    if project is not None:
        import os

        from torchlint.analysis import project as layer  # noqa: PLC0415 - the parse cache, only here

        files: List[str] = []
        for directory in project.search:
            try:
                names = sorted(os.listdir(directory))
            except OSError:
                continue
            for name in names:
                file = os.path.join(directory, name)
                if name.endswith(".py") and file != project.path and file not in files and os.path.isfile(file):
                    files.append(file)
        for file in files[:MAX_PROJECT_FILES]:
            text = layer._text_of(file)
            if text is None:
                continue
            project.read[file] = text[1]
            if "save(" not in text[0] or "torch" not in text[0]:
                continue
            parsed = layer._read(file)
            other = parsed.semantic if parsed is not None else None
            if other is None:
                continue
            for save in saves(other):
                items.append(ProjectSave(save, other, file, file_name(other, save.path)))
            if other.project is not None:
                project.read.update(other.project.read)
    found = sem.__dict__["_checkpoint_project_saves"] = tuple(items)
    return found


__all__ = ["Content", "ProjectSave", "Save", "UNKNOWN", "UNLOADABLE", "WEIGHTS", "argument", "file_name",
           "is_torch_load", "is_torch_save", "path_key", "project_saves", "saved_content", "saves", "saves_by_path"]
