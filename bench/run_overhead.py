"""What `torchlint run` costs: the same training script run plainly (`python SCRIPT`) and under
`torchlint run` (default detectors), in this invocation, on a small CNN trainer, a small
transformer trainer and a recurrent sequence model (two `nn.LSTMCell`s stepped over the sequence
in the model's own forward, as pytorch/examples' time_sequence_prediction does) on CPU
(synthetic data).

    python bench/run_overhead.py [--steps 60] [--repeat 3] [--threads N] [--only recurrent]

Each script times its own training loop (every step after the first two, whose lazy imports and
allocator warm-up are the same in both runs) and prints it; the table shows the median loop time
per step of each, the ratio (the instrumentation overhead; target <= 1.3x), the same ratio of the
loop's CPU time (steadier on a shared machine: time spent waiting for a core does not count) and
the whole-process wall time (torch's import and torchlint's lint of the script included). `--max-steps 0` lets the
instrumented run do every step. Runs alternate plain/instrumented so machine noise hits both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMON = '''
import json, sys, time
import torch
import torch.nn as nn

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 0
if threads:
    torch.set_num_threads(threads)
torch.manual_seed(0)
'''

CNN = COMMON + '''
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 10))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
images, labels = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
start = None
running = 0.0
for step in range(steps):
    if step == 2:
        start, cpu_start = time.perf_counter(), time.process_time()
    optimizer.zero_grad()
    loss = criterion(model(images), labels)
    loss.backward()
    optimizer.step()
    running += loss.item()
print(json.dumps({"loop_seconds": time.perf_counter() - start, "loop_cpu_seconds": time.process_time() - cpu_start,
                  "timed_steps": steps - 2}))
'''

TRANSFORMER = COMMON + '''
class Tiny(nn.Module):
    def __init__(self, vocab=1000, dim=64, heads=4, layers=2, length=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.zeros(1, length, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens) + self.position))

model = Tiny()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
tokens = torch.randint(0, 1000, (16, 32))
targets = torch.randint(0, 1000, (16, 32))
start = None
running = 0.0
for step in range(steps):
    if step == 2:
        start, cpu_start = time.perf_counter(), time.process_time()
    optimizer.zero_grad()
    logits = model(tokens)
    loss = criterion(logits.reshape(-1, 1000), targets.reshape(-1))
    loss.backward()
    optimizer.step()
    running += loss.item()
print(json.dumps({"loop_seconds": time.perf_counter() - start, "loop_cpu_seconds": time.process_time() - cpu_start,
                  "timed_steps": steps - 2}))
'''

RECURRENT = COMMON + '''
class Sequence(nn.Module):
    def __init__(self, hidden=51):
        super().__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input):
        outputs = []
        h_t = torch.zeros(input.size(0), self.hidden)
        c_t = torch.zeros(input.size(0), self.hidden)
        h_t2 = torch.zeros(input.size(0), self.hidden)
        c_t2 = torch.zeros(input.size(0), self.hidden)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)

data = torch.sin(torch.arange(0, 32 * 101, dtype=torch.float32).reshape(32, 101) / 20.0)
inputs, targets = data[:, :-1], data[:, 1:]
model = Sequence()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.MSELoss()
start = None
running = 0.0
for step in range(steps):
    if step == 2:
        start, cpu_start = time.perf_counter(), time.process_time()
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.step()
    running += loss.item()
print(json.dumps({"loop_seconds": time.perf_counter() - start, "loop_cpu_seconds": time.process_time() - cpu_start,
                  "timed_steps": steps - 2}))
'''


def _loop_seconds(stdout: str) -> tuple:
    """(wall, CPU) seconds of the timed steps, as the script printed them."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{") and "loop_seconds" in line:
            data = json.loads(line)
            return float(data["loop_seconds"]), float(data["loop_cpu_seconds"])
    raise RuntimeError(f"the script printed no timing: {stdout[-500:]}")


def _run(command, env) -> tuple:
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    wall = time.perf_counter() - started
    if result.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(command)} exited {result.returncode}: {result.stderr[-1500:]}")
    return _loop_seconds(result.stdout), wall, result.returncode


def measure(name: str, source: str, args: argparse.Namespace, workdir: Path) -> dict:
    script = workdir / f"{name}.py"
    script.write_text(source, encoding="utf-8")
    report = workdir / f"{name}.report.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    script_args = [str(args.steps), str(args.threads)]
    plain_cmd = [sys.executable, str(script)] + script_args
    run_cmd = [sys.executable, "-m", "torchlint", "run", "--max-steps", "0", "--output-format", "json",
               "-o", str(report), str(script)] + script_args
    plain, instrumented, plain_cpu, run_cpu, plain_wall, run_wall, codes = [], [], [], [], [], [], []
    for _ in range(args.repeat):
        (loop, cpu), wall, _ = _run(plain_cmd, env)
        plain.append(loop)
        plain_cpu.append(cpu)
        plain_wall.append(wall)
        (loop, cpu), wall, code = _run(run_cmd, env)
        instrumented.append(loop)
        run_cpu.append(cpu)
        run_wall.append(wall)
        codes.append(code)
    data = json.loads(report.read_text(encoding="utf-8"))
    steps = args.steps - 2
    return {
        "name": name,
        "plain_ms": statistics.median(plain) / steps * 1000,
        "run_ms": statistics.median(instrumented) / steps * 1000,
        "ratio": statistics.median(instrumented) / statistics.median(plain),
        "cpu_ratio": statistics.median(run_cpu) / statistics.median(plain_cpu),
        "plain_wall": statistics.median(plain_wall),
        "run_wall": statistics.median(run_wall),
        "findings": len([f for f in data["findings"] if f["status"] in ("CONFIRMED", "FOUND BY THE RUN")]),
        "exit": codes[-1],
        "steps_seen": data["outcome"]["optimizer_steps"],
    }


TRAINERS = {"cnn": CNN, "transformer": TRANSFORMER, "recurrent": RECURRENT}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="training steps per run (default 60)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each kind (default 3; medians)")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--only", choices=sorted(TRAINERS), action="append",
                        help="measure only this trainer (repeatable; default: all)")
    args = parser.parse_args(argv)
    if args.steps < 5:
        parser.error("--steps must be at least 5")
    with tempfile.TemporaryDirectory() as directory:
        rows = [measure(name, source, args, Path(directory)) for name, source in TRAINERS.items()
                if not args.only or name in args.only]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torchlint run overhead: {args.steps} steps per run ({args.steps - 2} timed), median of "
          f"{args.repeat}, torch threads {args.threads or 'default'}, {os.cpu_count()} CPUs, "
          f"load average {load:.2f}")
    print(f"{'trainer':<12} {'plain ms/step':>13} {'run ms/step':>11} {'ratio':>6} {'CPU ratio':>9} "
          f"{'plain wall s':>12} {'run wall s':>10} {'findings':>8} {'steps':>5}")
    for row in rows:
        print(f"{row['name']:<12} {row['plain_ms']:>13.2f} {row['run_ms']:>11.2f} {row['ratio']:>5.2f}x "
              f"{row['cpu_ratio']:>8.2f}x {row['plain_wall']:>12.2f} {row['run_wall']:>10.2f} {row['findings']:>8} "
              f"{row['steps_seen']:>5}")
    worst = max(row["cpu_ratio"] for row in rows)
    print(f"target: instrumentation overhead <= 1.30x (CPU-time ratio): {'met' if worst <= 1.3 else 'NOT met'} "
          f"(worst {worst:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
