"""Run the user's script in this process the way `python SCRIPT ARGS` / `python -m MODULE ARGS`
would: `sys.argv`, a fresh `__main__` module, the script's directory (or, with -m, the working
directory) first on `sys.path`. Everything is restored afterwards so the report can be written.

The run ends in one of these ways (`Outcome.kind`): "finished" (the script returned, or called
`sys.exit(0)`), "stopped" (torchlint stopped it after --max-steps optimizer steps, by raising
`StopRun` from the optimizer's step hook), "exited" (`sys.exit` with a non-zero status), "failed"
(an exception escaped the script) or "interrupted" (Ctrl-C).
"""

from __future__ import annotations

import builtins
import importlib.machinery
import importlib.util
import os
import sys
import time
import types
from dataclasses import dataclass
from typing import Any, List, Optional

FINISHED, STOPPED, EXITED, FAILED, INTERRUPTED = "finished", "stopped", "exited", "failed", "interrupted"


class StopRun(BaseException):
    """Raised from an instrumentation hook to end the script cleanly. A BaseException, so that
    the script's own `except Exception:` does not swallow it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TargetError(Exception):
    """The script or module cannot be found or read (a usage error, exit 2)."""


@dataclass
class Target:
    path: str  # absolute path of the file that runs as __main__
    argv: List[str]  # sys.argv for the script
    path0: str  # what goes first on sys.path
    module: Optional[str] = None  # -m MODULE
    spec: Any = None

    @property
    def name(self) -> str:
        return f"-m {self.module}" if self.module else self.argv[0]


@dataclass
class Outcome:
    kind: str
    seconds: float
    reason: str = ""
    exit_status: Optional[int] = None
    error: Optional[BaseException] = None
    namespace: Optional[dict] = None  # the script's globals (kept for the end-of-run checks)
    classified: bool = False  # a failure that is a known rule's error


def script_target(script: str, args: List[str]) -> Target:
    if not os.path.exists(script):
        raise TargetError(f"can't open file {script!r}: No such file or directory")
    path = os.path.abspath(script)
    if os.path.isdir(path):
        main = os.path.join(path, "__main__.py")
        if not os.path.isfile(main):
            raise TargetError(f"can't find '__main__' module in {script!r}")
        return Target(main, [script] + list(args), path)
    return Target(path, [script] + list(args), os.path.dirname(path))


def module_target(module: str, args: List[str]) -> Target:
    cwd = os.getcwd()
    sys.path.insert(0, cwd)  # `python -m` looks the module up from the working directory
    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(module + ".__main__")
    except (ImportError, ValueError) as error:
        raise TargetError(f"Error while finding module specification for {module!r} ({error})") from None
    finally:
        sys.path.remove(cwd)
    if spec is None or spec.origin is None or not os.path.isfile(spec.origin):
        raise TargetError(f"No module named {module}")
    if not spec.origin.endswith(".py"):
        raise TargetError(f"{module} is not a Python source module ({spec.origin})")
    return Target(os.path.abspath(spec.origin), [os.path.abspath(spec.origin)] + list(args), cwd,
                  module=module, spec=spec)


def run(target: Target, compile_file, stop_reason=lambda: "") -> Outcome:
    """Execute `target` as __main__. `compile_file(source_bytes, path)` returns the code object
    (the reach probes are added there). `stop_reason()` says why a StopRun was raised."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    saved_main = sys.modules.get("__main__")
    main = types.ModuleType("__main__")
    namespace = main.__dict__
    namespace.update({
        "__file__": target.path,
        "__cached__": None,
        "__builtins__": builtins,
        "__package__": None,
        "__spec__": None,
        "__loader__": importlib.machinery.SourceFileLoader("__main__", target.path),
    })
    if target.spec is not None:
        namespace.update({
            "__spec__": target.spec,
            "__package__": target.spec.parent,
            "__loader__": target.spec.loader,
            "__cached__": getattr(target.spec, "cached", None),
        })
    started = time.perf_counter()
    try:
        with open(target.path, "rb") as handle:
            source = handle.read()
    except OSError as error:
        raise TargetError(f"can't open file {target.path!r}: {error.strerror or error}") from None
    sys.argv = list(target.argv)
    sys.path[:] = [target.path0] + [p for p in saved_path[1:]]
    sys.modules["__main__"] = main
    try:
        code = compile_file(source, target.path)
        exec(code, namespace)
    except StopRun as stop:
        return Outcome(STOPPED, time.perf_counter() - started, stop.reason, error=stop, namespace=namespace)
    except SystemExit as exit_:
        status = exit_.code
        seconds = time.perf_counter() - started
        if status is None or status == 0:
            return Outcome(FINISHED, seconds, "the script called sys.exit(0)", 0, namespace=namespace)
        if not isinstance(status, int):
            sys.stderr.write(f"{status}\n")  # what Python prints for sys.exit("message")
            status = 1
        return Outcome(EXITED, seconds, f"the script exited with status {status}", status, namespace=namespace)
    except KeyboardInterrupt as error:
        return Outcome(INTERRUPTED, time.perf_counter() - started, "interrupted (Ctrl-C)", error=error,
                       namespace=namespace)
    except BaseException as error:  # noqa: BLE001 - the script's own failure is reported
        if _caused_by_stop(error):  # the script wrapped our StopRun in an error of its own
            return Outcome(STOPPED, time.perf_counter() - started, stop_reason(), error=error, namespace=namespace)
        return Outcome(FAILED, time.perf_counter() - started, f"{type(error).__name__}: {error}",
                       error=error, namespace=namespace)
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
    return Outcome(FINISHED, time.perf_counter() - started, "the script ran to its end", namespace=namespace)


def _caused_by_stop(error: BaseException) -> bool:
    seen = 0
    current: Optional[BaseException] = error
    while current is not None and seen < 8:
        if isinstance(current, StopRun):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False
