"""Issue 43: evidence from use — a parameter's kind read from how its function uses it
(`torchlint/analysis/evidence.py`), as facts of the value model."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis.semantic import Semantic
from torchlint.analysis.value import BATCH, INPUT, LOADER, MODULE, OPTIMIZER, TENSOR, UNKNOWN


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
