"""TL211: torch.load of a checkpoint weights_only=True (the default since PyTorch 2.6) refuses."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL211",
        title="a checkpoint holding the argparse.Namespace, loaded back with torch.load's default",
        bad="""\
import argparse
import os
import tempfile

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args([])
model = nn.Linear(4, 2).to(DEVICE)
path = os.path.join(tempfile.mkdtemp(), "checkpoint.pth")
torch.save({"args": args, "epoch": 3, "model": model.state_dict()}, path)
checkpoint = torch.load(path)
""",
        good="""\
import argparse
import os
import tempfile

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args([])
model = nn.Linear(4, 2).to(DEVICE)
path = os.path.join(tempfile.mkdtemp(), "checkpoint.pth")
torch.save({"args": vars(args), "epoch": 3, "model": model.state_dict()}, path)
checkpoint = torch.load(path)
""",
        bad_line=14,
        probe="raises",
        expect={"exc": "pickle.UnpicklingError", "match": "Weights only load failed",
                "show": ["sorted(checkpoint)"]},
    ),
    Case(
        rule="TL211",
        title="a whole nn.Module saved with torch.save(model, path) and loaded back",
        bad="""\
import os
import tempfile

import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(DEVICE)
path = os.path.join(tempfile.mkdtemp(), "model.pt")
torch.save(model, path)
restored = torch.load(path, map_location=DEVICE)
""",
        good="""\
import os
import tempfile

import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(DEVICE)
path = os.path.join(tempfile.mkdtemp(), "model.pt")
torch.save(model.state_dict(), path)
restored = torch.load(path, map_location=DEVICE)
""",
        bad_line=10,
        probe="raises",
        expect={"exc": "pickle.UnpicklingError", "match": "Weights only load failed",
                "show": ["sorted(restored)"]},
    ),
]
