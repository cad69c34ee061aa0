"""`torchlint --verify`: run every rule's confirmation case and show, with evidence, that the bad
snippet does the harm and the fixed snippet does not, and that the static analyzer agrees.

    python -m torchlint.verify [CODES...] [--device cpu|cuda|all] [--output-format text|json]
                               [--claims] [--timeout SECONDS]

Nothing here imports torch: the cases run in child processes.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import List, Optional, Sequence

from torchlint.verify.case import Case, Observation

__all__ = ["Case", "Observation", "main", "select_cases", "NO_TORCH_MESSAGE"]

NO_TORCH_MESSAGE = "--verify needs torch: pip install 'torchlint[verify]'"
EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchlint --verify",
        description="Run the rules' runtime confirmation cases (and, with --claims, the "
                    "refuted-claims cases) in child processes.")
    parser.add_argument("codes", nargs="*", metavar="CODE",
                        help="rule codes or prefixes (TL001, TL00) and claim ids (CLAIM-001)")
    parser.add_argument("--device", choices=("cpu", "cuda", "all"), default=None,
                        help="where to run (default: cpu, plus cuda when available); "
                             "`cuda` without CUDA exits 2, `all` skips what is absent")
    parser.add_argument("--output-format", choices=("text", "json"), default="text")
    parser.add_argument("--claims", action="store_true",
                        help="also run the cases refuting popular claims")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds allowed per case (default: 30)")
    return parser


def select_cases(codes: Sequence[str] = (), claims: bool = False) -> List[Case]:
    """Rule cases selected by `codes` (prefixes; all when no TL code is given) plus, with
    `claims` or CLAIM ids among `codes`, the claims. Raises ValueError for a code that selects
    nothing."""
    from torchlint.verify.cases import all_cases
    from torchlint.verify.claims import all_claims

    codes = [c.upper() for c in codes]
    claim_codes = [c for c in codes if c.startswith("CLAIM")]
    rule_codes = [c for c in codes if not c.startswith("CLAIM")]
    for code in rule_codes:
        if not re.fullmatch(r"TL\d{0,3}", code):
            raise ValueError(f"not a rule code: {code!r}")
    selected: List[Case] = []
    if rule_codes or not claim_codes:
        selected.extend(all_cases(rule_codes or None))
    if claims or claim_codes:
        selected.extend(all_claims(claim_codes or None))
    matched = {c for c in codes if any(case.rule.startswith(c) for case in selected)}
    unknown = [c for c in codes if c not in matched]
    if unknown:
        raise ValueError(f"no confirmation case for {', '.join(unknown)}")
    return selected


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of `torchlint --verify` and `python -m torchlint.verify`; returns the exit
    code: 0 when nothing is NOT CONFIRMED / NOT REFUTED / ERROR, 1 otherwise, 2 for usage errors,
    a missing torch, or `--device cuda` without CUDA."""
    import importlib.util

    try:
        args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if importlib.util.find_spec("torch") is None:
        sys.stderr.write(NO_TORCH_MESSAGE + "\n")
        return EXIT_ERROR
    try:
        cases = select_cases(args.codes, args.claims)
    except ValueError as error:
        sys.stderr.write(f"torchlint --verify: {error}\n")
        return EXIT_ERROR
    from torchlint.verify.report import render_json, render_text
    from torchlint.verify.runner import DEFAULT_TIMEOUT, cuda_build_missing, run_cases

    # An explicitly requested device that is absent is an error, so that a GPU job that lost
    # its GPU fails instead of passing with every case SKIPPED; `--device all` still skips.
    if args.device == "cuda" and cuda_build_missing() is not None:
        sys.stderr.write(f"torchlint --verify: --device cuda: {cuda_build_missing()}\n")
        return EXIT_ERROR
    devices = {None: None, "cpu": ["cpu"], "cuda": ["cuda"], "all": ["cpu", "cuda"]}[args.device]
    report = run_cases(cases, devices=devices, timeout=args.timeout or DEFAULT_TIMEOUT)
    if args.device == "cuda" and report["environment"]["devices"]["cuda"]["available"] is False:
        sys.stderr.write("torchlint --verify: --device cuda: no CUDA device is available "
                         "(torch.cuda.is_available() is False)\n")
        return EXIT_ERROR
    render = render_json if args.output_format == "json" else render_text
    sys.stdout.write(render(report))
    return report["exit_code"]
