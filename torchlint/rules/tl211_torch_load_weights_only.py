"""TL211: `torch.load(path)` of a checkpoint that `weights_only=True` (the default since PyTorch
2.6) cannot read: an argparse.Namespace, a whole model, NumPy values."""

from __future__ import annotations

from typing import List, Optional, Set

import libcst as cst

from torchlint.analysis import checkpoints
from torchlint.analysis.api_changes import BY_API
from torchlint.analysis.semantic import method_call
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_CHANGE = BY_API["torch.load"]  # the table's entry: weights_only's default flipped in 2.6
_ALLOWLISTING = ("torch.serialization.add_safe_globals", "torch.serialization.safe_globals")


class TorchLoadWeightsOnly(Rule):
    code = "TL211"
    name = "torch-load-weights-only"
    summary = ("`torch.load(path)` of a checkpoint holding an argparse.Namespace, a whole model or NumPy values "
               "raises UnpicklingError since PyTorch 2.6 (`weights_only=True` by default)")
    fix_availability = "sometimes"
    default_severity = Severity.WARNING
    severity_docs = """
An **error** when the load reads a checkpoint this file saves (linked by path or by a key read
back) and that checkpoint certainly holds something `weights_only=True` refuses (an
argparse.Namespace, a whole module, an optimizer or scheduler object, NumPy values, a
`defaultdict`, an instance of a class of the file, a scheduler state dict that holds an object:
`GradualWarmupScheduler`'s `after_scheduler`, or what a scheduler class of the file derived from
torch's `LRScheduler` stores on `self`): the load raises `UnpicklingError`. The message
names the culprit and where it is saved (`'args'`: an argparse.Namespace, saved at line 58, or
at `train.py:58` for a checkpoint another project file saves under the file name this load
reads). The same for `resume_or_load(...)` of an fvcore / detectron2 checkpointer whose
`save(name, **extra)` in this file stores such a value, and for a load of a path named for
resuming (`torch.load(args.resume)`) in a script whose every save it may read (the saves paired
with another load aside) holds such a value. A **warning** when the load cannot be
linked to the save but their paths may name the same file (`torch.load(args.resume)`), and when a
bare `except` (or `except Exception`) around the load turns the failure into starting from
scratch. A **note** when nothing is known of what is loaded (also when every save of the file
writes another file name: a pretrained state dict loads fine), or with `pickle_module=`.
"""
    triggers = ("load",)
    node_types = (cst.Call,)
    confirmation_module = "tl211"
    docs = """
## What it does
Flags `torch.load(...)` without `weights_only=` and judges, from what the same file saves with
`torch.save`, whether the load will fail:

- **error**: the load reads a checkpoint this file saves (the same path: the same string, the same
  name, the same expression such as `os.path.join(args.dir, "best.pth")`, or a key of the saved dict
  read back, `ckpt["args"]`) and that checkpoint holds something `weights_only=True` refuses: an
  `argparse.Namespace` (`{"args": args}` where `args = parser.parse_args()`), a whole `nn.Module`
  (`torch.save(model, path)`), an optimizer or scheduler object, NumPy values (`x.numpy()`,
  `np.float64(...)`), a `collections.defaultdict`, an instance of a class of the file;
- **warning**: the file saves such a checkpoint, and this load's path cannot be linked to it
  (`torch.load(args.resume)`);
- **note**: nothing known about what is loaded (no save in the file, or saves whose content is not
  known): the load works for tensors and state dicts and raises for the rest; also a load with
  `pickle_module=`, which (measured) makes torch.load default to `weights_only=False`, the full
  unpickler, which runs code from the file.

A load that this file's own saves do not explain is judged by the saves of the project's other
files (the files beside it, `sys.path` additions, the project root and its `src/`; at most 200
files, one directory level): the two are linked by the file name both spell (a literal, the last
part of an `os.path.join` or f-string, an argparse or class-attribute default), so `resume.py`'s
`torch.load("model.pth")` of what `train.py` saves with `torch.save(model, "model.pth")` is an
**error** whose message names `train.py` and its line; a linked state-dict save makes it silent; a
load that names no file both share, in a project whose other file saves a whole model or a
Namespace, is a **warning**; a save under a different file name is not matched.

Loads through fvcore's `Checkpointer` and detectron2's `DetectionCheckpointer` count as loads:
their `_load_file` calls `torch.load(f, map_location=...)` without `weights_only` (read in
fvcore/common/checkpoint.py). `checkpointer.resume_or_load(path)` reads the last checkpoint the
same checkpointer saved, `checkpointer.load(path)` the file named; what
`checkpointer.save(name, **extra)` stores is `{"model": state_dict, ...state dicts, **extra}`,
so an `extra` value such as `args=args` decides. No fix for these (the call is not
`torch.load`).

Not flagged: a load with an explicit `weights_only=` (either value: an informed choice); a load of
what the file saves as tensors, numbers, strings and state dicts only (`model.state_dict()`,
`optimizer.state_dict()`, `vars(args)`, `{"epoch": epoch, "model": model.state_dict()}`);
`model.load_state_dict(torch.load(path))` and `state = torch.load(path)` ...
`model.load_state_dict(state)` (a state dict is read); `torch.load(..., **kwargs)`;
`torch.hub.load_state_dict_from_url`, `np.load`, `pickle.load` and a function of your own called
`load`; a load inside `with torch.serialization.safe_globals([...]):` (the classes are
allowlisted). `map_location=` does not change the judgement. In a file that allowlists globals
with `torch.serialization.add_safe_globals` a finding is at most a note.

## Why is this bad?
PyTorch 2.6 changed the default of `torch.load`'s `weights_only` from `False` to `True`: the
weights-only unpickler reads tensors, numbers, strings and containers of them, and refuses every
other global. Measured on torch 2.13: loading a checkpoint that holds an `argparse.Namespace`, a
whole `nn.Module`, an optimizer object, a NumPy scalar or array, or a `defaultdict` raises
`_pickle.UnpicklingError: Weights only load failed ... Unsupported global: GLOBAL
argparse.Namespace was not an allowed global by default`; a dict of state dicts, tensors, ints,
floats and strings loads fine. Code written for PyTorch 1.x saves `{"args": args, ...}` and
`torch.save(model, path)` freely; on today's PyTorch its "resume" or evaluation script stops at the
load (or, under a bare `except`, silently never resumes).

## Example
```python
args = parser.parse_args()
torch.save({"args": args, "model": model.state_dict()}, "checkpoint.pth")
checkpoint = torch.load("checkpoint.pth")
```

Use instead:
```python
args = parser.parse_args()
torch.save({"args": vars(args), "model": model.state_dict()}, "checkpoint.pth")
checkpoint = torch.load("checkpoint.pth")  # weights_only=True reads it
```

or, for a file you wrote yourself and trust, `torch.load("checkpoint.pth", weights_only=False)`.

## Fix safety
For an error or a warning the fix adds `weights_only=False`, which loads the checkpoint as PyTorch
before 2.6 did. It is unsafe: `weights_only=False` runs the full unpickler, and unpickling a file
can execute arbitrary code, so only do it for checkpoints you created yourself or got from a
source you trust. The safe change is in the save: store `vars(args)` instead of `args`, a
`state_dict()` instead of a whole model or optimizer, tensors or Python numbers instead of NumPy
values; or allowlist the classes with `torch.serialization.add_safe_globals([...])`. Notes have no
fix.

## References
- https://pytorch.org/docs/stable/generated/torch.load.html (weights_only)
- https://pytorch.org/docs/stable/notes/serialization.html#weights-only
- https://github.com/pytorch/pytorch/releases/tag/v2.6.0 (torch.load now uses weights_only=True)
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if not checkpoints.is_torch_load(sem, node):
            if method_call(node, "load", "resume_or_load") and _checkpointer_of(sem, node) is not None:
                self._check_checkpointer_load(node, ctx)
            return
        if any(arg.star for arg in node.args) or checkpoints.argument(node, 99, _CHANGE.keyword) is not None:
            return
        if checkpoints.argument(node, 2, "pickle_module") is not None:
            ctx.report(node, (
                f"`{ctx.short(node, 40)}` with `pickle_module=` and no `weights_only=` loads with the full "
                f"unpickler (`weights_only=False` is its default then), which can run code from the file; pass "
                f"`weights_only=` explicitly"), severity=Severity.NOTE)
            return
        if _is_state_dict_argument(sem, node) or _inside_safe_globals(sem, node):
            return
        path = checkpoints.argument(node, 0, "f")
        key = checkpoints.path_key(sem, path)
        linked = checkpoints.saves_by_path(sem).get(key, []) if key is not None else []
        allowlisted = any(name in sem.called_names for name in _ALLOWLISTING)
        refused = [s for s in linked if s.content.verdict == checkpoints.UNLOADABLE]
        if linked and not refused:
            if all(s.content.verdict == checkpoints.WEIGHTS for s in linked):
                return
            self._note(node, ctx)
            return
        severity = Severity.ERROR
        if not refused:
            every = [s for s in checkpoints.saves(sem) if s.content.verdict == checkpoints.UNLOADABLE]
            keys = _keys_read(sem, node)
            refused = [s for s in every if s.content.keys & keys]
            if not refused:
                # Only saves that may write the file this load reads: not `torch.save(model,
                # "model.pth")` for a load of "expert_trajectories.pt".
                every = [s for s in every if _may_be_same_file(sem, path, s.path)]
                # Another file of the project may write what this one reads (`train.py` saves,
                # `generate.py` loads): linked by the file name both name, else only possibly.
                across = _other_files(sem, path)
                if across is not None:
                    matched, possible = across
                    if matched is not None:
                        hit = [p for p in matched if p.save.content.verdict == checkpoints.UNLOADABLE]
                        if not hit:
                            if not all(p.save.content.verdict == checkpoints.WEIGHTS for p in matched):
                                self._note(node, ctx)
                            return
                        self._report_other(node, ctx, hit[0], Severity.ERROR, allowlisted)
                        return
                    if not every and possible:
                        self._report_other(node, ctx, possible[0], Severity.WARNING, allowlisted)
                        return
                refused, severity = every, Severity.WARNING
                paired = {checkpoints.path_key(sem, checkpoints.argument(c, 0, "f"))
                          for c in sem.index.nodes(cst.Call) if c is not node and checkpoints.is_torch_load(sem, c)}
                if every and _resumes(sem, path) and all(
                        s.content.verdict == checkpoints.UNLOADABLE for s in checkpoints.saves(sem)
                        if _may_be_same_file(sem, path, s.path) and checkpoints.path_key(sem, s.path) not in paired):
                    # `torch.load(args.resume)` in a script whose every save it may read holds a
                    # whole model (a Namespace, ...): resuming from its own checkpoints fails.
                    severity = Severity.ERROR
        if not refused:
            self._note(node, ctx)
            return
        if allowlisted:
            self._note(node, ctx)
            return
        save = refused[0]
        from torchlint.analysis.project import _position  # noqa: PLC0415 - only for a finding

        where = f"line {_position(sem, save.call)[0]}"
        linked_how = f"the checkpoint it reads, saved at {where} (`{ctx.short(save.call, 40)}`)," \
            if severity is Severity.ERROR else \
            f"if it reads the checkpoint saved at {where} (`{ctx.short(save.call, 40)}`), that checkpoint"
        self._report(node, ctx, linked_how, save.content, ctx.short, severity)

    def _check_checkpointer_load(self, node: cst.Call, ctx: RuleContext) -> None:
        """`checkpointer.load(path)` / `.resume_or_load(path)` of fvcore's `Checkpointer` (and
        detectron2's `DetectionCheckpointer`, which derives from it): its `_load_file` calls
        `torch.load(f, map_location=...)` without `weights_only` (fvcore/common/checkpoint.py),
        so it reads with `weights_only=True` today. Judged by what a checkpointer of this file
        saves: `checkpointer.save(name, **extra)` writes `{"model": state_dict, <checkpointables'
        state dicts>, **extra}` to `<save_dir>/<name>.pth`."""
        sem = ctx.semantic
        if any(name in sem.called_names for name in _ALLOWLISTING) or _inside_safe_globals(sem, node):
            return
        refused = []
        for call in sem.index.nodes(cst.Call):
            if not (method_call(call, "save") and _checkpointer_of(sem, call) is not None):
                continue
            if sem.source(call.func.value) != sem.source(node.func.value) \
                    and not isinstance(node.func.value, cst.Call):
                continue  # another checkpointer's save
            extra = [(arg, arg.value) for arg in call.args if arg.keyword is not None]
            if any(arg.star for arg in call.args):
                continue
            wrapped = [(cst.DictElement(cst.SimpleString(repr(arg.keyword.value)), value), value)
                       for arg, value in extra]
            content = checkpoints._combine(sem, wrapped, 0)
            if content.verdict == checkpoints.UNLOADABLE:
                refused.append((call, content))
        if not refused:
            return
        call, content = refused[0]
        path = checkpoints.argument(node, 0, "path")
        saved = call.args[0].value if call.args and call.args[0].keyword is None else None
        saved_name = checkpoints.file_name(sem, saved)
        loaded_name = checkpoints.file_name(sem, path)
        # `resume_or_load(path)` reads the last checkpoint the checkpointer saved (when there is
        # one), whatever `path` names; `load(path)` reads `path`.
        resumes = method_call(node, "resume_or_load")
        if not resumes and saved_name is not None and loaded_name is not None \
                and loaded_name not in (saved_name, saved_name + ".pth"):
            return  # it writes another file
        from torchlint.analysis.project import _position  # noqa: PLC0415 - only for a finding

        where = f"line {_position(sem, call)[0]}"
        severity = Severity.ERROR if resumes or loaded_name is not None else Severity.WARNING
        linked_how = (f"the checkpoint it resumes from, saved at {where} (`{ctx.short(call, 40)}`)," if resumes
                      else f"if it reads the checkpoint saved at {where} (`{ctx.short(call, 40)}`), that checkpoint")
        self._report(node, ctx, linked_how, content, ctx.short, severity, fix=False,
                     via=" (fvcore's `Checkpointer` calls `torch.load` without `weights_only`)")

    def _report_other(self, node: cst.Call, ctx: RuleContext, other: "checkpoints.ProjectSave", severity: Severity,
                      allowlisted: bool) -> None:
        if allowlisted:
            self._note(node, ctx)
            return
        origin = other.origin(ctx.semantic.project)

        def short(expr, limit):
            text = " ".join(other.semantic.source(expr).split())
            return text if len(text) <= limit else text[: limit - 1] + "…"

        call = short(other.save.call, 40)
        linked_how = f"the checkpoint it reads, saved at {origin} (`{call}`)," if severity is Severity.ERROR else \
            f"if it reads the checkpoint {origin} saves (`{call}`), that checkpoint"
        self._report(node, ctx, linked_how, other.save.content, short, severity)

    def _report(self, node: cst.Call, ctx: RuleContext, linked_how: str, content, short, severity: Severity,
                fix: bool = True, via: str = "") -> None:
        holder = short(content.node, 30) if content.node is not None else "it"
        culprit = f"{content.what} (`{holder}`)"
        if content.keys:
            culprit = f"`{sorted(content.keys)[0]!r}`: {culprit}"
        hidden = ""
        if _caught_by_broad_except(ctx.semantic, node):
            # The program goes on as if there were no checkpoint: it starts from scratch.
            hidden = (" (the `except` around it swallows the error: the checkpoint is silently never loaded "
                      "and the program starts from scratch)")
            severity = Severity.WARNING
        raises = "raises" if severity is Severity.ERROR or hidden else "would raise"
        message = (
            f"`{ctx.short(node, 40)}`{via} {raises} `UnpicklingError: Weights only load failed`{hidden}: since PyTorch "
            f"2.6 `weights_only` defaults to True, and {linked_how} holds "
            f"{culprit}; {content.instead.replace('{name}', 'args')}, or pass "
            f"`weights_only=False` for a file you trust"
        )
        ctx.report(node, message, _fix(node) if fix else None, severity=severity)

    def _note(self, node: cst.Call, ctx: RuleContext) -> None:
        ctx.report(node, (
            f"`{ctx.short(node, 40)}` loads with `weights_only=True` (the default since PyTorch 2.6): a checkpoint "
            f"holding more than tensors, state dicts and plain Python values (an argparse.Namespace, a whole model, "
            f"NumPy values) raises `UnpicklingError`; pass `weights_only=` to say which it is"), severity=Severity.NOTE)


# Checkpointers whose `load` reads with `torch.load(f, map_location=...)` and no `weights_only`
# (read in fvcore/common/checkpoint.py; detectron2's DetectionCheckpointer derives from it and
# loads `.pth` files through the same `_load_file`).
_CHECKPOINTERS = ("fvcore.common.checkpoint.Checkpointer", "fvcore.common.checkpoint.PeriodicCheckpointer",
                  "detectron2.checkpoint.DetectionCheckpointer",
                  "detectron2.checkpoint.detection_checkpoint.DetectionCheckpointer")


def _checkpointer_of(sem, call: cst.Call) -> Optional[cst.Call]:
    """The construction of the checkpointer whose method `call` calls: `DetectionCheckpointer(model,
    out).resume_or_load(...)`, or a name (or `self.` attribute) assigned one in this file."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    receiver = func.value
    made = receiver if isinstance(receiver, cst.Call) else None
    if made is None and isinstance(receiver, (cst.Name, cst.Attribute)):
        spelled = sem.source(receiver)
        for assign in sem.index.nodes(cst.Assign):
            if isinstance(assign.value, cst.Call) and any(sem.source(t.target) == spelled for t in assign.targets):
                made = assign.value
                break
    if made is None:
        return None
    name = sem.qualified_name(made.func) or ""
    return made if name in _CHECKPOINTERS else None


def _resumes(sem, path) -> bool:
    """The load reads a path named for resuming (`args.resume`, `opt.resume_snapshot`,
    `cfg.resume_from`)."""
    return path is not None and "resume" in sem.source(path).lower()


def _may_be_same_file(sem, load_path, save_path) -> bool:
    """Whether a load and a save may name the same file: unless both file names are known and
    differ (`"expert_trajectories.pt"` is never `"model.pth"`)."""
    loaded = checkpoints.file_name(sem, load_path)
    saved = checkpoints.file_name(sem, save_path)
    return loaded is None or saved is None or loaded == saved


def _other_files(sem, path):
    """(the other files' saves linked to this load by the file name both name, or None when none
    is; the refused saves that may write what it loads: the file names of the load or the save are
    not known), or None when the project has no save (or the project layer is off)."""
    others = checkpoints.project_saves(sem)
    if not others:
        return None
    name = checkpoints.file_name(sem, path)
    matched = [p for p in others if name is not None and p.name == name]
    if matched:
        return matched, []
    possible = [p for p in others if p.save.content.verdict == checkpoints.UNLOADABLE
                and (name is None or p.name is None)]
    return None, possible


def _is_state_dict_argument(sem, call: cst.Call) -> bool:
    """`model.load_state_dict(torch.load(path))`, or `state = torch.load(path)` then
    `model.load_state_dict(state)` in the same function: what is loaded is a state dict (tensors
    only, which `load_state_dict` needs anyway)."""
    arg = sem.parent(call)
    outer = sem.parent(arg) if isinstance(arg, cst.Arg) else None
    if isinstance(outer, cst.Call) and method_call(outer, "load_state_dict") and outer.args \
            and outer.args[0] is arg:
        return True
    name = _loaded_name(sem, call)
    if name is None:
        return False
    scope = sem.function_of(call) or sem.module
    return any(method_call(use, "load_state_dict") and use.args and isinstance(use.args[0].value, cst.Name)
               and use.args[0].value.value == name for use in sem.index.descendants(scope, cst.Call))


def _loaded_name(sem, call: cst.Call):
    """`name` for `name = torch.load(...)`."""
    assign = sem.parent(call)
    if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
        return assign.targets[0].target.value
    return None


def _inside_safe_globals(sem, node: cst.CSTNode) -> bool:
    """`with torch.serialization.safe_globals([...]): torch.load(...)`: the program allowlisted
    what the checkpoint holds (an informed choice, as an explicit `weights_only=` is)."""
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, cst.With) and any(
                isinstance(item.item, cst.Call) and sem.is_torch(item.item, _ALLOWLISTING[1]) for item in ancestor.items):
            return True
    return False


def _caught_by_broad_except(sem, node: cst.CSTNode) -> bool:
    """`node` is in the body of a `try` with a bare `except:` or `except Exception:` (in its
    function)."""
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(ancestor, cst.Try) and child is ancestor.body:
            for handler in ancestor.handlers:
                if handler.type is None or (isinstance(handler.type, cst.Name)
                                            and handler.type.value in ("Exception", "BaseException")):
                    return True
        child = ancestor
    return False


def _keys_read(sem, call: cst.Call) -> Set[str]:
    """The string keys read off the loaded object: `ckpt = torch.load(p)` then `ckpt["args"]`."""
    name = _loaded_name(sem, call)
    if name is None:
        return set()
    scope = sem.function_of(call) or sem.module
    keys: Set[str] = set()
    for subscript in sem.index.descendants(scope, cst.Subscript):
        value = subscript.value
        if not (isinstance(value, cst.Name) and value.value == name) or len(subscript.slice) != 1:
            continue
        index = subscript.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            keys.add(str(index.value.evaluated_value))
    return keys


def _fix(call: cst.Call) -> FixSpec:
    args: List[cst.Arg] = list(call.args)
    added = cst.Arg(value=cst.Name("False"), keyword=cst.Name("weights_only"),
                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                          whitespace_after=cst.SimpleWhitespace("")))
    if args:
        last = args[-1]
        if last.comma is cst.MaybeSentinel.DEFAULT:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        else:
            # `f(a,\n)`: `f(a, weights_only=False,\n)`, the trailing comma and its line break kept.
            added = added.with_changes(comma=last.comma)
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_before=last.comma.whitespace_before,
                                                         whitespace_after=cst.SimpleWhitespace(" ")))
    fixed: Optional[cst.Call] = call.with_changes(args=tuple(args) + (added,))
    return FixSpec("Pass `weights_only=False` (only for a checkpoint you trust)", (Replace(call, fixed),),
                   Applicability.UNSAFE)
