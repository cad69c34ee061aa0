"""API changes: see `torchlint.analysis.api_changes` for the schema."""

from __future__ import annotations

from typing import List

from torchlint.analysis.api_changes import DEFAULT, RAISES, ApiChange, Check

CHANGES: List[ApiChange] = [
    ApiChange(
        api="torch.load",
        kind=DEFAULT,
        keyword="weights_only",
        outcome=RAISES,
        # From 2.4 torch.load without weights_only= warned (FutureWarning, pytorch/pytorch#129239); read in
        # issue threads, not measured here (only the 2.13 behaviour is).
        deprecated_in="2.4",
        changed_in="2.6",
        error="_pickle.UnpicklingError: Weights only load failed ... Unsupported global: GLOBAL argparse.Namespace "
              "was not an allowed global by default (also for a whole nn.Module, an optimizer object, NumPy "
              "scalars and arrays, a defaultdict); tensors, numbers, strings and dicts/lists of them still load",
        replacement="save `vars(args)` / `state_dict()` / tensors instead; or `weights_only=False` for a trusted file",
        check=Check(
            snippet="""\
import argparse, os, tempfile
import torch
args = argparse.ArgumentParser().parse_args([])
path = os.path.join(tempfile.mkdtemp(), "checkpoint.pt")
torch.save({"args": args, "model": torch.nn.Linear(2, 2).state_dict()}, path)
torch.load(path)
""",
            match="Weights only load failed",
            replacement_snippet="""\
import argparse, os, tempfile
import torch
args = argparse.ArgumentParser().parse_args([])
path = os.path.join(tempfile.mkdtemp(), "checkpoint.pt")
torch.save({"args": vars(args), "model": torch.nn.Linear(2, 2).state_dict()}, path)
torch.load(path)
""",
        ),
        exact_fix=False,
        notes="weights_only=False restores the pre-2.6 behaviour but runs the full unpickler (arbitrary code from "
              "the file): only for trusted files. With pickle_module= given, the default stays weights_only=False "
              "(measured on 2.13). The environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 restores the old "
              "default for loads that do not pass weights_only=.",
    ),
]
