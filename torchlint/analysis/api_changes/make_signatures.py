"""Make the signature table (`signatures.json`) from the installed torch.

    python -m torchlint.analysis.api_changes.make_signatures          # rewrite signatures.json
    python -m torchlint.analysis.api_changes.make_signatures --check  # compare, exit 1 on a difference

This module imports torch; the linter never imports it (the table is read by
`torchlint.analysis.api_changes.signatures`, which does not). `torchlint --verify --select TL216`
runs `table()` in its torch child and compares it with the stored file, so a table that no longer
matches the installed torch is REFUTED.

What is recorded, for every public callable of the namespaces in `NAMESPACES` that has a Python
signature (builtins such as `torch.zeros` or `F.conv2d` have none and are left out):

- its parameters as one string, `(a, b=1, c=…, /, *, d=None, *args, **kwargs)` without
  annotations: a default is written when it is a short scalar literal, else `…` (has a default);
- flags, each measured by calling the callable in a way its binding must refuse (so no body runs):
  `k` it refuses an unknown keyword (`f(_torchlint_probe_=0)` raises TypeError naming that keyword),
  `p` it refuses one positional argument too many (TypeError "positional argument"), `r` it refuses
  a call without its required arguments (TypeError "missing ... required"); `o` the parameters were
  read from the `typing.overload` of an `__init__(self, *args, **kwargs)` (`nn.LSTM`, `nn.GRU`,
  `nn.RNN`: the documented parameter list, which the base class's `__init__` enforces). The rule
  checks a call only in the ways the flags allow;
- its group: the siblings a misplaced keyword is looked up in (`torch.optim` for every optimizer,
  `torch.optim.lr_scheduler`, else the defining module: `torch.nn.modules.loss`).

`aliases` maps every public spelling (`torch.nn.Conv2d`) to the entry's key, the defining module's
spelling (`torch.nn.modules.conv.Conv2d`), which is what `from torch.nn.modules.conv import Conv2d`
resolves to.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import sys
import typing
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

TABLE = Path(__file__).with_name("signatures.json")
PROBE = "_torchlint_probe_"

# (public module, which of its names): "all" = its `__all__` (else every public name), "modules" =
# the nn.Module subclasses and the other classes it exports, "functions" = its public functions.
NAMESPACES: Tuple[Tuple[str, str], ...] = (
    ("torch.optim", "all"),
    ("torch.optim.lr_scheduler", "all"),
    ("torch.nn", "classes"),
    ("torch.nn.functional", "functions"),
    ("torch.nn.init", "all"),
    ("torch.nn.utils", "all"),
    ("torch.nn.utils.rnn", "all"),
    ("torch.nn.utils.parametrizations", "all"),
    ("torch.utils.data", "all"),
    ("torch.utils.checkpoint", "all"),
    ("torch.jit", "all"),
    ("torch.amp", "all"),
    ("torch.cuda.amp", "all"),
    ("torch.autograd", "functions"),
)
# Names of the `torch` namespace itself: torch.load / torch.save, and the Python-level functions
# of torch/functional.py that torch re-exports (the tensor factories are builtins: no signature).
TOP_LEVEL: Tuple[str, ...] = ("load", "save")


def _default(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, (int, float)) and len(repr(value)) <= 12:
        return repr(value)
    if isinstance(value, str) and len(value) <= 16 and value.isidentifier():
        return repr(value)
    return "…"


def render(signature: inspect.Signature, skip_first: bool = False) -> str:
    parts: List[str] = []
    params = list(signature.parameters.values())
    if skip_first:
        params = params[1:]
    kinds = inspect.Parameter
    saw_positional_only = False
    star_written = False
    for param in params:
        if param.kind is kinds.POSITIONAL_ONLY:
            saw_positional_only = True
        elif saw_positional_only:
            parts.append("/")
            saw_positional_only = False
        if param.kind is kinds.VAR_POSITIONAL:
            parts.append(f"*{param.name}")
            star_written = True
            continue
        if param.kind is kinds.KEYWORD_ONLY and not star_written:
            parts.append("*")
            star_written = True
        if param.kind is kinds.VAR_KEYWORD:
            parts.append(f"**{param.name}")
            continue
        text = param.name
        if param.default is not inspect.Parameter.empty:
            text += "=" + _default(param.default)
        parts.append(text)
    if saw_positional_only:
        parts.append("/")
    return "(" + ", ".join(parts) + ")"


def _only_varargs(signature: inspect.Signature) -> bool:
    kinds = {p.kind for p in signature.parameters.values()}
    return kinds <= {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD} and bool(kinds)


def _overload_signature(cls: type) -> Optional[inspect.Signature]:
    """The documented parameters of a class whose `__init__` is `(self, *args, **kwargs)`: its one
    `typing.overload` that is not itself `(*args, **kwargs)`."""
    init = cls.__dict__.get("__init__")
    if init is None:
        return None
    try:
        overloads = typing.get_overloads(init)
    except AttributeError:  # Python < 3.11
        return None
    found = [inspect.signature(o) for o in overloads]
    found = [s for s in found if not _only_varargs(s.replace(parameters=list(s.parameters.values())[1:]))]
    return found[0] if len(found) == 1 else None


def _signature(obj: Any) -> Optional[Tuple[str, str]]:
    """(parameters, "o" when read from an overload) or None when `obj` has no Python signature."""
    if inspect.isbuiltin(obj) or inspect.ismethoddescriptor(obj):
        return None
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    if inspect.isclass(obj) and _only_varargs(signature):
        overload = _overload_signature(obj)
        if overload is not None:
            return render(overload, skip_first=True), "o"
    return render(signature), ""


def _refuses(obj: Any, args: tuple, kwargs: dict, *needles: str) -> bool:
    """Whether calling `obj(*args, **kwargs)` raises TypeError containing every needle (the call is
    one the callable's binding refuses, so no body runs)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj(*args, **kwargs)
    except TypeError as error:
        text = str(error)
        return all(needle in text for needle in needles)
    except Exception:  # noqa: BLE001 - a wrapper ran code of its own: not measured
        return False
    return False


def flags(obj: Any, params: str) -> str:
    """The measured flags (`k`, `p`, `r`) of a callable whose parameters are `params`."""
    from torchlint.analysis.api_changes.signatures import parse

    sig = parse(params)
    found = ""
    if not sig.var_keyword and _refuses(obj, (), {PROBE: 0}, "unexpected keyword argument", repr(PROBE)):
        found += "k"
    if not sig.var_positional and _refuses(obj, (None,) * (len(sig.positional) + 1), {}, "positional argument"):
        found += "p"
    if sig.required_positional and _refuses(obj, (), {}, "missing", "required"):
        found += "r"
    return found


def _public_names(module: Any, which: str) -> List[str]:
    names = getattr(module, "__all__", None) if which == "all" else None
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")]
    return sorted(set(names))


def _wanted(obj: Any, which: str) -> bool:
    if not callable(obj) or inspect.ismodule(obj):
        return False
    if not (getattr(obj, "__module__", None) or "").startswith("torch"):
        return False  # typing.Optional, warnings.warn, ... re-exported
    if which == "classes":
        return inspect.isclass(obj)
    if which == "functions":
        return inspect.isfunction(obj)
    return inspect.isclass(obj) or inspect.isfunction(obj)


def _group(public: str, obj: Any) -> str:
    if public in ("torch.optim", "torch.optim.lr_scheduler"):
        return public
    return getattr(obj, "__module__", public)


def table() -> Dict[str, Any]:
    """The table of the installed torch (imports it)."""
    import torch

    entries: Dict[str, List[str]] = {}
    aliases: Dict[str, str] = {}
    seen: Dict[int, str] = {}

    def add(public_name: str, obj: Any, group: str) -> None:
        key = seen.get(id(obj))
        if key is None:
            qualname = getattr(obj, "__qualname__", "")
            module = getattr(obj, "__module__", "")
            if not qualname or "<" in qualname:
                return
            made = _signature(obj)
            if made is None:
                return
            params, overload = made
            key = f"{module}.{qualname}"
            if key in entries:  # two objects of one name (a wrapper and what it wraps)
                return
            seen[id(obj)] = key
            entries[key] = [params, "".join(sorted(flags(obj, params) + overload)), group]
        if public_name != key:
            aliases[public_name] = key

    for public, which in NAMESPACES:
        try:
            module = importlib.import_module(public)
        except Exception:  # noqa: BLE001 - a namespace this build lacks
            continue
        for name in _public_names(module, which):
            obj = getattr(module, name, None)
            if obj is not None and _wanted(obj, which):
                add(f"{public}.{name}", obj, _group(public, obj))
    functional = importlib.import_module("torch.functional")
    top = list(TOP_LEVEL) + [n for n in functional.__all__ if getattr(torch, n, None) is getattr(functional, n)]
    for name in top:
        obj = getattr(torch, name, None)
        if obj is not None and _wanted(obj, "all"):
            add(f"torch.{name}", obj, "torch")
    return {
        "torch": torch.__version__,
        "python": ".".join(map(str, sys.version_info[:2])),
        "made_by": "python -m torchlint.analysis.api_changes.make_signatures",
        "entries": dict(sorted(entries.items())),
        "aliases": dict(sorted(aliases.items())),
    }


def dumps(data: Dict[str, Any]) -> str:
    """One entry a line: small, and a regenerated table diffs line by line."""
    lines = ["{"]
    for field in ("torch", "python", "made_by"):
        lines.append(f"{json.dumps(field)}: {json.dumps(data[field])},")
    for field in ("entries", "aliases"):
        items = list(data[field].items())
        lines.append(f"{json.dumps(field)}: {{")
        for index, (key, value) in enumerate(items):
            comma = "," if index < len(items) - 1 else ""
            lines.append(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{comma}")
        lines.append("}," if field == "entries" else "}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def differences(stored: Dict[str, Any], made: Dict[str, Any], limit: int = 12) -> List[str]:
    """What differs between the stored table and one made from the installed torch."""
    found: List[str] = []
    for field in ("entries", "aliases"):
        old, new = stored.get(field, {}), made.get(field, {})
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                found.append(f"{key}: table {old.get(key)!r}, installed torch {new.get(key)!r}")
    if len(found) > limit:
        found = found[:limit] + [f"… and {len(found) - limit} more"]
    return found


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the stored table; exit 1 on a difference")
    parser.add_argument("--output", type=Path, default=TABLE)
    args = parser.parse_args(argv)
    made = table()
    if args.check:
        stored = json.loads(args.output.read_text(encoding="utf-8"))
        found = differences(stored, made)
        print("\n".join(found) or f"the table matches torch {made['torch']}")
        return 1 if found else 0
    args.output.write_text(dumps(made), encoding="utf-8")
    print(f"{args.output}: {len(made['entries'])} callables, {len(made['aliases'])} aliases (torch {made['torch']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
