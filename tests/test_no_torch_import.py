"""Linting must never import torch (non-negotiable 1)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_linting_fixtures_does_not_import_torch():
    code = (
        "import sys\n"
        "from torchlint.cli import main\n"
        "main(['--exit-zero', '-q', 'fixtures/'])\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "assert not bad, bad\n"
        "assert 'torchlint.verify' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
