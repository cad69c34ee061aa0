"""Run confirmation cases in child processes (one per device) and decide the verdicts.

The parent never imports torch. Each device gets a child (`python -m torchlint.verify._child
DEVICE`) that imports torch once, warms up and then executes cases sent to it as JSON lines. A
case that hangs past its timeout, or kills the child (segfault, `os.abort()`), is reported as
ERROR with the reason, and a fresh child runs the remaining cases.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, Optional, Sequence

from torchlint.verify import static
from torchlint.verify.case import Case

CONFIRMED = "CONFIRMED"
NOT_CONFIRMED = "NOT CONFIRMED"
REFUTED = "REFUTED"
NOT_REFUTED = "NOT REFUTED"
ERROR = "ERROR"
SKIPPED = "SKIPPED"
# The snippets need a package that cannot be installed here (torchvision, torchtext): the static
# part ran and agreed, and the runtime claim was read in the package's released sources.
SOURCE_CHECKED = "SOURCE-CHECKED"
VERDICTS = (CONFIRMED, NOT_CONFIRMED, REFUTED, NOT_REFUTED, ERROR, SKIPPED, SOURCE_CHECKED)
FAILING = (NOT_CONFIRMED, NOT_REFUTED, ERROR)
# The probe of the API-change table's entries: for them REFUTED means the table is wrong (failing).
API_CHANGE_PROBE = "api_change"
# Probes whose REFUTED means a table of torch knowledge is wrong: the API-change table's entries,
# and the signature table compared with the installed torch (TL216).
TABLE_PROBES = (API_CHANGE_PROBE, "signature_table")

DEFAULT_TIMEOUT = 30.0
STARTUP_TIMEOUT = 120.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)


class ChildFailure(Exception):
    """The child died or stopped answering; `reason` says how."""


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def _torch_version_file() -> Optional[Dict[str, str]]:
    """The assignments in torch/version.py, read as text so that the parent needs no
    `import torch`; None when the file cannot be read."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    version_file = Path(list(spec.submodule_search_locations)[0]) / "version.py"
    try:
        text = version_file.read_text(encoding="utf-8")
    except OSError:
        return None
    values: Dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith((" ", "\t", "#")):
            values[name.split(":")[0].strip()] = value.strip().strip("'\"")
    return values


def torch_build_has_cuda() -> bool:
    """Whether the installed torch was built with CUDA or ROCm (whether a GPU is present is
    for a child to find out)."""
    values = _torch_version_file()
    if values is None:
        return True  # cannot tell: ask a child
    return any(values.get(key, "None") not in ("None", "") for key in ("cuda", "hip"))


def cuda_build_missing() -> Optional[str]:
    """Why CUDA cannot exist with the installed torch (a CPU-only build), or None when it may."""
    if torch_build_has_cuda():
        return None
    version = (_torch_version_file() or {}).get("__version__", "unknown")
    return f"this torch build has no CUDA support (torch {version})"


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


class Child:
    """One child process executing cases on `device`."""

    def __init__(self, device: str, warm_up: bool = True) -> None:
        self.device = device
        self.warm_up = warm_up
        self.env: Optional[dict] = None
        self._stderr = tempfile.TemporaryFile()
        environ = dict(os.environ)
        environ["PYTHONPATH"] = os.pathsep.join(
            [_PACKAGE_ROOT] + [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        environ["OMP_NUM_THREADS"] = environ["MKL_NUM_THREADS"] = "1"  # see _child.main
        kwargs = {"start_new_session": True} if os.name == "posix" else {}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "torchlint.verify._child", device]
            + ([] if warm_up else ["--no-warmup"]),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env=environ, **kwargs)
        self._lines: "queue.Queue[Optional[bytes]]" = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next_id = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def stderr_tail(self, limit: int = 600) -> str:
        try:
            self._stderr.seek(0)
            text = self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        lines = [line.strip() for line in text.strip().splitlines()
                 if line.strip() and "Failed to initialize NumPy" not in line]
        # faulthandler's report: keep its headline and the snippet's frame
        fatal = [line for line in lines if line.startswith("Fatal Python error")]
        frames = [line for line in lines if '"<snippet>"' in line]
        if fatal:
            text = " | ".join(fatal[-1:] + frames[:1])
        else:
            text = " | ".join(lines[-4:])
        return text[-limit:]

    def _receive(self, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise ChildFailure(f"timed out after {timeout:g} s {what}")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                try:
                    returncode = self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.kill()
                    returncode = self.proc.returncode or -9
                tail = self.stderr_tail()
                self.kill()
                raise ChildFailure(f"child process died ({_signal_name(returncode)}) {what}"
                                   + (f"; stderr: {tail}" if tail else ""))
            try:
                return json.loads(line)
            except ValueError:
                continue  # not a protocol line

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> dict:
        message = self._receive(timeout, "while starting (importing torch)")
        self.env = message["env"]
        self.env["startup_seconds"] = message.get("startup_seconds")
        return self.env

    def run(self, case: Case, timeout: float) -> dict:
        self._next_id += 1
        request = {"id": self._next_id, "device": self.device, "case": case.to_json()}
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode("utf-8"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # _receive reports how the child died
        return self._receive(timeout, "while running the case")

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                if os.name == "posix":
                    os.killpg(self.proc.pid, signal.SIGKILL)  # the child and its DataLoader workers
                else:
                    self.proc.kill()
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        """End the child: it has nothing to save, so it gets a moment to exit after its stdin
        closes (letting DataLoader workers go), then is killed rather than waited for (torch's
        interpreter shutdown takes a second or more)."""
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=0.2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self._stderr.close()


def _row(case: Case, device: str, static_result: dict) -> dict:
    return {
        "rule": case.rule,
        "title": case.title,
        "kind": "claim" if case.is_claim else "rule",
        "device": device,
        "verdict": None,
        "reason": None,
        "bad": None,
        "good": None,
        "static": static_result,
        "seconds": None,
        "probe": case.probe,
    }


def missing_requirements(case: Case) -> list:
    """The packages of `case.requires` this interpreter (the children's) cannot import. Only
    looks them up, never imports them."""
    missing = []
    for name in case.requires:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def decide_source_checked(row: dict, case: Case, missing: Sequence[str]) -> None:
    """The verdict of a case whose snippets cannot run here: the static part decides."""
    static_result = row["static"]
    where = case.source or "its released sources"
    if static_result["status"] == static.ERROR:
        row["verdict"], row["reason"] = ERROR, static_result["detail"]
    elif static_result["status"] == static.MISMATCH:
        row["verdict"], row["reason"] = NOT_CONFIRMED, (
            "static analyzer disagrees: " + static_result["detail"])
    else:
        row["verdict"], row["reason"] = SOURCE_CHECKED, (
            f"{', '.join(missing)} not installed, snippets not executed; the runtime claim was "
            f"read in {where}")


def decide(row: dict) -> None:
    """Set row["verdict"] (and "reason") from the observations and the static check."""
    bad, good, static_result = row["bad"], row["good"], row["static"]
    if row["kind"] == "claim":
        if not bad["harm"] and good["harm"]:
            row["verdict"] = REFUTED
        elif bad["harm"]:
            row["verdict"], row["reason"] = NOT_REFUTED, "the claimed misbehaviour happened"
        else:
            row["verdict"], row["reason"] = NOT_REFUTED, (
                "the control did not show the harm either, so the probe cannot tell")
        return
    if static_result["status"] == static.ERROR:
        row["verdict"], row["reason"] = ERROR, static_result["detail"]
        return
    if row.get("probe") in TABLE_PROBES and _decide_api_change(row):
        return
    problems = []
    if not bad["harm"]:
        problems.append("bad snippet showed no harm")
    if good["harm"]:
        problems.append("good snippet still showed the harm")
    if static_result["status"] == static.MISMATCH:
        problems.append("static analyzer disagrees: " + static_result["detail"])
    if problems:
        row["verdict"], row["reason"] = NOT_CONFIRMED, "; ".join(problems)
    else:
        row["verdict"] = CONFIRMED


def _decide_api_change(row: dict) -> bool:
    """An API-change entry's verdict where it differs from a rule case's: the entry's claim not
    seen on this torch is REFUTED (and fails the run). False: decide as for any rule case."""
    bad = row["bad"]
    if not bad["harm"]:
        row["verdict"], row["reason"] = REFUTED, "the table's claim did not hold on this torch: " + bad["evidence"]
        return True
    return False


def _run_device(device: str, cases: Sequence[Case], rows: Dict[tuple, dict], child: Optional[Child],
                timeout: float, envs: Dict[str, dict], warm_up: bool) -> None:
    current: Optional[Child] = child
    fatal: Optional[str] = None
    if current is None:  # the device cannot exist with this torch build
        envs[device] = {"device_available": False, "device_name": None, "device_memory_gb": None}
        for index, case in enumerate(cases):
            row = rows[(index, device)]
            row["verdict"], row["reason"] = SKIPPED, (
                f"case runs only on {', '.join(case.devices)}" if device not in case.devices
                else f"{device} is not available (CPU-only torch build)")
        return
    try:
        envs[device] = current.wait_ready()
    except ChildFailure as failure:
        current.close()
        current = None
        fatal = f"no child process could start on {device}: {failure}"
    for index, case in enumerate(cases):
        row = rows[(index, device)]
        if device not in case.devices:
            row["verdict"], row["reason"] = SKIPPED, f"case runs only on {', '.join(case.devices)}"
            continue
        missing = missing_requirements(case)
        if missing:
            decide_source_checked(row, case, missing)
            continue
        if fatal is not None:
            row["verdict"], row["reason"] = ERROR, fatal
            continue
        if current is None:
            current = Child(device, warm_up)  # the previous one died or hung
        if current.env is None:
            try:
                envs[device] = current.wait_ready()
            except ChildFailure as failure:
                current.close()
                current = None
                # A child that cannot start will not start for the next case either.
                fatal = f"no child process could start on {device}: {failure}"
                row["verdict"], row["reason"] = ERROR, fatal
                continue
        if not current.env.get("device_available", True):
            for other_index in range(len(cases)):
                other = rows[(other_index, device)]
                if other["verdict"] is None:
                    other["verdict"], other["reason"] = SKIPPED, f"{device} is not available"
            break
        try:
            result = current.run(case, timeout)
        except ChildFailure as failure:
            current.close()
            current = None
            row["verdict"], row["reason"] = ERROR, str(failure)
            continue
        row["seconds"] = result.get("seconds")
        if "error" in result:
            row["verdict"], row["reason"] = ERROR, result["error"]
            row["bad"] = result.get("bad")
            continue
        row["bad"], row["good"] = result["bad"], result["good"]
        decide(row)
    if current is not None:
        current.close()


def run_cases(cases: Sequence[Case], devices: Optional[Sequence[str]] = None,
              timeout: float = DEFAULT_TIMEOUT, warm_up: bool = True) -> dict:
    """Verify `cases` on `devices` (None: cpu, plus cuda when available; a device that is
    requested explicitly but absent gives SKIPPED rows) and return the report dict. The static
    checks run while the children import torch. `warm_up=False` skips the children's warm-up
    (for tests whose cases use no optimizer; the first optimizer then costs ~2 s in a case)."""
    started = time.perf_counter()
    explicit = devices is not None
    has_cuda = torch_build_has_cuda()
    if devices is None:
        devices = ["cpu"] + (["cuda"] if has_cuda else [])
    devices = list(dict.fromkeys(devices))
    children = {device: None if device == "cuda" and not has_cuda else Child(device, warm_up)
                for device in devices}
    try:
        lint, unavailable = static.load_linter()
        load_error = None
    except Exception as exc:  # noqa: BLE001 - the engine exists but does not import
        lint, unavailable = None, ""
        load_error = f"torchlint.engine failed to import: {type(exc).__name__}: {exc}"
    static_results = []
    for case in cases:
        if load_error is not None and not case.is_claim:
            static_results.append({"status": static.ERROR, "detail": load_error})
        else:
            static_results.append(static.check_case(case, lint, unavailable))
    rows: Dict[tuple, dict] = {}
    for index, case in enumerate(cases):
        for device in devices:
            rows[(index, device)] = _row(case, device, static_results[index])
    envs: Dict[str, dict] = {}
    threads = [threading.Thread(target=_run_device,
                                args=(device, cases, rows, children[device], timeout, envs, warm_up))
               for device in devices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ordered = []
    for index in range(len(cases)):
        for device in devices:
            row = rows[(index, device)]
            # In the default mode a device that turns out to be absent is not reported per case.
            if not explicit and device != "cpu" and row["verdict"] == SKIPPED \
                    and row["reason"].startswith(f"{device} is not available"):
                continue
            ordered.append(row)
    summary = {verdict: 0 for verdict in VERDICTS}
    for row in ordered:
        summary[row["verdict"]] += 1
    return {
        "version": 1,
        "environment": _environment(envs, devices, lint is not None,
                                    unavailable or load_error or ""),
        "results": ordered,
        "summary": summary,
        "wall_seconds": round(time.perf_counter() - started, 2),
        "exit_code": 1 if any(summary[v] for v in FAILING) or any(
            row["verdict"] == REFUTED and row.get("probe") in TABLE_PROBES for row in ordered) else 0,
    }


def _environment(envs: Dict[str, dict], devices: Sequence[str], analyzer: bool, why: str) -> dict:
    from torchlint import __version__

    first = next((envs[d] for d in devices if "torch" in envs.get(d, {})), None)
    if first is None:  # no child reported: what the parent can read without importing torch
        values = _torch_version_file() or {}
        first = {"torch": values.get("__version__"), "cuda_available": False if not
                 torch_build_has_cuda() else None, "cuda_version": values.get("cuda")}
        first["cuda_version"] = None if first["cuda_version"] in (None, "None") else first["cuda_version"]
    per_device = {}
    for device in devices:
        env = envs.get(device)
        if env is None:
            per_device[device] = {"available": None, "name": None, "memory_gb": None}
            continue
        per_device[device] = {
            "available": env.get("device_available", True),
            "name": env.get("device_name"),
            "memory_gb": env.get("device_memory_gb"),
            "startup_seconds": env.get("startup_seconds"),
        }
        if device == "cpu":
            per_device[device]["cpu_count"] = env.get("cpu_count")
            per_device[device]["torch_threads"] = env.get("torch_threads")
    return {
        "torchlint": __version__,
        "python": first.get("python") or platform.python_version(),
        "platform": first.get("platform") or platform.platform(),
        "torch": first.get("torch"),
        "cuda_available": first.get("cuda_available"),
        "cuda_version": first.get("cuda_version"),
        "devices": per_device,
        "analyzer": "available" if analyzer else (why or "unavailable"),
    }
