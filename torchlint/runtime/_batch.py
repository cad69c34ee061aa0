"""Run several scripts under `torchlint run`, one after the other, in one process (torch is
imported once). For the tests and the benchmark, not for users: a real run is one script in its
own process.

    python -m torchlint.runtime._batch OUTDIR [--max-steps N] SCRIPT [SCRIPT...]

writes OUTDIR/<script name>.json (the json report, plus "exit_code_seen") and OUTDIR/<script
name>.html (the HTML report, `--html`) for each script. A
script's line `# torchlint-run: args=--max-steps,5; ...` adds options for that script (see
fixtures/run/README.md). The process-wide state a script may change (grad mode, default dtype,
anomaly mode, random seeds, warning filters and the "already warned" registries) is reset before
each one.
"""

from __future__ import annotations

import json
import os
import re
import sys
import warnings
from typing import Dict, List

_DIRECTIVES = re.compile(r"^#\s*torchlint-run:(.*)$", re.MULTILINE)


def directives(path: str) -> Dict[str, str]:
    """The `# torchlint-run: key=value; key=value` settings of a fixture script."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return {}
    found: Dict[str, str] = {}
    for match in _DIRECTIVES.finditer(text):
        for item in match.group(1).split(";"):
            key, sep, value = item.strip().partition("=")
            if sep:
                found[key.strip()] = value.strip()
    return found


def _reset(filters: list) -> None:
    import torch

    torch.set_grad_enabled(True)
    torch.autograd.set_detect_anomaly(False)
    torch.set_default_dtype(torch.float32)
    torch.manual_seed(0)
    warnings.filters[:] = filters
    warnings._filters_mutated()  # type: ignore[attr-defined]
    for module in list(sys.modules.values()):
        registry = getattr(module, "__warningregistry__", None)
        if isinstance(registry, dict):
            registry.clear()


def main(argv: List[str]) -> int:
    from torchlint.runtime.command import main as run

    out_dir, rest = argv[0], argv[1:]
    extra: List[str] = []
    while rest and rest[0].startswith("--"):
        extra += rest[:2]
        rest = rest[2:]
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch  # noqa: F401 - once, before the first script

    filters = warnings.filters[:]
    os.makedirs(out_dir, exist_ok=True)
    for script in rest:
        _reset(filters)
        name = os.path.basename(script).split(".")[0]
        target = os.path.join(out_dir, name + ".json")
        own = [a for a in directives(script).get("args", "").split(",") if a]
        page = os.path.join(out_dir, name + ".html")
        code = run(extra + own + ["--output-format", "json", "-o", target, "--html", page, script])
        try:
            with open(target, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            data = {}
        data["exit_code_seen"] = code
        with open(target, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
