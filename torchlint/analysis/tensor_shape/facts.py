"""What the shape rules ask of a file, computed once and only when a rule asks.

Every model the file feeds is run over the shape of what feeds it: `model(data)` with a batch of
a known dataset, a tensor built with literal sizes, a `summary(model, (3, 32, 32))`. Every module
class of the file (and every `nn.Sequential` built at module level) that nothing known feeds is
run over a symbolic input: `(N, C, H, W)` with the channels its first layer takes and H, W free,
where only what fails for every H and W is a problem. Each problem is reported once, in this file:
at the layer's definition when it stands here, else at the call that feeds the model.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.tensor_shape import contracts as C
from torchlint.analysis.tensor_shape import dims as D
from torchlint.analysis.tensor_shape import inputs as I
from torchlint.analysis.tensor_shape import handoff as H
from torchlint.analysis.tensor_shape import losses as L
from torchlint.analysis.tensor_shape import ops
from torchlint.analysis.tensor_shape.modules import (
    MODULE_VALUES, Interpreter, Layer, Problem, Sequence_, Step, Submodule, UNKNOWN, bind_constructor, class_layers,
    binding_key, evaluate, layer_of, method, project_class, step_axis,
)
from torchlint.analysis.tensor_shape.script import ScriptFrame
from torchlint.analysis.tensor_shape.values import Tensor

# Problem kinds and the rule that reports them.
CODES = {"features": "TL301", "rank": "TL301", "state": "TL301", "dim": "TL301", "arguments": "TL301", "view": "TL302", "window": "TL303", "cat": "TL304",
         "broadcast": "TL304", "matmul": "TL304", "batch_first": "TL306"}


@dataclass
class Finding:
    code: str
    node: cst.CSTNode
    message: str
    fix: Optional[Tuple[cst.CSTNode, str]] = None
    related: Optional[str] = None


@dataclass
class ModelRun:
    """One model run over one input: what `torchlint shapes` prints."""

    label: str
    origin: Any  # the input's `inputs.Source`, or "symbolic"
    input_shape: Any
    steps: List[Step]
    output: Any
    problems: List[Problem]
    node: cst.CSTNode

    @property
    def source(self) -> str:
        """Where the input comes from, its line found only now (a table or message asks)."""
        return self.origin if isinstance(self.origin, str) else self.origin.description


_BUILTINS = frozenset(dir(builtins))


@dataclass
class ShapeFacts:
    findings: List[Finding] = field(default_factory=list)
    runs: List[ModelRun] = field(default_factory=list)
    fitted: set = field(default_factory=set)  # ids of layer constructor calls some input fitted

    def at(self, code: str) -> Dict[cst.CSTNode, List[Finding]]:
        found: Dict[cst.CSTNode, List[Finding]] = {}
        for finding in self.findings:
            if finding.code == code:
                found.setdefault(finding.node, []).append(finding)
        return found


def shape_facts(sem, importers: bool = True) -> ShapeFacts:
    """The file's shape facts; with `importers`, also what the files of its directory that import
    it find in its classes (a model file judged by the script that feeds it). The file's own part
    is built once and shared by both."""
    alone = sem.__dict__.get("_shape_facts_alone")
    if alone is None:
        builder = _Builder(sem)
        alone = sem.__dict__["_shape_facts_alone"] = builder.build()
        sem.__dict__["_shape_builder"] = builder
    if not importers:
        return alone
    full = sem.__dict__.get("_shape_facts")
    if full is None:
        full = sem.__dict__["_shape_facts"] = sem.__dict__["_shape_builder"].with_importers()
    return full


class _Builder:
    def __init__(self, sem) -> None:
        self.sem = sem
        self.unfed: List[cst.ClassDef] = []
        self.facts = ShapeFacts()
        self._reported: set = set()
        self._fed_classes: set = set()
        self._outputs: Dict[cst.CSTNode, Any] = {}
        self._models: Dict[int, Any] = {}
        self._fitted: set = set()  # the layers (ids of their constructor calls) some input fitted
        self._by_definition: Dict[int, list] = {}
        self._handed: set = set()

    def build(self) -> ShapeFacts:
        sem = self.sem
        for call in sem.index.nodes(cst.Call):
            self._feed(call)
            self._handed_over(call)
            if "torchvision.datasets" in (sem.qualified_name(call.func) or ""):
                self._transform_findings(I.normalize_misfits(sem, call), I.dataset_source(sem, call, 0))
        self.unfed = [klass for klass in sorted(_module_classes(sem), key=lambda k: sem.index.order.get(k, 0))
                      if id(klass) not in self._fed_classes]
        for klass in self.unfed:
            self._symbolic_class(klass)
        for statement in _script_statements(sem.module):
            self._script_op(statement)
        for call in sem.index.nodes(cst.Call):
            # A criterion object is asked about only where some model's output is known; a
            # functional loss (`F.nll_loss(a, b)`) costs nothing to recognise.
            if self._outputs or (type(call.func) is cst.Attribute and
                                 (sem.qualified_name(call.func) or "").startswith("torch.nn.functional.")):
                self._loss(call)
        self._settle_fixes()
        self.facts.fitted = self._fitted
        return self.facts

    # -- what the files that import this one find in its classes
    def with_importers(self) -> ShapeFacts:
        """The facts with the importers' findings added (the file's own are kept as they are)."""
        if not self.unfed:
            return self.facts
        alone = self.facts
        self.facts = ShapeFacts(list(alone.findings), list(alone.runs), set(alone.fitted))
        self._reported = set(self._reported)
        self._by_definition = {key: list(value) for key, value in self._by_definition.items()}
        self._from_importers()
        self._settle_fixes()
        full, self.facts = self.facts, alone
        return full

    def _from_importers(self) -> None:
        sem = self.sem
        project = sem.project
        if project is None or not sem.path:
            return
        import os

        from torchlint.analysis import project as project_layer

        path = os.path.abspath(sem.path)
        directory, name = os.path.split(path)
        module = name[:-3] if name.endswith(".py") else None
        if module is None:
            return
        try:
            siblings = sorted(n for n in os.listdir(directory) if n.endswith(".py") and n != name)[:40]
        except OSError:
            return
        for sibling in siblings:
            other_path = os.path.join(directory, sibling)
            found = project_layer._text_of(other_path)
            if found is None or module not in found[0] or "import" not in found[0] or \
                    not any(f"{klass.name.value}(" in found[0] for klass in self.unfed):
                continue
            parsed = project_layer._read(other_path)
            if parsed is None or parsed.semantic is None:
                continue
            project.read[other_path] = parsed.digest  # this file's findings now depend on it
            other = parsed.semantic
            facts = shape_facts(other, importers=False)
            if other.project is not None:  # "data_setup.py:6" in a message the importer wrote
                project.origins.update(other.project.origins)
            self._fitted |= facts.fitted
            for run in facts.runs:
                source = run.origin if not isinstance(run.origin, str) else I.Source((), f"any input {run.label} takes")
                for problem in run.problems:
                    if problem.certain and (problem.definition in sem.index.order or problem.node in sem.index.order):
                        self._report(problem, _elsewhere(source, other, sibling), None)

    # -- tensor ops the script itself runs
    def _script_op(self, call: cst.Call) -> None:
        """`F.max_pool2d(a, 29)`, `torch.flatten(a, 6)`, `a.view(...)` at the top level of a script,
        on tensors whose sizes it fixes: what torch raises there."""
        sem = self.sem
        func = call.func
        qualified = sem.qualified_name(func) or ""
        if qualified.startswith("torch."):
            if qualified.rsplit(".", 1)[-1] not in ops.CHECKED_FUNCTIONS or \
                    (qualified.startswith("torch.nn.") and not qualified.startswith("torch.nn.functional.")):
                return  # `torch.manual_seed(1)`, a layer's constructor: nothing to check
        elif not (type(func) is cst.Attribute and func.attr.value in _SCRIPT_METHODS and not qualified):
            return
        frame = ScriptFrame(sem, self._module_value)
        interpreter = Interpreter(self._fitted)
        interpreter.expr(call, frame, True)
        source = frame.last_source
        if source is None:
            return
        for problem in interpreter.run.problems:
            self._report(problem, source, call)

    # -- losses
    def _loss(self, call: cst.Call) -> None:
        sem = self.sem
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if len(positional) < 2 or any(a.star for a in call.args):
            return
        loss = L.loss_class(sem, call)
        if loss is None:
            return
        frame = ScriptFrame(sem, self._module_value)
        interpreter = Interpreter()
        output = interpreter.expr(positional[0], frame, True)
        if not isinstance(output, Tensor) or output.shape is None:
            return
        output_source = frame.last_source
        frame.last_source = None
        target = interpreter.expr(positional[1], frame, True)
        if not isinstance(target, Tensor) or target.shape is None or frame.last_source is None:
            return
        sizes = frame.last_source.batch_sizes or (output_source.batch_sizes if output_source is not None else ())
        problem = L.check(loss, output.shape, target.shape, sizes)
        if problem is None or (call, "loss") in self._reported:
            return
        self._reported.add((call, "loss"))
        what = "the model's output" if self._outputs else "the input"
        self.facts.findings.append(Finding(
            "TL305", call, f"`{I.short_text(sem, call, 50)}`: {problem} ({what} is {D.shape_text(output.shape)}, "
                           f"the target {D.shape_text(target.shape)}: {frame.last_source.description})"))

    # -- models fed with a known input
    def _feed(self, call: cst.Call) -> None:
        sem = self.sem
        summary = I.summary_source(sem, call)
        if summary is not None:
            model_node, source = summary
            self._run_model(model_node, source, call)
            return
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            return
        func = call.func
        if type(func) is not cst.Name:
            return
        definition = sem.reaching_definition(func)
        if definition is not None and definition.kind in ("def", "class", "import"):
            return  # `train(x)`, `Net(x)`: a function runs or a class is built, no module is called
        if definition is None and func.value in _BUILTINS and not sem.scopes.bindings_in(sem.module, func.value):
            return  # `print(x)`, `len(x)`: no model to ask the value model about
        value = sem.values.of(func)
        if value.kind != "module" or value.module is None:
            return
        found = self._model_of(func)
        if found is None:
            return
        label, module = found
        frame = ScriptFrame(sem, self._module_value)
        interpreter = Interpreter(self._fitted)
        argument = interpreter.expr(call.args[0].value, frame, True)
        source = frame.last_source
        if source is None:
            return
        if isinstance(module, Submodule):
            self._fed_classes.add(id(module.klass))
        output = UNKNOWN
        interpreter.batch = source
        if isinstance(argument, Tensor) and argument.shape is not None:
            output = interpreter.call_module(module, [argument], call, sem, 0, True)
            self.facts.runs.append(ModelRun(label, source, argument.shape, interpreter.run.steps,
                                            output, interpreter.run.problems, call))
        self._outputs[call] = output
        for problem in interpreter.run.problems:
            self._report(problem, source, call)

    def _handed_over(self, call: cst.Call) -> None:
        """A model and a loader handed to a function that runs one on the other
        (`engine.train(model=model, train_dataloader=train_dataloader)`): the model is run here,
        on the loader's batches, and what fails is reported at this call."""
        args = call.args
        if len(args) < 2 or sum(type(a.value) is cst.Name for a in args) < 2 or \
                type(call.func) not in (cst.Name, cst.Attribute):  # type(): LibCST's ABC isinstance is slow here
            return
        if not H.may_be_project_function(self.sem, call.func):
            return
        for model_node, loader_node in H.feeds(self.sem, call):
            if not isinstance(model_node, cst.Name) or (call, id(model_node)) in self._handed:
                continue
            self._handed.add((call, id(model_node)))
            source = I.loader_of(self.sem, loader_node)
            if source is not None:
                self._run_model(model_node, source, call)

    def _module_value(self, node: cst.Name) -> Any:
        """For the script frame: the module a name holds, or None."""
        if self.sem.values.of(node).kind != "module":
            return None
        found = self._model_of(node)
        return found[1] if found is not None else None

    def _model_of(self, model_node) -> Optional[Tuple[str, Any]]:
        """The module a model expression holds: (label, module value)."""
        sem = self.sem
        value = sem.values.of(model_node)
        site = getattr(value, "site", None)
        if value.kind != "module" or not isinstance(site, cst.Call):
            return None
        if site not in sem.index.order:
            return None
        if id(site) in self._models:
            return self._models[id(site)]
        self._models[id(site)] = None
        found = self._module_at(site, value)
        self._models[id(site)] = found
        return found

    def _module_at(self, site: cst.Call, value) -> Optional[Tuple[str, Any]]:
        sem = self.sem
        klass = value.module.klass if value.module is not None else None
        found = (klass, sem) if isinstance(klass, cst.ClassDef) and klass in sem.index.order else \
            project_class(sem, site.func)
        if found is not None:
            klass, klass_sem = found
            arguments = bind_constructor(sem, klass, klass_sem, site, {})
            return klass.name.value, Submodule(klass, klass_sem, arguments, site, "")
        parent = sem.parent(site)
        name = parent.targets[0].target.value if isinstance(parent, cst.Assign) and len(parent.targets) == 1 \
            and isinstance(parent.targets[0].target, cst.Name) else ""
        layer = layer_of(sem, site, {}, name)
        if isinstance(layer, MODULE_VALUES):
            return sem.source(site.func), layer
        return None

    def _run_model(self, model_node, source: I.Source, feed: cst.Call) -> None:
        found = self._model_of(model_node)
        if found is None:
            return
        label, module = found
        if isinstance(module, Submodule):
            self._fed_classes.add(id(module.klass))
        interpreter = Interpreter(self._fitted)
        output = interpreter.call_module(module, [Tensor(source.shape)], feed, self.sem, 0, True)
        run = ModelRun(label, source, source.shape, interpreter.run.steps, output,
                       interpreter.run.problems, feed)
        self._outputs[feed] = output
        self.facts.runs.append(run)
        for problem in interpreter.run.problems:
            self._report(problem, source, feed)

    def _transform_findings(self, misfits, source: Optional[I.Source]) -> None:
        for call, given, channels in misfits:
            description = source.description if source is not None else f"{channels} channels"
            if call in self.sem.index.order and (call, "normalize") not in self._reported:
                self._reported.add((call, "normalize"))
                if channels == 1:
                    raised = (f"`RuntimeError: output with shape [1, H, W] doesn't match the broadcast shape "
                              f"[{given}, H, W]`")
                else:
                    raised = (f"`RuntimeError: The size of tensor a ({channels}) must match the size of tensor b "
                              f"({given}) at non-singleton dimension 0`")
                self.facts.findings.append(Finding(
                    "TL307", call,
                    f"`{I.short_text(self.sem, call, 50)}` gives {given} channel values but the images have {channels} "
                    f"channel{'s' if channels != 1 else ''} ({description}): the first sample raises {raised}; "
                    f"give {channels} value{'s' if channels != 1 else ''} per statistic"))

    # -- models nothing known feeds
    def _symbolic_class(self, klass: cst.ClassDef) -> None:
        """Runs a class nothing known feeds over a symbolic input, built as this file builds it
        (each distinct constructor call, at most four) or with its parameters' defaults."""
        sem = self.sem
        forward = method(klass, "forward")
        init = method(klass, "__init__")
        if forward is None or init is None:
            return
        bindings, seen = [], set()
        for call in self._constructions(klass):
            arguments = bind_constructor(sem, klass, sem, call, {})
            key = binding_key(arguments)
            if key not in seen:
                seen.add(key)
                bindings.append(arguments)
        if not bindings or len(bindings) > 4:
            bindings = [bind_constructor(sem, klass, sem, None, {})]
        for arguments in bindings:
            self._symbolic_run(klass, forward, arguments)

    def _constructions(self, klass: cst.ClassDef):
        """The calls of this file that build `klass` by its name."""
        sem = self.sem
        found = []
        for call in sem.index.nodes(cst.Call):
            if isinstance(call.func, cst.Name) and call.func.value == klass.name.value:
                located = project_class(sem, call.func)
                if located is not None and located[0] is klass:
                    found.append(call)
        return found

    def _symbolic_run(self, klass: cst.ClassDef, forward: cst.FunctionDef, arguments: Dict[str, Any]) -> None:
        sem = self.sem
        layers = class_layers(sem, klass, arguments)
        shape = _symbolic_input(forward, layers, 0, sem)
        if shape is None:
            return
        interpreter = Interpreter(self._fitted)
        module = Submodule(klass, sem, arguments, klass, "")
        output = interpreter.call_module(module, [Tensor(shape)], klass, sem, 0, True)
        source = I.Source(tuple(shape[1:]), "any input the model takes")
        self.facts.runs.append(ModelRun(klass.name.value, "symbolic", shape, interpreter.run.steps, output,
                                        interpreter.run.problems, klass))
        for problem in interpreter.run.problems:
            if problem.kind in ("features", "state", "cat", "broadcast", "matmul", "view"):
                self._report(problem, source, None)

    # -- reporting
    def _report(self, problem: Problem, source: I.Source, feed: Optional[cst.Call]) -> None:
        sem = self.sem
        if not problem.certain:
            return
        code = CODES.get(problem.kind)
        if code is None:
            return
        here = problem.definition if problem.definition is not None and problem.definition in sem.index.order else (
            problem.node if problem.node in sem.index.order else feed)
        if here is None:  # the layer is another file's: the innermost call of this file that leads there
            here = next((call for call in reversed(problem.calls) if call in sem.index.order), None)
        if here is None:
            return
        key = (here, code)
        if key in self._reported:
            return
        self._reported.add(key)
        message, fix = _message(problem, source, sem, here is feed or here is not problem.definition)
        finding = Finding(code, here, message, fix)
        self.facts.findings.append(finding)
        if problem.definition is not None:
            self._by_definition.setdefault(id(problem.definition), []).append((finding, problem))

    def _settle_fixes(self) -> None:
        """A fix writes the size a layer gets; where another input fits the layer as it is, or
        two inputs need different sizes, no number is right for all of them: no fix."""
        for key, entries in self._by_definition.items():
            sizes = {str(problem.misfit.got) for _, problem in entries if problem.misfit is not None}
            if key in self._fitted or len(sizes) > 1:
                for finding, _ in entries:
                    if finding.fix is not None:
                        finding.fix = None
                        finding.message = finding.message.split("; build it with ")[0] + \
                            "; another input of this program fits the layer as it is, so no size suits both"


_SCRIPT_METHODS = frozenset({"view", "reshape", "flatten", "permute", "transpose", "squeeze", "unsqueeze",
                             "expand", "matmul", "mm", "bmm", "softmax", "log_softmax", "dot"})


def _script_statements(module: cst.Module):
    """The calls a script runs at its top level (also under `if __name__ == "__main__":`), as
    statements or assigned: `y = F.log_softmax(a, 4)`."""
    pending = list(module.body)
    while pending:
        statement = pending.pop(0)
        if isinstance(statement, cst.If) and isinstance(statement.test, cst.Comparison) and \
                isinstance(statement.test.left, cst.Name) and statement.test.left.value == "__name__":
            pending[:0] = list(statement.body.body)
            continue
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            value = getattr(small, "value", None) if isinstance(small, (cst.Expr, cst.Assign, cst.AnnAssign)) else None
            if type(value) is not cst.Call:
                continue
            if type(value.func) is cst.Name and value.func.value == "print":
                # `print('torch:', a.dot(a))`: a tutorial's ops are often printed as they run
                yield from (a.value for a in value.args if type(a.value) is cst.Call)
            else:
                yield value


def _symbolic_input(forward: cst.FunctionDef, layers: Dict[str, Any], depth: int, sem) -> Optional[tuple]:
    """(N, C, H, W) for a forward whose input first reaches a layer that fixes its rank and
    channels (a convolution, a Linear, an Embedding), through submodules and through layers that
    keep any channel count (padding, pooling, activations): the straight-line code that starts
    the forward, before anything rebinds the input. The other parameters stay unknown."""
    params = [p.name.value for p in forward.params.params[1:]]
    if not params or depth > 4:
        return None
    name = params[0]
    statements = list(forward.body.body)
    while statements:
        statement = statements.pop(0)
        if isinstance(statement, cst.If):
            # a branch the constructor decides (`if input.is_cuda and self.ngpu > 1:` with ngpu 1)
            env = {"self." + key: value for key, value in layers.items()}
            condition = evaluate(sem, statement.test, env, 0)
            if condition is True:
                statements = list(statement.body.body) + statements
                continue
            if condition is False and isinstance(statement.orelse, cst.Else):
                statements = list(statement.orelse.body.body) + statements
                continue
            return None
        if isinstance(statement, cst.For):
            return _stepped_input(statement, name, layers, depth, sem)
        if not isinstance(statement, cst.SimpleStatementLine):
            return None
        for small in statement.body:
            attribute = _call_on(getattr(small, "value", None), name)
            targets = [t.target for t in getattr(small, "targets", ())] + \
                ([small.target] if isinstance(small, (cst.AugAssign, cst.AnnAssign)) else [])
            if attribute is None:
                if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                    return None
                continue
            layer = layers.get(attribute)
            if isinstance(layer, Layer) and layer.contract.name in _ANY_CHANNELS and len(targets) == 1 \
                    and isinstance(targets[0], cst.Name) and isinstance(small.value, cst.Call) \
                    and _call_on(small.value, name) == attribute and small.value.func.attr.value == attribute:
                name = targets[0].value  # `out = self.pad(x)`: follow `out`
                continue
            return _first_layer_input(layer, depth)
    return None


_ANY_CHANNELS = frozenset(C.IDENTITY_LAYERS) | {
    "ZeroPad1d", "ZeroPad2d", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
    "Upsample",
}


def _elsewhere(source, other_sem, sibling: str):
    """A source of another file, described with that file's name (`CIFAR10 3×32×32 (train.py:7)`)."""
    described = I.Source(source.sample, source.label, source.batch_size, source.batched)
    where = source.where
    if where is not None:
        line = I.line_of(*where)
        described.label = f"{source.label} ({sibling}:{line})" if line else f"{source.label} ({sibling})"
    elif source.label.startswith("any input"):
        described.label = f"any input {sibling}'s model takes"
    return described


def _module_classes(sem) -> set:
    """The file's module classes, and those whose base a star import hides (`class UNet(nn.Module)`
    after `from .parts import *`): spelled `Module`, or a project module class."""
    found = set(sem.module_classes())
    for klass in sem.index.nodes(cst.ClassDef):
        if klass in found or method(klass, "forward") is None:
            continue
        for base in klass.bases:
            value = base.value
            spelled = sem.source(value)
            if (spelled in ("nn.Module", "torch.nn.Module", "Module") and sem.qualified_name(value) is None) or \
                    (isinstance(value, cst.Name) and project_class(sem, value) is not None):
                found.add(klass)
                break
    return found


def _call_on(value, name: str) -> Optional[str]:
    call = value if isinstance(value, cst.Call) else None
    while call is not None:
        if call.args and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == name \
                and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name) \
                and call.func.value.value == "self":
            return call.func.attr.value
        inner = call.args[0].value if call.args else None
        call = inner if isinstance(inner, cst.Call) else None
    return None


def _stepped_input(loop: cst.For, name: str, layers: Dict[str, Any], depth: int, sem) -> Optional[tuple]:
    """The input of a forward that steps through it (`for x_t in input.split(1, dim=1):
    h, c = self.cell(x_t, (h, c))`): the step the first layer in the loop takes, with the
    sequence dimension put back as the symbol L."""
    iterable, target = loop.iter, loop.target
    stepping = step_axis(sem, iterable)
    if stepping is None or not (isinstance(iterable.func.value, cst.Name) and iterable.func.value.value == name
                                and isinstance(target, cst.Name)):
        return None
    kind, axis = stepping
    if axis < 0:
        return None
    for statement in loop.body.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            return None
        for small in statement.body:
            attribute = _call_on(getattr(small, "value", None), target.value)
            if attribute is None:
                continue
            step = _first_layer_input(layers.get(attribute), depth)
            if step is None or axis > len(step):
                return None
            if kind == "split":
                if axis >= len(step) or step[axis] != 1:
                    return None
                return step[:axis] + (D.symbol("L"),) + step[axis + 1:]
            return step[:axis] + (D.symbol("L"),) + step[axis:]
        return None
    return None


def _first_layer_input(layer: Any, depth: int = 0) -> Optional[tuple]:
    while isinstance(layer, Sequence_) and layer.kind == "Sequential" and layer.layers:
        layer = layer.layers[0]
    if isinstance(layer, Submodule):
        forward = method(layer.klass, "forward")
        if forward is None:
            return None
        return _symbolic_input(forward, class_layers(layer.semantic, layer.klass, layer.arguments), depth + 1,
                               layer.semantic)
    if not isinstance(layer, Layer):
        return None
    name = layer.contract.name
    arguments = layer.arguments
    batch = D.symbol("N")
    spatial = {1: ("L",), 2: ("H", "W"), 3: ("D", "H", "W")}
    if name[:-2] in ("Conv", "ConvTranspose") and name[-2:] in ("1d", "2d", "3d"):
        channels = arguments.get("in_channels")  # a constructor parameter nothing fixes: a symbol
        channels = channels if isinstance(channels, int) and not isinstance(channels, bool) else D.symbol("C")
        return (batch, channels) + tuple(D.symbol(s) for s in spatial[int(name[-2])])
    if name == "Linear" and isinstance(arguments.get("in_features"), int):
        return (batch, arguments["in_features"])
    if name == "Embedding":
        return (batch, D.symbol("L"))
    if name in C.CELLS and isinstance(arguments.get("input_size"), int):
        return (batch, arguments["input_size"])
    return None



def _where(sem, node) -> str:
    elsewhere = sem.elsewhere(node)
    if elsewhere:
        return elsewhere
    line = I.line_of(sem, node)
    return f"line {line}" if line else "here"


def _arithmetic(problem: Problem, source: I.Source) -> str:
    """The chain of shapes that led to the problem: `CIFAR10 3×32×32 (line 8) → conv1 6×28×28 → ...`."""
    parts = [source.description]
    steps = [s for s in problem.trace if s.depth <= 1]
    if len(steps) > 9:
        parts.append("…")
        steps = steps[-8:]
    for step in steps:
        parts.append(f"{step.label} {D.shape_text(step.after, batch=False)}")
    return " → ".join(parts)


def _message(problem: Problem, source: I.Source, sem, at_feed: bool) -> Tuple[str, Optional[Tuple[cst.CSTNode, str]]]:
    chain = _arithmetic(problem, source)
    fix = None
    if problem.definition is not None:
        layer_sem = problem.semantic
        where = sem.elsewhere(problem.definition) or _where(layer_sem, problem.definition)
        label = problem.layer.rsplit(".", 1)[-1] if problem.layer else problem.layer
        within = f", in `{problem.within}`," if problem.within and problem.within != problem.layer else ""
        head = f"`{label} = {I.short_text(layer_sem, problem.definition, 50)}` ({where}){within} {problem.misfit.text if problem.misfit else problem.text}"
        if problem.kind == "batch_first":
            head = f"`{label} = {I.short_text(layer_sem, problem.definition, 50)}` ({where}){within} {problem.text}"
        misfit = problem.misfit
        consequence = _consequence(problem, source)
        if misfit is not None and misfit.kind == "features" and D.is_known(misfit.got) and not at_feed:
            argument = _argument_node(problem.definition, misfit.parameter, problem.semantic)
            if argument is not None and _literal(argument):
                written = _factors_text(problem, misfit.got)
                fix = (argument, written)
                consequence += f"; build it with {misfit.parameter}={written}"
        return f"{head}: {chain}; {consequence}", fix
    within = f" in `{problem.within}`" if problem.within else ""
    return f"{problem.text}{within}: {chain}", None


def _consequence(problem: Problem, source: I.Source) -> str:
    misfit = problem.misfit
    batch = str(source.batch_size) if source.batch_size else "N"
    if problem.kind == "batch_first" and misfit is not None:  # a hidden state built for the batch
        torch_error = misfit.text.split("(torch: ", 1)[-1].rstrip(")")
        return (f"the hidden state passed with it is built for the batch, so the forward raises {torch_error} "
                f"for every batch size but {D.text(misfit.expected[1])}; pass batch_first=True (or feed "
                f"`x.transpose(0, 1)`)")
    if problem.kind == "batch_first":
        return ("nothing raises: every time step mixes the samples of the batch and the sequence is read as "
                "the batch; pass batch_first=True (or feed `x.transpose(0, 1)`)")
    if misfit is None:
        return "the forward raises"
    if misfit.kind == "window":
        return "the forward raises `RuntimeError: ... Kernel size can't be greater than actual input size` " \
               "(or `Output size is too small`)"
    if misfit.parameter == "in_features":
        out = (problem.arguments or {}).get("out_features")
        return (f"the forward raises `mat1 and mat2 shapes cannot be multiplied ({batch}x{D.text(misfit.got)} and "
                f"{misfit.expected}x{out if isinstance(out, int) else '…'})`")
    if misfit.parameter == "in_channels":
        return (f"the forward raises `expected input[{batch}, {D.text(misfit.got)}, ...] to have {misfit.expected} "
                f"channels, but got {D.text(misfit.got)} channels instead`")
    if misfit.parameter == "num_features":
        return f"the forward raises `running_mean should contain {D.text(misfit.got)} elements not {misfit.expected}`"
    return "the forward raises"


def _factors_text(problem: Problem, size: int) -> str:
    """`16 * 6 * 6` where the size is a flattened map whose shape the trace shows, else `576`."""
    for step in reversed(problem.trace):
        if step.label in ("flatten", "Flatten", "view", "reshape") and step.before is not None \
                and step.after is not None and step.after[-1] == size and len(step.before) > 2:
            dims = step.before[1:] if step.before[0] == D.symbol("N") else step.before
            if all(D.is_known(d) for d in dims) and D.product(dims) == size and len(dims) > 1:
                return " * ".join(str(d) for d in dims)
        break
    return str(size)


def _literal(node: cst.CSTNode) -> bool:
    """Numbers and arithmetic only (`16 * 5 * 5`): a name may be a parameter other instances of
    the class pass other sizes through, so writing one number there would break them."""
    class Names(cst.CSTVisitor):
        found = False

        def visit_Name(self, name: cst.Name) -> None:
            Names.found = True

    node.visit(Names())
    return not Names.found


def _argument_node(call: cst.Call, parameter: Optional[str], sem) -> Optional[cst.CSTNode]:
    if parameter is None:
        return None
    qualified = sem.qualified_name(call.func)
    contract = C.contract(qualified)
    if contract is None:
        return None
    names = [name for name, _ in contract.parameters]
    for argument in call.args:
        if argument.keyword is not None and argument.keyword.value == parameter:
            return argument.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if parameter in names and names.index(parameter) < len(positional):
        return positional[names.index(parameter)].value
    return None
