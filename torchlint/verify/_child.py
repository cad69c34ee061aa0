"""The child process that executes confirmation cases on one device.

    python -m torchlint.verify._child DEVICE

Protocol (one JSON object per line): the child writes `{"ready": ..., "env": {...}}` once torch
is imported and warmed up, then for every request line read from its original stdin
(`{"id": n, "device": ..., "case": {...}}`) writes one result line (`{"id", "bad", "good",
"seconds"}` or `{"id", "error", "seconds"}`) to its original stdout. The snippets see stdin as
/dev/null and their prints land on stderr, so they cannot corrupt the protocol.
"""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import platform
import sys
import time
import traceback
import warnings


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _memory_gb() -> float:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1)
    except (ValueError, OSError, AttributeError):
        return 0.0


def environment(torch, device: str) -> dict:
    cuda_available = bool(torch.cuda.is_available())
    env = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cuda_available": cuda_available,
        "cuda_version": torch.version.cuda,
        "device": device,
        "device_available": True,
    }
    if device == "cpu":
        env["device_name"] = _cpu_name()
        env["device_memory_gb"] = _memory_gb()
        env["cpu_count"] = os.cpu_count()
        env["torch_threads"] = torch.get_num_threads()
    elif cuda_available:
        props = torch.cuda.get_device_properties(0)
        env["device_name"] = torch.cuda.get_device_name(0)
        env["device_memory_gb"] = round(props.total_memory / 1e9, 1)
        env["device_count"] = torch.cuda.device_count()
    else:
        env["device_available"] = False
        env["device_name"] = None
        env["device_memory_gb"] = None
    return env


def warm_up(torch, device: str) -> None:
    """Pay the lazy first-use costs once (the first optimizer step imports dynamo/sympy, the
    first meta op and the first backward set up their machinery), not inside the first case."""
    import torch.nn as nn
    import torch.utils.data  # noqa: F401

    from torchlint.verify.probes import SavedTensorTracker, other_device

    tracker = SavedTensorTracker()
    with tracker.hooks():
        layer = nn.Linear(4, 4).to(device)
        out = torch.sigmoid(layer(torch.randn(2, 4, device=device))).sum()
    out.backward()
    param = nn.Parameter(torch.randn(4, device=device))
    for optimizer in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW):
        opt = optimizer([param], lr=0.1)
        (param * param).sum().backward()
        opt.step()
        opt.zero_grad()
    torch.ones(2, device="meta") + 1
    try:
        nn.Linear(2, 2).to(other_device(device))(torch.ones(1, 2, device=device))
    except RuntimeError:
        pass
    try:
        torch.randn(2, 3, 4, device=device).transpose(1, 2).view(2, 12)
    except RuntimeError:
        pass
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _snippet_line(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<snippet>"]
    return f" (snippet line {frames[-1].lineno})" if frames else ""


def run_request(request: dict) -> dict:
    from torchlint.verify.probes import describe_exception, run_probe

    case = request["case"]
    device = request["device"]
    result: dict = {"id": request["id"]}
    start = time.perf_counter()
    for side in ("bad", "good"):
        try:
            with warnings.catch_warnings():  # a snippet's filter changes end with it
                observation = run_probe(case["probe"], case[side], device, case.get("expect") or {})
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - reported as ERROR for this case
            result["error"] = (f"{side} snippet raised {describe_exception(exc)}"
                               f"{_snippet_line(exc)}")
            break
        finally:
            gc.collect()
        result[side] = observation.to_json()
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result


def main(argv: list) -> int:
    device = argv[0] if argv else "cpu"
    warm = "--no-warmup" not in argv[1:]
    protocol = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    os.dup2(2, 1)  # anything the snippets print lands on stderr
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # and a snippet reading stdin cannot eat the requests
    os.close(devnull)
    sys.stdin = open(os.devnull, encoding="utf-8")

    def send(obj: dict) -> None:
        protocol.write(json.dumps(obj) + "\n")
        protocol.flush()

    faulthandler.enable()  # a segfault or abort leaves the snippet's line on stderr
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    started = time.perf_counter()
    import torch

    # The cases are tiny: one intra-op thread is fastest, and on a busy machine OpenMP threads
    # spinning at barriers make them 5-10x slower.
    torch.set_num_threads(1)
    env = environment(torch, device)
    if not env["device_available"]:
        send({"ready": True, "env": env, "startup_seconds": round(time.perf_counter() - started, 2)})
        return 0
    if warm:
        warm_up(torch, device)
    gc.collect()
    gc.freeze()  # probes call gc.collect(); keep it from walking torch's own objects
    send({"ready": True, "env": env, "startup_seconds": round(time.perf_counter() - started, 2)})
    for line in requests:
        line = line.strip()
        if not line:
            continue
        send(run_request(json.loads(line)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
