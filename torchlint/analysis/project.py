"""The user's project: what a linted file imports from its own sibling modules.

A training script imports its model, helpers and configuration from files of the same project
(`from model import Net`, `import utils as U`, `from .layers import PatchEmbed`, a package's
`__init__.py` re-exporting a class). The value model asks this layer about such a name; the
layer finds the module the way Python would for a script of the project, parses it once per
process (LibCST, never executed), builds that file's own value model and summarises the name
once:

- a class: whether it is an `nn.Module`, the Dropout/BatchNorm layers it holds and the attributes
  holding them (what a subclass in another file inherits), what its `forward`
  returns (its layout: `x.flatten(2).transpose(1, 2)`; its last activation);
- a function: the value it returns, computed with generic arguments (a factory's model, a
  helper's permuted tensor, a loss);
- any other module-level name: its value (`device = torch.device(...)`).

Module search path, as for a script run from the project: the linted file's directory, the
project root (the nearest directory above it with pyproject.toml, setup.py, setup.cfg or .git,
as `torchlint run` decides), the root's `src/`, and directories the file adds with a literal
`sys.path.append/insert`. Files outside the root, in site-packages or a virtual environment are
installed packages, not the user's: they stay unknown. A module that does not parse is unknown
(its own lint reports the syntax error). Import cycles terminate: a name asked while it is being
summarised is unknown.

Every fact names where it comes from (`model.py:4`), so messages can say so; the files a lint
read are recorded (path and content hash) for the cache key. Switch the layer off with the
environment variable TORCHLINT_NO_PROJECT=1 (the seeded-bug harness measures it both ways).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Dict, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.value import (
    AG_NONE, AG_UNKNOWN, CONTAINER, MODULE, TENSOR_KINDS, UNKNOWN, ModuleInfo, Value,
)
from torchlint.analysis.project_files import (  # noqa: F401 (ABSENT, imported_text: the engine asks them here)
    _LIBRARY_ROOTS, ABSENT, MAX_FILES, ProjectFiles, _installed, _root_for, _text_of, digest_of, enabled,
    imported_text, sys_path_in_text, text_digest,
)
from torchlint.analysis.scopes import dotted_name

# -- facts ---------------------------------------------------------------------------------------
class Fact:
    """What a project module says of one name: `kind` "module class", "class", "function" or
    "value"; `value` (for a function its return value, for a value the value itself, for a module
    class an instance's value); `origin` ("model.py:4") and `location` (absolute path, line,
    column) of its definition; `name` as the user spells it."""

    __slots__ = ("kind", "value", "origin", "location", "name")

    def __init__(self, kind: str, value: Value, origin: str, location: Tuple[str, int, int], name: str) -> None:
        self.kind = kind
        self.value = value
        self.origin = origin
        self.location = location
        self.name = name


class _Parsed:
    __slots__ = ("path", "digest", "semantic", "names", "error", "lines", "text")

    def __init__(self, path: str, digest: str, semantic, error: Optional[str]) -> None:
        self.path = path
        self.digest = digest
        self.semantic = semantic
        self.names: Dict[str, Optional[Fact]] = {}
        self.error = error
        self.lines: Optional[Dict[str, int]] = None
        self.text = ""


# One per process: every project file parsed and summarised once, whatever file imports it (the
# most recent MAX_KEPT, so that a run over a large tree holds a bounded number of trees).
_PARSED: "OrderedDict[str, _Parsed]" = OrderedDict()
MAX_KEPT = 64
_SUMMARISING: set = set()


def _read(path: str) -> Optional[_Parsed]:
    found = _text_of(path)
    if found is None:
        return None
    text, digest = found
    known = _PARSED.get(path)
    if known is not None and known.digest == digest and _fresh(known):
        _PARSED.move_to_end(path)
        return known
    parsed = _Parsed(path, digest, None, None)
    parsed.text = text
    _keep(path, parsed)
    try:
        from torchlint import parsing

        module = parsing.parse_module(text)
    except Exception as error:  # a sibling that does not parse is unknown, never a crash
        parsed.error = str(error).splitlines()[0] if str(error) else type(error).__name__
        return parsed
    from torchlint.analysis.semantic import Semantic

    parsed.semantic = Semantic(module, path=path, project=FileProject(path, _root_for(path), module), text=text)
    return parsed


def _keep(path: str, parsed: _Parsed) -> None:
    replaced = _PARSED.get(path)
    if replaced is not None and replaced is not parsed:
        _forget(replaced)
    _PARSED[path] = parsed
    _PARSED.move_to_end(path)
    while len(_PARSED) > MAX_KEPT:
        _forget(_PARSED.popitem(last=False)[1])


def _forget(parsed: _Parsed) -> None:
    if parsed.semantic is not None:
        parsed.semantic.release()


def shared_semantic(path: Optional[str], text: str):
    """The semantic model of the file at `path` when this process has already built it for
    `text` (a project module another file imported): the engine lints it without parsing again."""
    if not path or not path.endswith(".py") or not enabled():
        return None
    known = _PARSED.get(os.path.abspath(path))
    if known is None or known.semantic is None or known.digest != text_digest(text) or not _fresh(known):
        return None
    return known.semantic


def _fresh(parsed: _Parsed) -> bool:
    """Whether the project files a kept model read are unchanged (its facts still hold)."""
    project = parsed.semantic.project if parsed.semantic is not None else None
    if project is None:
        return True
    if any(os.path.exists(file) for file in project.missing):
        return False
    return all(digest_of(file) == digest for file, digest in project.read.items())


def remember(path: Optional[str], text: str, semantic) -> bool:
    """Keep the engine's semantic model of a linted file, so a file linted later that imports
    it does not parse it again (each file parsed once per process). Whether it was kept."""
    if not path or not path.endswith(".py") or semantic.project is None:
        return False
    absolute = os.path.abspath(path)
    # Kept models are for the files of this directory, its packages and its siblings that come
    # next: those of other directories go, so that a long run holds few trees (the collector walks every one).
    below = os.path.dirname(os.path.dirname(absolute)) + os.sep  # this directory and its siblings
    for other in [p for p in _PARSED if not p.startswith(below)]:
        _forget(_PARSED.pop(other))
    parsed = _Parsed(absolute, text_digest(text), semantic, None)
    parsed.text = text
    _keep(absolute, parsed)
    return True


def for_file(path: Optional[str], module: cst.Module) -> Optional["FileProject"]:
    """The project view of the file at `path`, or None (no path, stdin, an installed package, or
    the layer is off)."""
    if not path or path.startswith("<") or path == "-" or not enabled():
        return None
    absolute = os.path.abspath(path)
    if _installed(absolute) or not os.path.isfile(absolute):
        return None
    return FileProject(absolute, _root_for(absolute), module)


class FileProject(ProjectFiles):
    """The project as one linted file sees it: where its imports resolve, and what it read."""

    def __init__(self, path: str, root: str, module: Optional[cst.Module] = None, text: Optional[str] = None) -> None:
        directory = os.path.dirname(path)
        added = _literal_sys_path(module, directory) if module is not None else sys_path_in_text(text or "", directory)
        super().__init__(path, root, added)
        self.read: Dict[str, str] = {}  # path -> content hash of every project file the lint used
        self.origins: Dict[str, Tuple[str, int, int]] = {}  # "model.py:4" -> (path, line, column)
        self._facts: Dict[str, Optional[Fact]] = {}
        self.missing: set = set()  # module files looked for next to this file and not found

    # -- the question the value model asks ---------------------------------------------------
    def fact(self, qualified: str) -> Optional[Fact]:
        """What the project says of `qualified` (`model.Net`, `..layers.PatchEmbed`), or None."""
        if qualified in self._facts:
            return self._facts[qualified]
        self._facts[qualified] = None
        found = None
        try:
            found = self._fact(qualified, 0)
        except RecursionError:
            found = None
        self._facts[qualified] = found
        if found is not None:
            self.origins[found.origin] = found.location
        return found

    def _fact(self, qualified: str, depth: int) -> Optional[Fact]:
        if depth > 8:
            return None
        level = len(qualified) - len(qualified.lstrip("."))
        parts = [p for p in qualified[level:].split(".") if p]
        if not parts or (level == 0 and parts[0] in _LIBRARY_ROOTS):
            return None
        for split in range(len(parts) - 1, -1 if level else 0, -1):
            file = self._module_file(parts[:split], level)
            if file is None:
                continue
            rest = parts[split:]
            if len(rest) != 1:
                return None
            return self._name_in(file, rest[0], depth)
        if level == 0:
            # Not the user's today; created later, it changes what this file's model knows.
            self.missing.add(os.path.join(os.path.dirname(self.path), parts[0] + ".py"))
        return None

    def _name_in(self, file: str, name: str, depth: int) -> Optional[Fact]:
        if file == self.path:
            return None
        if len(self.read) >= MAX_FILES and file not in self.read:
            return None
        parsed = _read(file)
        if parsed is None:
            return None
        self.read[file] = parsed.digest
        if parsed.semantic is None:
            return None
        if name in parsed.names:
            fact = parsed.names[name]
        else:
            key = (file, name)
            if key in _SUMMARISING:
                return None  # an import cycle: the name is being summarised further up
            _SUMMARISING.add(key)
            try:
                fact = _summarise(parsed, name, self, depth)
            except RecursionError:
                fact = None
            finally:
                _SUMMARISING.discard(key)
            parsed.names[name] = fact
        if fact is not None:
            inner = parsed.semantic.project
            if inner is not None:
                self.read.update(inner.read)
                self.origins.update(inner.origins)
        return fact

    def display(self, file: str) -> str:
        """`file` as a message names it: from the project root (`model.py`, `models/layers.py`),
        the same whichever file of the project asks."""
        try:
            relative = os.path.relpath(file, self.root)
        except ValueError:
            relative = file
        return relative.replace(os.sep, "/")

    def elsewhere(self, node: cst.CSTNode) -> Optional[str]:
        """For a node of another project file this lint read (the `.transpose()` a helper
        returns), where it is ("utils.py:5"), recorded as an origin; else None."""
        for file in self.read:
            parsed = _PARSED.get(file)
            if parsed is None or parsed.semantic is None or node not in parsed.semantic.index.order:
                continue
            line, column = _position(parsed.semantic, node)
            origin = f"{self.display(file)}:{line}"
            self.origins[origin] = (file, line, column)
            return origin
        return None


def _literal_sys_path(module: cst.Module, directory: str) -> List[str]:
    """Directories a file adds with `sys.path.append("...")` / `sys.path.insert(0, "...")`."""
    found = []
    for statement in module.body:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            call = small.value if type(small) is cst.Expr else None
            if type(call) is not cst.Call or type(call.func) is not cst.Attribute:
                continue
            func = call.func
            if func.attr.value not in ("append", "insert") or type(func.value) is not cst.Attribute:
                continue
            owner = func.value
            if owner.attr.value != "path" or type(owner.value) is not cst.Name or owner.value.value != "sys":
                continue
            argument = call.args[-1].value if call.args else None
            if type(argument) is cst.SimpleString:
                text = argument.evaluated_value
                if isinstance(text, str):
                    found.append(text if os.path.isabs(text) else os.path.join(directory, text))
    return found


# -- summaries -----------------------------------------------------------------------------------
def _summarise(parsed: _Parsed, name: str, asker: FileProject, depth: int) -> Optional[Fact]:
    sem = parsed.semantic
    module = sem.module
    project: FileProject = sem.project
    where = asker.display(parsed.path)
    definition = None
    for statement in _top_level(module):
        if type(statement) in (cst.ClassDef, cst.FunctionDef) and statement.name.value == name:
            definition = statement
        elif type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                if type(small) in (cst.Import, cst.ImportFrom):
                    qualified = _imported_as(small, name)
                    if qualified is not None:
                        definition = ("import", qualified)
                elif type(small) in (cst.Assign, cst.AnnAssign) and _assigns(small, name):
                    definition = small
    if definition is None:
        # `from .resnet import *` in a package's __init__.py re-exports every name of resnet.py.
        for module_name in reversed(sem.scopes.star_imports if sem.scopes.bindings is not None else []):
            found = project._fact(module_name + name if module_name.endswith(".") else f"{module_name}.{name}",
                                  depth + 1)
            if found is not None:
                return found
        # `from models import layers`: a submodule of a package is not summarised as a name.
        return None
    if type(definition) is tuple:
        return project._fact(definition[1], depth + 1)
    line, column = _top_level_line(parsed, name), 1
    origin = f"{where}:{line}"
    location = (parsed.path, line, column)
    values = sem.values
    if type(definition) is cst.ClassDef:
        if not sem.is_module_class(definition):
            return Fact("class", Value(UNKNOWN, AG_UNKNOWN), origin, location, name)
        instance = values.instance_of(definition, definition)
        return Fact("module class", portable(values, instance, origin, f"`{name}`"), origin, location, name)
    if type(definition) is cst.FunctionDef:
        returned = values._returns(definition, values.generic_frame(definition))
        return Fact("function", portable(values, returned, origin, f"built by `{name}()`"), origin, location, name)
    value = definition.value
    if value is None:
        return None
    return Fact("value", portable(values, values.of(value), origin, f"`{name}`"), origin, location, name)


def _top_level(module: cst.Module):
    for statement in module.body:
        yield statement
        if type(statement) is cst.If:  # `if TYPE_CHECKING:` / `try:` imports: one level in
            yield from statement.body.body
        elif type(statement) is cst.Try:
            yield from statement.body.body


def _imported_as(statement, name: str) -> Optional[str]:
    if type(statement.names) is cst.ImportStar:
        return None
    for alias in statement.names:
        bound = alias.asname.name.value if alias.asname is not None and type(alias.asname.name) is cst.Name else None
        spelled = dotted_name(alias.name)
        if spelled is None:
            continue
        if type(statement) is cst.Import:
            if (bound or spelled.split(".")[0]) == name and bound is not None:
                return None  # a module alias (`import model as m`) is not a value
            continue
        if (bound or spelled) != name:
            continue
        base = dotted_name(statement.module) if statement.module is not None else ""
        dots = "." * len(statement.relative)
        return f"{dots}{base}.{spelled}" if base else f"{dots}{spelled}"
    return None


def _assigns(statement, name: str) -> bool:
    targets = [t.target for t in statement.targets] if type(statement) is cst.Assign else [statement.target]
    return any(type(t) is cst.Name and t.value == name for t in targets)


_TOP_LEVEL = __import__("re").compile(
    r"^(?:(?:async[ \t]+)?def[ \t]+(\w+)|class[ \t]+(\w+)|(\w+)[ \t]*(?::[^=\n]*)?=(?!=))", __import__("re").M)


def _top_level_line(parsed: _Parsed, name: str) -> int:
    """The line of the last top-level `def`/`class`/assignment of `name` (what an import of it
    gets), from the text: no code generation for a position."""
    lines = parsed.lines
    if lines is None:
        lines = {}
        code = parsed.text  # the module's own text: `Module.code` would generate it again
        for match in _TOP_LEVEL.finditer(code):
            spelled = match.group(1) or match.group(2) or match.group(3)
            lines[spelled] = code.count("\n", 0, match.start()) + 1
        parsed.lines = lines
    return lines.get(name, 1)


def _position(sem, node: cst.CSTNode) -> Tuple[int, int]:
    from torchlint.positions import node_ranges

    try:
        found = node_ranges(sem.module, [node], sem.index, sem.text).get(node)
    except Exception:
        found = None
    if found is None:
        return 1, 1
    (line, column), _ = found
    return line, column + 1


def portable(values, value: Value, origin: str, label: str = "") -> Value:
    """`value` as another file may hold it: a module of a project class becomes a module whose
    facts (the Dropout/BatchNorm layer it holds, what its forward returns, its last activation)
    are written into it, with `origin`; a parameter alias of the other file is dropped."""
    kind = value.kind
    if kind == MODULE and value.module is not None:
        info = value.module
        stochastic = values.stochastic_layer(value)
        activation = values.output_activation(value)
        output = None
        if info.klass is not None:
            forward = values.method(info.klass, "forward")
            if forward is not None:
                returned = values._returns(forward, values.generic_frame(forward))
                if returned.kind in TENSOR_KINDS:
                    # AG_NONE: a forward that runs under no_grad (a frozen feature extractor) or
                    # detaches; anything else is decided by the caller's grad mode.
                    autograd = AG_NONE if returned.autograd == AG_NONE else AG_UNKNOWN
                    output = Value(returned.kind, autograd, returned.layout, shape=returned.shape)
        held = info.held
        described = False
        if info.klass is not None:
            # Which attributes hold those layers (a subclass in another file inherits them unless
            # it assigns the attribute again); those inherited from a further file keep its origin.
            own = tuple((name, f"{layer} ({origin})") for name, layer in values.held_stochastic(info.klass))
            inherited = tuple((name, layer) for name, layer in values.inherited_stochastic(info.klass)
                              if all(name != other for other, _ in own))
            held = own + inherited
            if stochastic is not None and not own and inherited and stochastic == inherited[0][1]:
                klass = f"`{info.klass.name.value}`"
                where = f"{label}, {origin}" if label and label != klass else origin
                stochastic = f"{stochastic}, inherited by {klass} ({where})"  # it names its own origin
                described = True
        if stochastic is not None and not described:
            stochastic = f"{stochastic} ({label}, {origin})" if label and label not in stochastic \
                else f"{stochastic} ({origin})"
        qualified = info.qualified if info.klass is None else None
        return Value(MODULE, AG_NONE, module=ModuleInfo(qualified, None, stochastic, info.stateless, activation,
                                                        output=output, origin=origin, held=held),
                     device=value.device, dtype=value.dtype, site=value.site)
    if kind == CONTAINER and value.items is not None:
        return value.but(items=tuple(portable(values, item, origin, label) for item in value.items), alias=None,
                         element=None if value.element is None else portable(values, value.element, origin, label))
    if value.alias is not None:
        return value.but(alias=None)
    return value


# -- the pre-filter's view -----------------------------------------------------------------------
# A rule's triggers (`Dropout` for TL107) may stand in the file that defines the model, not in the
# script that uses it: the engine looks for them in the project files a file imports as well.
