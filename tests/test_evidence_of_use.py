"""Issue 43: evidence from use — a parameter's kind read from how its function uses it
(`torchlint/analysis/evidence.py`), as facts of the value model."""

from __future__ import annotations

import textwrap

from importlib.util import find_spec

import libcst as cst
import pytest

from torchlint.analysis.semantic import Semantic
from torchlint.analysis.value import BATCH, INPUT, LOADER, MODULE, OPTIMIZER, TENSOR, UNKNOWN

needs_torch_here = pytest.mark.skipif(find_spec("torch") is None, reason="torch is not installed")


def _param_kinds(source: str, function: str = "train_epoch") -> dict:
    semantic = Semantic(cst.parse_module(textwrap.dedent(source)))
    kinds = {}
    for definition in semantic.index.nodes(cst.FunctionDef):
        if definition.name.value != function:
            continue
        frame = semantic.values.generic_frame(definition)
        for param in definition.params.params:
            kinds[param.name.value] = semantic.values.param_value(param, frame).kind
    return kinds


TRAIN_EPOCH = """
import torch

def train_epoch(model, loader, opt, loss_fn, device):
    model.train()
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        out = model(x)
        loss = loss_fn(out, y)
        loss.backward()
        opt.step()
"""


def test_module_loader_and_optimizer_from_a_training_step():
    kinds = _param_kinds(TRAIN_EPOCH)
    assert kinds["model"] == MODULE
    assert kinds["loader"] == LOADER
    assert kinds["opt"] == OPTIMIZER
    assert kinds["loss_fn"] not in (MODULE, LOADER, OPTIMIZER)  # the loss itself: a callable
    assert kinds["device"] not in (MODULE, LOADER, OPTIMIZER)


def test_names_do_not_matter():
    kinds = _param_kinds(TRAIN_EPOCH.replace("model", "m").replace("loader", "d").replace("opt", "o"))
    assert (kinds["m"], kinds["d"], kinds["o"]) == (MODULE, LOADER, OPTIMIZER)


def test_loader_items_are_tensors_on_an_unknown_device():
    semantic = Semantic(cst.parse_module(textwrap.dedent(TRAIN_EPOCH)))
    loop = semantic.index.nodes(cst.For)[0]
    item = semantic.values.of(loop.target.elements[0].value)
    assert item.kind in (BATCH, TENSOR) and item.device is None


@pytest.mark.parametrize("source", [
    # a duck-typed helper: the callable returns the loss itself
    """
    def train_epoch(step_fn, batches, opt):
        for b in batches:
            opt.zero_grad()
            loss = step_fn(b)
            loss.backward()
            opt.step()
    """,
    # sklearn-style objects: fit/predict, no backward
    """
    def train_epoch(clf, data, scaler):
        for x, y in data:
            clf.fit(scaler(x), y)
            print(clf.predict(x))
    """,
    # a callable on the target side, and a transform applied before the model
    """
    def train_epoch(net, loader, encode, transform, crit):
        for x, y in loader:
            loss = crit(net(transform(x)), encode(y))
            loss.backward()
    """,
])
def test_near_misses_stay_unknown(source):
    kinds = _param_kinds(source)
    for name in ("step_fn", "batches", "clf", "data", "scaler", "encode", "transform", "crit"):
        if name in kinds:
            assert kinds[name] not in (MODULE, LOADER, OPTIMIZER), name


def test_the_model_of_the_last_near_miss_is_still_a_module():
    kinds = _param_kinds("""
    def train_epoch(net, loader, encode, transform, crit):
        for x, y in loader:
            loss = crit(net(transform(x)), encode(y))
            loss.backward()
    """)
    assert kinds["net"] == MODULE and kinds["loader"] == LOADER


def test_a_scheduler_is_not_an_optimizer():
    kinds = _param_kinds("""
    def train_epoch(model, loader, sched, crit):
        for x, y in loader:
            loss = crit(model(x), y)
            loss.backward()
            sched.step()
    """)
    assert kinds["sched"] != OPTIMIZER


def test_annotated_and_called_functions_keep_what_they_had():
    kinds = _param_kinds("""
    import torch
    def train_epoch(model: int, loader, crit):
        for x, y in loader:
            loss = crit(model(x), y)
            loss.backward()
    """)
    assert kinds["model"] != MODULE and kinds["loader"] != LOADER
    assert kinds["crit"] in (UNKNOWN, INPUT)


# -- one element: a value backpropagated without a gradient (`analysis/one_element.py`) ----------

def _one_element(source: str, name: str = "loss") -> bool:
    """Whether the last read of `name` inside `print(...)` holds one element."""
    from torchlint.analysis.one_element import holds_one_element

    semantic = Semantic(cst.parse_module(textwrap.dedent(source)))
    reads = [arg.value for call in semantic.index.nodes(cst.Call)
             if type(call.func) is cst.Name and call.func.value == "print"
             for arg in call.args if type(arg.value) is cst.Name and arg.value.value == name]
    return holds_one_element(semantic, reads[-1])


ONE_ELEMENT = """
def train_epoch(model, loader, opt, loss_fn):
    for x, y in loader:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        BACKWARD
        opt.step()
        print(loss)
"""


@pytest.mark.parametrize("backward", [
    "loss.backward()",
    "loss.backward(retain_graph=True)",
    "scaler.scale(loss).backward()",
    "accelerator.backward(loss)",
    "torch.autograd.backward(loss)",
])
def test_a_loss_backpropagated_without_a_gradient_holds_one_element(backward):
    assert _one_element(("import torch\n" + ONE_ELEMENT).replace("BACKWARD", backward))


@pytest.mark.parametrize("source", [
    ONE_ELEMENT.replace("BACKWARD", "loss.backward(torch.ones_like(loss))"),
    ONE_ELEMENT.replace("BACKWARD", "loss.backward(gradient=g)"),
    ONE_ELEMENT.replace("BACKWARD", "torch.autograd.backward(loss, grad_tensors=g)"),
    ONE_ELEMENT.replace("BACKWARD", "loss.mean().backward()"),  # per-sample losses, reduced for backward
    ONE_ELEMENT.replace("BACKWARD", "loss[0].backward()"),  # a tuple (or a vector) from loss_fn
    ONE_ELEMENT.replace("BACKWARD", "pass"),  # no backward at all
    # another definition reaches the read
    ONE_ELEMENT.replace("BACKWARD", "loss.backward()\n        if flag:\n            loss = loss_fn.per_sample(x)"),
    # the backward runs on a later value of the name
    ONE_ELEMENT.replace("BACKWARD", "print(loss)\n        loss = loss.sum()\n        loss.backward()").replace(
        "        opt.step()\n        print(loss)\n", "        opt.step()\n"),
])
def test_near_misses_say_nothing_of_the_size(source):
    assert not _one_element("import torch\n" + source)


@needs_torch_here
def test_one_element_is_what_torch_checks_not_the_rank():
    """backward() without a gradient needs one element, of any rank: `(1,)` passes, so `.data[0]`
    of a loss known only by its backward may work, and TL201 must not call it 0-dim."""
    code = textwrap.dedent("""
        import warnings; warnings.simplefilter("ignore")
        import torch
        w = torch.ones(3, requires_grad=True)
        out = {}
        for shape in [(), (1,), (1, 1), (2,)]:
            loss = (w.sum() * 2).reshape(shape) if shape != (2,) else w[:2] * 2
            try:
                loss.backward()
                out[str(shape)] = "ok"
            except RuntimeError as error:
                out[str(shape)] = str(error)
            try:
                loss.data[0]
                out[str(shape) + "[0]"] = "ok"
            except IndexError:
                out[str(shape) + "[0]"] = "IndexError"
        print(json.dumps(out))
    """)
    import json
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-c", "import json\n" + code], capture_output=True, text=True, check=True)
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["()"] == out["(1,)"] == out["(1, 1)"] == "ok"
    assert "grad can be implicitly created only for scalar outputs" in out["(2,)"]
    assert out["()[0]"] == "IndexError" and out["(1,)[0]"] == "ok"
