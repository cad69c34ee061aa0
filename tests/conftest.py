import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
# Child processes started by tests import this checkout, not whatever is installed.
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


# --- which tests run, and where --------------------------------------------------------------
# Tests marked `slow` (whole-corpus runs, real external tools, end-to-end runs of torch scripts)
# run in CI (`CI` set to anything but "", "0" or "false": GitHub Actions sets CI=true) or with
# `--runslow`; elsewhere the README's test command skips them and says why.
import pytest  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run the tests marked slow (CI=true does the same)")


def _run_slow(config) -> bool:
    return config.getoption("--runslow") or os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


class _ModulePerWorker:
    """`-n 2` would hand out test by test, so both workers would repeat a module's expensive
    module-scoped setup (every script under `torchlint run`, the verifier's cases). Under plain
    `-n N` (`--dist load`), the tests of one module go to one worker instead (`--dist loadscope`),
    which xdist schedules biggest module first."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config, log):
        if config.getvalue("dist") != "load":
            return None
        from xdist.scheduler import LoadScopeScheduling

        return LoadScopeScheduling(config, log)


def pytest_configure(config):
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_ModulePerWorker(), "torchlint-module-per-worker")


def pytest_collection_modifyitems(config, items):
    if _run_slow(config):
        return
    skip = pytest.mark.skip(reason="slow: runs with --runslow or CI=true")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    if _run_slow(config):
        return "slow tests: run (CI is set or --runslow)"
    return "slow tests: skipped (they run with CI=true or --runslow)"
