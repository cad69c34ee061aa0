"""The value model: one abstract interpretation of a file, computed on demand and cached.

`Values.of(expr)` is the abstract value (`torchlint.analysis.value.Value`) of an expression at
its place in the file. Every expression form is evaluated by one function here, once per place
and calling context, so every rule sees the same facts:

- names: the join of the definitions that may reach the use (`flow.Flow`), each evaluated where
  it was made; names of enclosing scopes join all their bindings there;
- `self.attr` and `obj.attr` of a same-file class: the join of every value the class's methods
  (and its same-file bases) assign to that attribute;
- calls: torch's API by its qualified name and tensor methods by the receiver's kind (tables in
  `torch_api`); a same-file function or method is interpreted with its arguments' values (a
  summary per distinct argument values, so a helper's result depends on what each call passes);
  calling a module runs its class's `forward` the same way;
- a parameter, outside a specific call, is the join of what every call of its function in this
  file passes (`train(model, loader)` called from `main` with `Net()`), or what its annotation
  and default say for entry points (`forward`, functions nothing here calls).

Grad mode is part of the context: a value is made under the grad mode in force where it was
made (`with torch.no_grad():`, a decorator, or — through the calling context — the grad mode at
every call of its function).

The facets that divide it live in mixins of `Values`: `parameters` (what a parameter is outside
a call, grad modes of calling contexts, call sites), `classes` (attributes, classes, instances),
`project_values` (names imported from the user's other files), `torch_semantics` (torch's API);
`frames` holds the calling context and argument binding. This module keeps the evaluator: the
memo and cycle solver, names, operators, subscripts, iteration and calls.

Cycles (a loop-carried `h = cell(x, h)`, recursive helpers) are solved by iteration: a value that
depends on itself starts at bottom and is recomputed until it stops changing, then widened to
unknown if it does not settle. Only what read the cycle's provisional value is recomputed.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.classes import ClassValues
from torchlint.analysis.flow import Def, Flow
from torchlint.analysis.frames import Frame, _all_params, _bind, _positional_params  # noqa: F401 (re-exported)
from torchlint.analysis.parameters import ParameterValues
from torchlint.analysis.project_values import ProjectValues
from torchlint.analysis.shapes import Dim
from torchlint.analysis.torch_semantics import TorchSemantics, _int, _looks_like_a_tensor_call, string_text
from torchlint.analysis.value import (
    AG_GRAPH, AG_LEAF, AG_MAYBE, AG_NONE, AG_REQUIRES, AG_UNKNOWN, BATCH, BOTTOM, BOTTOM_VALUE, CLASS,
    CONTAINER, CONTIGUOUS, CRITERION, FUNCTION, HOST, INPUT, INSTANCE, LAYOUT_CONTIGUOUS, LAYOUT_NOT_KNOWN,
    LOADER, LOSS, MODULE, NONE_VALUE, NUMBER, NUMBER_VALUE, OPTIMIZER, PERMUTED, STRING, STRING_VALUE, TENSOR,
    TENSOR_KINDS, UNKNOWN, UNKNOWN_VALUE, Device, Layout, ModuleInfo, Value, identity, join, join_all,
)
from torchlint.analysis.value import GRAD_INHERITED, GRAD_OFF, GRAD_ON, GRAD_UNKNOWN  # noqa: F401 (re-exported)

_MAX_ITERATIONS = 4  # a cycle's value is recomputed this often before it is widened

# Methods only tensors have (numpy's `transpose` and `view` mean other things, but numpy names
# resolve to `numpy.*` before this is asked): an unknown receiver calling one is a tensor.
_DUCK_TENSOR_METHODS = frozenset("permute transpose t contiguous view view_as movedim moveaxis swapaxes "
                                 "swapdims detach unsqueeze masked_fill softmax log_softmax sigmoid".split())


class Values(ParameterValues, ClassValues, ProjectValues, TorchSemantics):
    """The value model of one module (see the module docstring). Built lazily by `Semantic`."""

    def __init__(self, sem) -> None:
        self.sem = sem  # a cycle with `sem._values`: `Semantic.release()` breaks it
        self.index = sem.index
        self.scopes = sem.scopes
        self.flow = Flow(sem.index, sem.scopes)
        self._memo: Dict[tuple, Value] = {}
        self._in_progress: Dict[tuple, int] = {}  # key -> its depth in _lows
        self._lows: List[int] = []
        self._tentative: Dict[tuple, int] = {}
        self._tentative_at: List[Optional[List[tuple]]] = []
        self._provisional: Dict[tuple, Value] = {}
        self._heads: set = set()
        self._generic_frames: Dict[int, Frame] = {}
        self._contexts: Dict[int, set] = {}
        self._frame_numbers: Dict[tuple, int] = {}
        self._class_writes: Dict[int, Dict[str, list]] = {}
        self._functions_by_name: Optional[Dict[str, List[cst.FunctionDef]]] = None
        self._classes_by_name: Optional[Dict[str, List[cst.ClassDef]]] = None
        self._call_sites: Dict[int, list] = {}
        self._escapes: Dict[int, bool] = {}
        self._grad_cache: Dict[tuple, str] = {}
        self._lexical_grad: Dict[int, Optional[str]] = {}  # id(statement line) -> its lexical grad mode
        self._frame_of_scope: Dict[int, Frame] = {}
        self._module_frame = Frame(None, None, GRAD_ON)

    # ==========================================================================================
    # public questions
    # ==========================================================================================
    def of(self, expr: cst.CSTNode) -> Value:
        """The value of `expr` where it stands, outside any specific call of its function."""
        return self.value(expr, self.frame_of(expr))

    def frame_of(self, node: cst.CSTNode) -> Frame:
        """The generic frame of the function that evaluates `node`."""
        function = self.sem.function_of(node)
        return self.generic_frame(function)

    def grad_mode(self, node: cst.CSTNode, frame: Optional[Frame] = None) -> str:
        """The grad mode `node` runs under: GRAD_OFF, GRAD_ON, GRAD_UNKNOWN or GRAD_INHERITED."""
        lexical = self.lexical_grad_mode(node)
        if lexical is not None:
            return lexical
        if frame is None:
            frame = self.frame_of(node)
        return frame.grad

    def call_sites(self, function: cst.FunctionDef) -> List[Tuple[cst.Call, Dict[int, cst.BaseExpression]]]:
        """The calls of `function` in this file, each with the argument expression bound to each
        parameter (by the parameter's id)."""
        return [(call, binding) for call, binding, _ in self._sites(function)]

    def definition_values(self, name: cst.Name) -> Optional[List[Value]]:
        """The value each definition that may reach `name` gives it (for a name of an enclosing
        scope, each of its bindings there); None when that is not known."""
        defs = self.flow.reaching(name)
        frame = self.frame_of(name)
        if defs is None:
            return None
        if defs:
            return [self.definition_value(d, frame) for d in defs]
        found = self.scopes.binding_scope(name.value, name)
        if found is None or any(b.kind == "import" for b in found[1]):
            return None
        scope = found[0]
        outer = self.generic_frame(scope if type(scope) is cst.FunctionDef else None)
        return [self.definition_value(d, outer) for d in self.flow.bindings(scope, name.value)] or None

    def element_of(self, value: Value, path: Tuple[int, ...]) -> Value:
        """The element at `path` (tuple indexes) of `value`, as unpacking it would give."""
        return self._element_at(value, path) if path else value

    def stochastic_layer(self, value: Value) -> Optional[str]:
        """For a module, a description of the Dropout/BatchNorm layer it certainly holds."""
        info = value.module
        if info is None:
            return None
        if info.stochastic is not None:
            return info.stochastic
        if info.klass is not None:
            return self._class_stochastic(info.klass)
        if info.parts:
            for part in info.parts:
                found = self.stochastic_layer(part)
                if found is not None:
                    return found
        return None

    def is_weightless_torch_loss(self, value: Value) -> bool:
        """A torch.nn loss built here without a weight (`nn.CrossEntropyLoss()`, no `weight=`,
        `pos_weight=` nor positional argument, where the weight goes): it has no parameters or
        buffers, so a device move moves nothing (on torch 2.13 `.cuda()` of it works without CUDA)."""
        site = value.site
        if value.kind != CRITERION or type(site) is not cst.Call:
            return False
        if not (self.sem.qualified_name(site.func) or "").startswith("torch.nn."):
            return False
        return all(a.keyword is not None and not a.star and a.keyword.value not in ("weight", "pos_weight")
                   for a in site.args)

    def stays_behind(self, value: Value) -> bool:
        """A module not moved anywhere that has parameters or buffers to move: not a stateless
        layer (`nn.ReLU`, `nn.Dropout`), nor a container whose parts are all moved or stateless."""
        if value.kind != MODULE or value.device is not None:
            return False
        info = value.module
        if info is None:
            return True
        if info.parts is not None and info.qualified in api.MODULE_CONTAINERS:
            return any(self.stays_behind(part) for part in info.parts) if info.parts else False
        member = info.class_name
        if info.qualified is not None and (info.stateless or member in api.DROPOUT_MODULES):
            return False
        return True

    def output_activation(self, value: Value) -> Optional[str]:
        """For a module, the activation ("softmax", "sigmoid") its output always comes from."""
        info = value.module
        if info is None:
            return None
        if info.activation is not None:
            return info.activation
        if info.klass is not None:
            forward = self.method(info.klass, "forward")
            if forward is None:
                return None
            result = self._returns(forward, self.generic_frame(forward))
            return None if result.activation is None else result.activation[0]
        return None

    def method(self, klass: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
        """`klass`'s method `name`, looked up through its same-file bases."""
        for each in self._mro(klass):
            for statement in each.body.body:
                if type(statement) is cst.FunctionDef and statement.name.value == name:
                    return statement
        return None

    def class_attribute(self, klass: cst.ClassDef, name: str) -> Value:
        """The join of every value `klass` (and its same-file bases) assigns to `self.<name>`."""
        key = ("attr", id(klass), name)
        return self._memoized(key, self._compute_class_attribute, klass, name)

    def attribute_writes(self, klass: cst.ClassDef, name: str) -> list:
        """(value expression or None, target node, path, method) for every write of `self.<name>`
        in `klass` and its same-file bases."""
        found = []
        for each in self._mro(klass):
            found.extend(self._writes_of(each).get(name, ()))
        return found

    # ==========================================================================================
    # the evaluator
    # ==========================================================================================
    def value(self, node: cst.CSTNode, frame: Frame) -> Value:
        key = (id(node), frame.key)
        found = self._memo.get(key)
        if found is not None:
            if self._tentative:
                self._note_dependency(key)
            return found
        handler = _HANDLERS.get(type(node))
        if handler is None:
            return UNKNOWN_VALUE
        # The handler itself rather than a closure that looks it up: two Python frames fewer per
        # level of an evaluation, and evaluations nest deeply.
        return self._solve(key, handler, self, node, frame)

    def _memoized(self, key: tuple, compute, *arguments) -> Value:
        """`compute(*arguments)`, once per key (a function and its arguments rather than a closure:
        a Python frame fewer per level of a nested evaluation)."""
        found = self._memo.get(key)
        if found is not None:
            if self._tentative:
                self._note_dependency(key)
            return found
        return self._solve(key, compute, *arguments)

    # Each value being computed sits at a depth of `_lows`, which holds the lowest depth of an
    # unfinished value it has read (its own depth when none). A finished value whose low is
    # below its depth read a provisional value of a cycle still being solved: it is kept as
    # *tentative* (`_tentative`: key -> that depth; `_tentative_at[depth]`: the keys) and is
    # dropped when that cycle head is recomputed. Every other finished value is final and
    # survives the head's iterations, so a cycle recomputes only what depends on it.
    def _solve(self, key: tuple, compute, *arguments) -> Value:
        in_progress = self._in_progress
        lows = self._lows
        entered = in_progress.get(key)
        if entered is not None:
            self._heads.add(key)
            if entered < lows[-1]:
                lows[-1] = entered
            return self._provisional.get(key, BOTTOM_VALUE)
        depth = len(lows)
        in_progress[key] = depth
        lows.append(depth)
        tentative_at = self._tentative_at
        tentative_at.append(None)  # its list of keys, made when the first one turns tentative here
        heads = self._heads
        finished = False
        try:
            result = compute(*arguments)
            iterations = 1
            while key in heads:
                heads.discard(key)
                previous = self._provisional.get(key, BOTTOM_VALUE)
                if result == previous:
                    break
                if iterations >= _MAX_ITERATIONS:
                    result = UNKNOWN_VALUE
                    break
                self._provisional[key] = result
                self._drop_tentative(tentative_at[depth])
                result = compute(*arguments)
                iterations += 1
            finished = True
        finally:
            del in_progress[key]
            if heads:  # empty unless a cycle is being solved: most solves skip these
                heads.discard(key)
            if self._provisional:
                self._provisional.pop(key, None)
            low = lows.pop()
            waiting = tentative_at.pop()
            if not finished:
                self._drop_tentative(waiting)
        if low < depth:
            # Still depends on an unfinished head below: so do the values that depended on this
            # one, and the caller.
            tentative = self._tentative
            below = tentative_at[low]
            if below is None:
                below = tentative_at[low] = []
            if waiting:
                for each in waiting:
                    tentative[each] = low
                    below.append(each)
            tentative[key] = low
            below.append(key)
            if low < lows[-1]:
                lows[-1] = low
        elif waiting:
            tentative = self._tentative
            for each in waiting:
                del tentative[each]
        self._memo[key] = result
        return result

    def _note_dependency(self, key: tuple) -> None:
        """A finished value was read: if it is tentative, so is the value being computed."""
        below = self._tentative.get(key)
        if below is not None and self._lows and below < self._lows[-1]:
            self._lows[-1] = below

    def _drop_tentative(self, waiting: Optional[List[tuple]]) -> None:
        """Forget the values that read a head's provisional value (its list in `_tentative_at`)."""
        if not waiting:
            return
        memo = self._memo
        tentative = self._tentative
        for each in waiting:
            memo.pop(each, None)
            tentative.pop(each, None)
        waiting.clear()

    # -- literals and containers ---------------------------------------------------------------
    def _number(self, node, frame) -> Value:
        return NUMBER_VALUE

    def _string(self, node, frame) -> Value:
        if type(node) is cst.SimpleString:
            text = string_text(node)
            if text is not None:
                return Value(STRING, AG_NONE, detail=text)
        return STRING_VALUE

    def _sequence(self, node, frame) -> Value:
        items = []
        starred = False
        for element in node.elements:
            if type(element) is cst.StarredElement:
                starred = True
                items.append(self._iterate(self.value(element.value, frame)))
            else:
                items.append(self.value(element.value, frame))
        element_value = join_all(items) if items else BOTTOM_VALUE
        return Value(CONTAINER, AG_NONE, items=None if starred else tuple(items),
                     element=None if element_value.kind == BOTTOM else element_value, site=node)

    def _set(self, node, frame) -> Value:
        items = [self.value(e.value, frame) for e in node.elements]
        return Value(CONTAINER, AG_NONE, element=join_all(items) if items else None, site=node)

    def _dict(self, node, frame) -> Value:
        values = [self.value(e.value, frame) for e in node.elements if type(e) is cst.DictElement]
        return Value(CONTAINER, AG_NONE, element=join_all(values) if values else None, site=node, detail="dict")

    def _comprehension(self, node, frame) -> Value:
        return Value(CONTAINER, AG_NONE, element=self.value(node.elt, frame), site=node)

    def _dict_comprehension(self, node, frame) -> Value:
        return Value(CONTAINER, AG_NONE, element=self.value(node.value, frame), site=node, detail="dict")

    def _lambda(self, node, frame) -> Value:
        return Value(FUNCTION, AG_NONE, detail=node)

    def _if_expression(self, node, frame) -> Value:
        return join(self.value(node.body, frame), self.value(node.orelse, frame))

    def _boolean(self, node, frame) -> Value:
        return join(self.value(node.left, frame), self.value(node.right, frame))

    def _walrus(self, node, frame) -> Value:
        return self.value(node.value, frame)

    # -- names ---------------------------------------------------------------------------------
    def _name(self, node: cst.Name, frame: Frame) -> Value:
        spelled = node.value
        if spelled == "None":
            return NONE_VALUE
        if spelled in ("True", "False"):
            return NUMBER_VALUE
        defs = self.flow.reaching(node)
        if defs is None:
            return UNKNOWN_VALUE
        if not defs:
            return self._outer_name(node, frame)
        if all(d.kind == "import" for d in defs):
            return self._imported_value(node)
        if len(defs) == 1:  # the usual case, without the frames of a join over a generator
            value = self.definition_value(defs[0], frame)
        else:
            value = join_all(self.definition_value(d, frame) for d in defs)
        if value.kind == UNKNOWN and len(defs) > 1:
            value = self._loss_after_numeric_start(defs, frame, value)
        if value.kind == MODULE:
            value = self._after_statements_on(node, defs, value, frame)
        if value.shape is None and (value.kind in TENSOR_KINDS or value.kind == INPUT):
            observed = self._observed_shape(node, defs)
            if observed is not None:
                value = value.but(shape=observed)
        return value

    def _loss_after_numeric_start(self, defs: Tuple[Def, ...], frame: Frame, joined: Value) -> Value:
        """`loss = 0.0`, then a loss assigned in a loop: after the loop it is the loss (the number
        only when the loop never ran), as the report or the backward that reads it assumes."""
        rest = [d for d in defs if not (d.kind == "assign" and d.path == ()
                                        and type(d.value) in (cst.Integer, cst.Float))]
        if not rest or len(rest) == len(defs):
            return joined
        value = join_all(self.definition_value(d, frame) for d in rest)
        return value if value.kind == LOSS else joined

    def _after_statements_on(self, use: cst.Name, defs: Tuple[Def, ...], value: Value, frame: Frame) -> Value:
        """A module changed in place by bare statements between its definition and this use:
        `model.to(device)`, `model.cuda()`, `model.half()` (nn.Module moves and casts itself). A
        statement on some paths only, or later in a loop around the use, makes the device and
        dtype unknown."""
        statements = self._module_statements().get((id(self.sem.function_of(use)), use.value))
        if not statements:
            return value
        order = self.index.order
        here = order[use]
        start = min(order[d.statement] for d in defs)
        loops = None
        for call, method in statements:
            position = order[call]
            if self.index.contains(call, use):
                continue
            if position > here:
                if loops is None:
                    loops = self.sem.enclosing_loops(use)
                if any(self.index.contains(loop, call) for loop in loops):
                    value = value.but(device=None, dtype=None)
                continue
            if position < start:
                continue
            if len(defs) != 1 or not self.dominates(self.sem.statement_of(call), use):
                value = value.but(device=None, dtype=None)
                continue
            changed = self._module_method(value, method, call, frame)
            value = changed if changed is not None and changed.kind == MODULE else value.but(device=None, dtype=None)
        return value

    def _module_statements(self) -> Dict[tuple, list]:
        """(function id, name) -> the bare statements `name.<move or cast>(...)` there, in order."""
        found = self.__dict__.get("_module_statement_table")
        if found is not None:
            return found
        found = {}
        methods = api.MODULE_DEVICE_METHODS | api.MODULE_DTYPE_METHODS | {"to", "type", "to_empty"}
        for call in self.index.nodes(cst.Call):
            func = call.func
            if type(func) is not cst.Attribute or type(func.value) is not cst.Name or func.attr.value not in methods:
                continue
            outer: cst.CSTNode = call
            parent = self.index.parent.get(outer)
            while type(parent) is cst.Attribute and type(self.index.parent.get(parent)) is cst.Call \
                    and self.index.parent[parent].func is parent:
                outer = self.index.parent[parent]
                parent = self.index.parent.get(outer)
            if type(parent) is not cst.Expr:
                continue
            key = (id(self.sem.function_of(call)), func.value.value)
            found.setdefault(key, []).append((call, func.attr.value))
        for calls in found.values():
            calls.sort(key=lambda item: self.index.order[item[0]])
        self.__dict__["_module_statement_table"] = found
        return found

    def dominates(self, statement: Optional[cst.CSTNode], node: cst.CSTNode) -> bool:
        """Whether `statement` certainly runs before `node` each time `node` runs: it stands
        earlier in a block that holds `node` (however deeply nested, in the same function)."""
        if statement is None:
            return False
        parent_of = self.index.parent
        line = parent_of.get(statement)
        holder = line if isinstance(statement, cst.BaseSmallStatement) and type(line) is cst.SimpleStatementLine \
            else statement
        block = parent_of.get(holder)
        body = getattr(block, "body", None)
        if not isinstance(body, (list, tuple)) or self.sem.function_of(statement) is not self.sem.function_of(node):
            return False
        position = next((i for i, item in enumerate(body) if item is holder), None)
        if position is None:
            return False
        child = node
        for ancestor in self.sem.ancestors(node):
            if ancestor is block:
                later = next((i for i, item in enumerate(body) if item is child), None)
                return later is not None and later > position
            if type(ancestor) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
                return False
            child = ancestor
        return False

    def _observed_shape(self, use: cst.Name, defs: Tuple[Def, ...]) -> Optional[tuple]:
        """`B, N, C = x.shape` (or `x.size()`) earlier in the function, for this same value of `x`:
        the shape the code read off it."""
        function = self.sem.function_of(use)
        table = self._shape_reads(function)
        reads = table.get(use.value)
        if not reads:
            return None
        position = self.index.order[use]
        wanted = tuple(id(d.target if d.target is not None else d.statement) for d in defs)
        found = None
        for assign, dims in reads:
            if self.index.order[assign] >= position:
                break
            there = self.flow.reaching_at(assign, use.value)
            if there is not None and tuple(id(d.target if d.target is not None else d.statement)
                                           for d in there) == wanted:
                found = dims
        return found

    def _shape_reads(self, function: Optional[cst.CSTNode]) -> Dict[str, list]:
        key = id(function)
        cache = self.__dict__.setdefault("_shape_read_cache", {})
        found = cache.get(key)
        if found is not None:
            return found
        found = {}
        scope = function if function is not None else self.sem.module
        assigns = self.index.descendants(scope, cst.Assign) if function is not None else self.index.nodes(cst.Assign)
        for assign in assigns:
            if len(assign.targets) != 1 or type(assign.targets[0].target) not in (cst.Tuple, cst.List):
                continue
            if self.sem.function_of(assign) is not function:
                continue
            value = assign.value
            if type(value) is cst.Call and not value.args and type(value.func) is cst.Attribute \
                    and value.func.attr.value == "size":
                value = value.func
            elif not (type(value) is cst.Attribute and value.attr.value == "shape"):
                continue
            tensor = value.value
            if type(tensor) is not cst.Name:
                continue
            names = [element.value for element in assign.targets[0].target.elements]
            if all(type(name) is cst.Name for name in names) and len({n.value for n in names}) == len(names) \
                    and not any(type(e) is cst.StarredElement for e in assign.targets[0].target.elements):
                found.setdefault(tensor.value, []).append((assign, tuple(Dim(name, assign) for name in names)))
        cache[key] = found
        return found

    def _outer_name(self, node: cst.Name, frame: Frame) -> Value:
        """A name no binding of its own scope reaches: an import, a global, a closure variable,
        a builtin."""
        spelled = node.value
        found = self.scopes.binding_scope(spelled, node)
        if found is None:
            fact = self._star_imported(node) if self.scopes.star_imports else None
            if fact is not None and fact.kind == "value":
                return fact.value
            return UNKNOWN_VALUE
        scope, bindings = found
        if any(b.kind == "import" for b in bindings):
            return self._imported_value(node)  # modules are resolved by their qualified names
        if type(scope) is cst.Module and not self._module_statements().get((id(None), spelled)):
            at_calls = self._global_at_calls(node, spelled)
            if at_calls is not None:
                return at_calls
        definitions = self.flow.bindings(scope, spelled)
        if not definitions:
            return UNKNOWN_VALUE
        outer = self.generic_frame(scope if type(scope) is cst.FunctionDef else None)
        value = join_all(self.definition_value(d, outer) for d in definitions)
        if value.kind == MODULE and self._module_statements().get(
                (id(scope if type(scope) is cst.FunctionDef else None), spelled)):
            value = value.but(device=None, dtype=None)  # moved or cast in place somewhere out there
        return value

    def _global_at_calls(self, node: cst.Name, spelled: str) -> Optional[Value]:
        """A global read in a function that only module-level code calls: its value where each
        call runs (a script that rebinds `model` between two parts sees the right one)."""
        function = self.sem.function_of(node)
        if function is None:
            return None
        sites = self._sites(function)
        if not sites or self._escapes_function(function) or any(caller.function is not None
                                                               for _, _, caller in sites):
            return None
        values = []
        for call, _, _ in sites:
            definitions = self.flow.reaching_at(call, spelled)
            if not definitions:
                return None
            values.extend(self.definition_value(d, self._module_frame) for d in definitions)
        return join_all(values)

    def definition_value(self, definition: Def, frame: Frame) -> Value:
        """The value `definition` gives its name, made in `frame`."""
        key = ("def", id(definition.target if definition.target is not None else definition.statement), frame.key)
        found = self._memo.get(key)  # `_memoized` inlined: this sits on every name's path
        if found is not None:
            if self._tentative:
                self._note_dependency(key)
            return found
        return self._solve(key, self._definition_value, definition, frame)

    def _definition_value(self, definition: Def, frame: Frame) -> Value:
        kind = definition.kind
        if kind == "assign":
            if definition.value is None:
                return UNKNOWN_VALUE
            value = self.value(definition.value, frame)
            if definition.path is None:
                return Value(CONTAINER, AG_NONE, element=self._iterate(value))
            value = self._element_at(value, definition.path)
            if (value.kind in (UNKNOWN, INPUT) or value.kind in (TENSOR, LOSS) and not value.requires_grad
                    or value.kind == TENSOR and value.is_zero_dim) and self._backpropagated(definition):
                # `loss = outputs.loss; loss.backward()`: whatever the analysis makes of where it
                # came from (an imported model's output looks graph-free only because the model
                # is not seen), a value a backward pass runs on is a loss that requires grad; and a
                # tensor with a graph that a backward runs on (`loss = model(x).pow(2).mean()`)
                # is a loss too when it is a scalar, though no criterion made it.
                if value.kind in (UNKNOWN, INPUT):
                    return Value(LOSS, AG_REQUIRES, LAYOUT_CONTIGUOUS, site=definition.value)
                if value.requires_grad:  # a scalar (`outs.append(out); out.sum().backward()` keeps outputs)
                    return value.but(kind=LOSS)
                return value.but(kind=LOSS, autograd=AG_REQUIRES)
            return value
        if kind == "for":
            element = self._iterate(self.value(definition.value, frame))
            if definition.path is None:
                return Value(CONTAINER, AG_NONE, element=element)
            return self._element_at(element, definition.path)
        if kind == "augassign":
            return self._augmented(definition, frame)
        if kind == "walrus":
            return self.value(definition.value, frame)
        if kind == "param":
            return self.param_value(definition.statement, frame)
        if kind == "def":
            return Value(FUNCTION, AG_NONE, detail=definition.statement)
        if kind == "class":
            return Value(CLASS, AG_NONE, detail=definition.statement)
        if kind == "with":
            entered = self.value(definition.value, frame)
            if entered.kind == MODULE:
                return entered
            return UNKNOWN_VALUE
        return UNKNOWN_VALUE

    def _backpropagated(self, definition: Def) -> bool:
        target = definition.target
        if type(target) is not cst.Name or self.grad_mode(definition.statement) == GRAD_OFF:
            return False
        from torchlint.analysis.backward import backwarded_uses

        for use in backwarded_uses(self.sem, self.scopes.scope_of(target)).get(target.value, ()):
            reaching = self.flow.reaching(use)
            # Only a definition that reaches a backward is backpropagated (`y = w * x + b;
            # y.backward()` says nothing of a later `y = torch.from_numpy(x)`); unknown reach
            # (a global, a closure) counts.
            if reaching is None or any(d is definition or (d.target is not None and d.target is target)
                                       for d in reaching):
                return True
        return False

    def _augmented(self, definition: Def, frame: Frame) -> Value:
        statement = definition.statement
        target = statement.target
        if type(target) is not cst.Name:
            return UNKNOWN_VALUE
        previous_defs = self.flow.reaching_at(statement, target.value)
        if previous_defs is None:
            return UNKNOWN_VALUE
        if previous_defs:
            previous = join_all(self.definition_value(d, frame) for d in previous_defs)
        else:
            previous = self._outer_name(target, frame)
        right = self.value(statement.value, frame)
        if previous.kind == CONTAINER:
            return Value(CONTAINER, AG_NONE, element=join(previous.element or BOTTOM_VALUE,
                                                          self._iterate(right)), site=previous.site)
        result = self._arithmetic(previous, right, statement, frame, type(statement.operator))
        if previous.is_tensor:
            # In place: the same tensor (memory, strides, identity), with the update recorded. A
            # leaf stays a leaf (the update either raises or runs under no_grad).
            autograd = previous.autograd if previous.autograd == AG_LEAF else result.autograd
            return result.but(layout=previous.layout, alias=previous.alias, site=previous.site, autograd=autograd,
                              kind=LOSS if LOSS in (previous.kind, right.kind) else previous.kind)
        return result

    # -- subscripts ----------------------------------------------------------------------------
    def _subscript(self, node: cst.Subscript, frame: Frame) -> Value:
        base = self.value(node.value, frame)
        kind = base.kind
        if kind == BOTTOM:
            return base
        if kind in TENSOR_KINDS or kind == INPUT:
            basic, slices_only = _index_kind(node)
            if not basic:
                return self._op_result([base], node, frame, LAYOUT_CONTIGUOUS, kind=TENSOR if kind != INPUT else INPUT)
            layout = base.layout if slices_only else _indexed_layout(base.layout, node)
            autograd = AG_GRAPH if base.autograd == AG_LEAF else base.autograd
            result_kind = LOSS if kind == LOSS else (INPUT if kind == INPUT else TENSOR)
            return base.but(kind=result_kind, autograd=autograd, layout=layout,
                            shape=base.shape if slices_only else None, activation=base.activation if slices_only else None)
        if kind == CONTAINER:
            if base.detail == "shape":
                return NUMBER_VALUE
            if base.detail == "param_group":
                key = _literal_key(node)
                if key == "params":
                    return base.element or UNKNOWN_VALUE
                return UNKNOWN_VALUE
            position = _literal_position(node)
            if base.items is not None and position is not None and -len(base.items) <= position < len(base.items):
                return base.items[position]
            if _is_slice(node):
                return base
            return base.element or UNKNOWN_VALUE
        if kind == BATCH:
            return self._batch_item(base)
        if kind == MODULE and base.module is not None:
            parts = base.module.parts
            position = _literal_position(node)
            if parts and position is not None and -len(parts) <= position < len(parts):
                return parts[position]
            if parts:
                return join_all(parts)
            return Value(MODULE, AG_NONE, module=ModuleInfo(), device=base.device)
        return UNKNOWN_VALUE

    def _batch_item(self, batch: Value) -> Value:
        return Value(TENSOR, AG_NONE, LAYOUT_CONTIGUOUS, device=batch.device, site=batch.site, role="batch")

    # -- operators -----------------------------------------------------------------------------
    def _binary(self, node: cst.BinaryOperation, frame: Frame) -> Value:
        left = self.value(node.left, frame)
        right = self.value(node.right, frame)
        return self._arithmetic(left, right, node, frame, type(node.operator))

    def _arithmetic(self, left: Value, right: Value, node, frame, operator) -> Value:
        kinds = (left.kind, right.kind)
        if BOTTOM in kinds:
            return BOTTOM_VALUE  # not known yet (a cycle being solved): wait for the operand
        if operator in (cst.MatrixMultiply, cst.MatrixMultiplyAssign):
            if any(k in TENSOR_KINDS or k == INPUT for k in kinds):
                return self._op_result([left, right], node, frame, LAYOUT_CONTIGUOUS)
            return UNKNOWN_VALUE
        if left.kind in TENSOR_KINDS or right.kind in TENSOR_KINDS:
            return self._elementwise([left, right], node, frame)
        if INPUT in kinds and all(k in (INPUT, NUMBER) for k in kinds):
            return Value(INPUT, AG_MAYBE if AG_MAYBE in (left.autograd, right.autograd) else AG_UNKNOWN,
                         LAYOUT_NOT_KNOWN)
        if kinds == (NUMBER, NUMBER):
            return NUMBER_VALUE
        if left.kind == CONTAINER and right.kind == CONTAINER and operator in (cst.Add, cst.AddAssign):
            return Value(CONTAINER, AG_NONE, element=join(left.element or BOTTOM_VALUE, right.element or BOTTOM_VALUE))
        if left.kind == CONTAINER and right.kind == NUMBER and operator is cst.Multiply:
            return Value(CONTAINER, AG_NONE, element=left.element)
        if STRING in kinds and operator in (cst.Add, cst.Modulo):
            return STRING_VALUE
        return UNKNOWN_VALUE

    def _unary(self, node: cst.UnaryOperation, frame: Frame) -> Value:
        operand = self.value(node.expression, frame)
        if type(node.operator) is cst.Not:
            return NUMBER_VALUE
        if operand.kind in TENSOR_KINDS:
            return self._elementwise([operand], node, frame)
        if operand.kind == INPUT:
            return Value(INPUT, operand.autograd, LAYOUT_NOT_KNOWN)
        return operand if operand.kind == NUMBER else UNKNOWN_VALUE

    def _comparison(self, node: cst.Comparison, frame: Frame) -> Value:
        left = self.value(node.left, frame)
        values = [left] + [self.value(t.comparator, frame) for t in node.comparisons]
        if any(type(t.operator) in (cst.Is, cst.IsNot, cst.In, cst.NotIn) for t in node.comparisons):
            return NUMBER_VALUE
        if any(v.kind in TENSOR_KINDS for v in values):
            return self._elementwise(values, node, frame, differentiable=False)
        return NUMBER_VALUE

    # -- results of operations -----------------------------------------------------------------
    # -- iteration -----------------------------------------------------------------------------
    def _iterate(self, value: Value) -> Value:
        """The value of one item when iterating over `value`."""
        kind = value.kind
        if kind == BOTTOM:
            return value
        if kind == CONTAINER:
            if value.element is not None:
                return value.element
            if value.items:
                return join_all(value.items)
            return UNKNOWN_VALUE
        if kind == LOADER:
            # A parameter known as a loader only by its use (`analysis/evidence.py`) may yield
            # batches already moved to a device: its items are tensors, on a device not known.
            device = None if value.role == "used" else Device(HOST, node=value.site)
            return Value(BATCH, AG_NONE, device=device, site=value.site)
        if kind == BATCH:
            return self._batch_item(value)
        if kind in TENSOR_KINDS:
            return value.but(kind=TENSOR if kind != LOSS else LOSS, layout=LAYOUT_NOT_KNOWN, shape=None,
                             autograd=AG_GRAPH if value.autograd == AG_LEAF else value.autograd)
        if kind == MODULE and value.module is not None:
            if value.module.parts:
                return join_all(value.module.parts)
            if value.module.qualified in api.MODULE_CONTAINERS:
                return Value(MODULE, AG_NONE, module=ModuleInfo(), device=value.device)
        return UNKNOWN_VALUE

    def _element_at(self, value: Value, path: Tuple[int, ...]) -> Value:
        for position in path:
            if value.kind == BOTTOM:
                return value
            if value.kind == CONTAINER:
                if value.items is not None and position < len(value.items):
                    value = value.items[position]
                else:
                    value = value.element or UNKNOWN_VALUE
            elif value.kind == BATCH:
                value = self._batch_item(value)
            elif value.kind in TENSOR_KINDS:
                value = value.but(kind=TENSOR if value.kind != LOSS else LOSS, layout=LAYOUT_NOT_KNOWN,
                                  shape=None, autograd=AG_GRAPH if value.autograd == AG_LEAF else value.autograd,
                                  activation=None)
            elif value.kind == INPUT:
                value = Value(INPUT, value.autograd, LAYOUT_NOT_KNOWN)
            else:
                return UNKNOWN_VALUE
        return value

    # -- calls ---------------------------------------------------------------------------------
    def _call(self, call: cst.Call, frame: Frame) -> Value:
        func = call.func
        kind = type(func)
        if kind is cst.Name or kind is cst.Attribute:
            qualified = self.sem.qualified_name(func)
            if qualified is None and self.sem.project is not None and self.scopes.relative_imports:
                qualified = self.scopes.import_name(func)  # `from .layers import PatchEmbed`
            if qualified is None and kind is cst.Name and self.scopes.star_imports:
                fact = self._star_imported(func)  # `from models import *`
                if fact is not None:
                    return self._project_call(fact, call, frame)
            if qualified is not None:
                fact = self._project_fact(qualified)
                if fact is not None:
                    return self._project_call(fact, call, frame)
                return self._library_call(qualified, call, frame)
        if kind is cst.Name:
            builtin = self._builtin_call(func.value, call, frame)
            if builtin is not None:
                return builtin
        if kind is cst.Attribute:
            receiver = self.value(func.value, frame)
            if receiver.kind == BOTTOM:
                return receiver
            method = func.attr.value
            result = self._method_call(receiver, method, call, frame)
            if result is not None:
                return result
        callee = self.value(func, frame)
        if callee.kind == BOTTOM:
            return callee
        if callee.kind == MODULE:
            # `x = self.layer(x)`, `_call_value` inlined: a forward of twenty such lines is a
            # chain of evaluations twenty levels deep, and each frame saved counts at every level.
            inputs = []
            for argument in call.args:
                if not argument.star:
                    inputs.append(self.value(argument.value, frame))
            result = self.module_output(callee, inputs, call, frame)
        else:
            result = self._call_value(callee, call, frame)
        if result is UNKNOWN_VALUE:
            return Value(UNKNOWN, site=call)  # unknown, but one object: the same one at each use
        return result

    def _call_value(self, callee: Value, call: cst.Call, frame: Frame, self_value: Optional[Value] = None) -> Value:
        kind = callee.kind
        if kind == FUNCTION and type(callee.detail) is cst.FunctionDef:
            bound = callee.site if isinstance(callee.site, Value) else self_value
            return self.call_function(callee.detail, call, frame, bound)
        if kind == CLASS and type(callee.detail) is cst.ClassDef:
            return self.instance_of(callee.detail, call)
        if kind == MODULE:
            return self._module_call(callee, call, frame)
        if kind == CRITERION:
            return self._loss(call, frame, criterion=callee)
        return UNKNOWN_VALUE

    def call_function(self, function: cst.FunctionDef, call: cst.Call, frame: Frame,
                      self_value: Optional[Value] = None, arguments: Optional[Sequence[Value]] = None) -> Value:
        """The value a call of the same-file `function` returns, interpreted with the values of
        the arguments it passes."""
        if self_value is not None and self._is_static(function):
            self_value = None  # `self._fill(t)` with `@staticmethod def _fill(table)`: `table` is `t`
        binding = _bind(function, call, skip_self=self_value is not None) if arguments is None else None
        args: Dict[int, Value] = {}
        params = _all_params(function)
        if self_value is not None:
            positional = _positional_params(function)
            if positional:
                args[id(positional[0])] = self_value
        if arguments is not None:
            positional = _positional_params(function)[1 if self_value is not None else 0:]
            for param, value in zip(positional, arguments):
                args[id(param)] = self._as_argument(value, param)
        elif binding is not None:
            for param in params:
                expression = binding.get(id(param))
                if expression is None:
                    if id(param) in args:
                        continue
                    if param.default is not None:
                        args[id(param)] = self._default_value(param, frame)
                    elif param.star in ("*", "**"):
                        args[id(param)] = UNKNOWN_VALUE
                    continue
                if isinstance(expression, Value):
                    args[id(param)] = expression
                else:
                    args[id(param)] = self._as_argument(self.value(expression, frame), param)
        else:
            return self._returns(function, self.generic_frame(function))
        grad = self.grad_mode(call, frame) if call is not None else frame.grad
        inner = self._context_frame(function, args, grad, frame)
        return self._returns(function, inner)

    def _returns(self, function: cst.FunctionDef, frame: Frame) -> Value:
        key = ("returns", id(function), frame.key)
        return self._memoized(key, self._compute_returns, function, frame)

    def _compute_returns(self, function: cst.FunctionDef, frame: Frame) -> Value:
        returns, yields = self._exits(function)
        if yields:
            return Value(CONTAINER, AG_NONE, element=join_all(
                self.value(y.value, frame) if y.value is not None else NONE_VALUE for y in yields))
        if not returns:
            return NONE_VALUE
        return join_all(self.value(r.value, frame) if r.value is not None else NONE_VALUE for r in returns)

    def _exits(self, function: cst.FunctionDef):
        cache = self.sem.__dict__.setdefault("_function_exits", {})
        found = cache.get(id(function))
        if found is None:
            returns = [r for r in self.index.descendants(function.body, cst.Return)
                       if self.sem.function_of(r) is function]
            yields = [y for y in self.index.descendants(function.body, cst.Yield)
                      if self.sem.function_of(y) is function]
            found = cache[id(function)] = (returns, yields)
        return found

    def _builtin_call(self, name: str, call: cst.Call, frame: Frame) -> Optional[Value]:
        bindings = self.scopes.lookup(name, call.func)
        if bindings:
            return None  # a local or imported name shadows the builtin
        args = [a.value for a in call.args if a.keyword is None and not a.star]
        if name in ("enumerate", "zip", "range", "list", "tuple", "sorted", "reversed", "iter", "set",
                    "filter", "map"):
            if name == "range":
                return Value(CONTAINER, AG_NONE, element=NUMBER_VALUE)
            if name == "enumerate" and args:
                return Value(CONTAINER, AG_NONE, element=Value(
                    CONTAINER, AG_NONE, items=(NUMBER_VALUE, self._iterate(self.value(args[0], frame)))))
            if name == "zip":
                return Value(CONTAINER, AG_NONE, element=Value(
                    CONTAINER, AG_NONE, items=tuple(self._iterate(self.value(a, frame)) for a in args)))
            if name == "map":
                return Value(CONTAINER, AG_NONE)
            if args:
                inner = self.value(args[0], frame)
                if name == "iter" and inner.kind == LOADER:
                    return inner
                return Value(CONTAINER, AG_NONE, element=self._iterate(inner))
            return Value(CONTAINER, AG_NONE)
        if name == "next" and args:
            return self._iterate(self.value(args[0], frame))
        if name in ("len", "int", "float", "bool", "isinstance", "hasattr", "round", "abs", "id", "hash", "ord"):
            if name in ("float", "int", "abs", "round") and args:
                inner = self.value(args[0], frame)
                if inner.kind in TENSOR_KINDS and name == "abs":
                    return self._elementwise([inner], call, frame)
            return NUMBER_VALUE
        if name in ("str", "repr", "format"):
            return STRING_VALUE
        if name == "sum" and args:
            items = self._iterate(self.value(args[0], frame))
            if items.kind in TENSOR_KINDS:
                return self._op_result([items], call, frame, LAYOUT_CONTIGUOUS, shape=items.shape)
            return NUMBER_VALUE if items.kind == NUMBER else UNKNOWN_VALUE
        if name in ("max", "min") and len(args) >= 2:
            return join_all(self.value(a, frame) for a in args)
        if name == "dict":
            return Value(CONTAINER, AG_NONE, detail="dict")
        if name == "print":
            return NONE_VALUE
        if name == "getattr" and len(args) >= 2 and type(args[1]) is cst.SimpleString:
            owner = self.value(args[0], frame)
            attr = string_text(args[1])
            if attr is not None:
                return self.attribute_of(owner, attr, call, frame)
        return None

    # -- library calls -------------------------------------------------------------------------
    # -- modules -------------------------------------------------------------------------------
    def _module_call(self, module: Value, call: cst.Call, frame: Frame) -> Value:
        inputs = [self.value(a.value, frame) for a in call.args if not a.star]
        return self.module_output(module, inputs, call, frame)

    def _method_call(self, receiver: Value, method: str, call: cst.Call, frame: Frame) -> Optional[Value]:
        kind = receiver.kind
        if kind in (UNKNOWN, INPUT) and method in ("parameters", "named_parameters") and not call.args:
            # Only modules have these: the receiver is one, of unknown class.
            owner = Value(MODULE, AG_NONE, module=ModuleInfo(), site=identity(receiver))
            return self._module_method(owner, method, call, frame)
        if kind in (MODULE, INSTANCE):
            klass = receiver.module.klass if receiver.module is not None else receiver.detail
            if type(klass) is cst.ClassDef:
                function = self.method(klass, method)
                if function is not None:
                    if method == "forward" and kind == MODULE:
                        inputs = [self.value(a.value, frame) for a in call.args if not a.star]
                        return self.module_output(receiver, inputs, call, frame)
                    return self.call_function(function, call, frame, self_value=receiver)
                if self.attribute_writes(klass, method):
                    return None  # an attribute holding a callable: evaluated as a value call
            if kind == MODULE:
                return self._module_method(receiver, method, call, frame)
            return None
        if kind in TENSOR_KINDS or kind == INPUT:
            return self._tensor_method(receiver, method, call, frame)
        if kind == BATCH:
            if method in ("to", "cuda", "cpu"):
                return receiver.but(device=self._move_device(method, call, frame, receiver.device))
            if method in ("items", "values", "keys"):
                return Value(CONTAINER, AG_NONE, element=self._batch_item(receiver))
            return None
        if kind == CRITERION:
            if method in ("to", "cuda", "cpu", "float", "double", "half"):
                return receiver
            if method == "forward":
                return self._loss(call, frame, criterion=receiver)
            return None
        if kind == OPTIMIZER:
            if method in ("step", "zero_grad"):
                return NONE_VALUE
            return None
        if kind == CONTAINER:
            if method in ("items",):
                return Value(CONTAINER, AG_NONE, element=Value(CONTAINER, AG_NONE, items=(
                    UNKNOWN_VALUE, receiver.element or UNKNOWN_VALUE)))
            if method in ("values", "copy"):
                return Value(CONTAINER, AG_NONE, element=receiver.element)
            if method in ("get", "pop") and call.args:
                return receiver.element or UNKNOWN_VALUE
            if method in ("append", "extend", "insert", "clear", "update", "add"):
                return NONE_VALUE
            return None
        if kind == LOADER and method in ("__iter__",):
            return receiver
        if kind == UNKNOWN and method in _DUCK_TENSOR_METHODS and _looks_like_a_tensor_call(call, method):
            # Only tensors have these methods: the receiver is one, of unknown provenance.
            return self._tensor_method(Value(TENSOR, AG_UNKNOWN, LAYOUT_CONTIGUOUS), method, call, frame)
        return None


# -- helpers -----------------------------------------------------------------------------------


def _index_kind(node: cst.Subscript) -> Tuple[bool, bool]:
    """(basic indexing — slices, integers, None, Ellipsis —, only slices and Ellipsis)."""
    slices_only = True
    for element in node.slice:
        inner = element.slice
        if type(inner) is cst.Slice:
            continue
        value = inner.value
        if type(value) is cst.Ellipsis:
            continue
        slices_only = False
        if type(value) is cst.UnaryOperation:
            value = value.expression
        if type(value) is cst.Integer:
            continue
        if type(value) is cst.Name and value.value == "None":
            continue
        return False, False
    return True, slices_only


def _indexed_layout(layout: Layout, node: cst.Subscript) -> Layout:
    """The layout after basic indexing with integers: the remaining dimensions keep their memory
    order (`x[:, 0]` of a tensor laid out in order is in order; of a permuted one, the permutation
    of the dimensions left)."""
    if layout.state == CONTIGUOUS:
        return LAYOUT_CONTIGUOUS
    if layout.state != PERMUTED or layout.order is None:
        return LAYOUT_NOT_KNOWN
    dropped = []
    for position, element in enumerate(node.slice):
        inner = element.slice
        if type(inner) is cst.Slice:
            continue
        value = inner.value
        if type(value) is cst.UnaryOperation:
            value = value.expression
        if type(value) is not cst.Integer:
            return LAYOUT_NOT_KNOWN  # `None` or `...` shift the positions
        dropped.append(position)
    if len(node.slice) > len(layout.order):
        return LAYOUT_NOT_KNOWN
    kept = [o for position, o in enumerate(layout.order) if position not in dropped]
    ranks = sorted(kept)
    order = tuple(ranks.index(o) for o in kept)
    if order == tuple(range(len(order))):
        return LAYOUT_CONTIGUOUS
    return Layout(PERMUTED, layout.source, "permute", order, order, len(order))


def _literal_position(node: cst.Subscript) -> Optional[int]:
    if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
        return None
    return _int(node.slice[0].slice.value)


def _literal_key(node: cst.Subscript) -> Optional[str]:
    if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
        return None
    value = node.slice[0].slice.value
    return string_text(value) if type(value) is cst.SimpleString else None


def _is_slice(node: cst.Subscript) -> bool:
    return len(node.slice) == 1 and type(node.slice[0].slice) is cst.Slice


_HANDLERS = {
    cst.Name: Values._name,
    cst.Attribute: Values._attribute,
    cst.Call: Values._call,
    cst.Subscript: Values._subscript,
    cst.BinaryOperation: Values._binary,
    cst.UnaryOperation: Values._unary,
    cst.Comparison: Values._comparison,
    cst.BooleanOperation: Values._boolean,
    cst.IfExp: Values._if_expression,
    cst.Integer: Values._number,
    cst.Float: Values._number,
    cst.Imaginary: Values._number,
    cst.SimpleString: Values._string,
    cst.ConcatenatedString: Values._string,
    cst.FormattedString: Values._string,
    cst.Tuple: Values._sequence,
    cst.List: Values._sequence,
    cst.Set: Values._set,
    cst.Dict: Values._dict,
    cst.ListComp: Values._comprehension,
    cst.SetComp: Values._comprehension,
    cst.GeneratorExp: Values._comprehension,
    cst.DictComp: Values._dict_comprehension,
    cst.Lambda: Values._lambda,
    cst.NamedExpr: Values._walrus,
}
