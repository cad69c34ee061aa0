"""The run's detectors that watch values at the lines where they see them (issue 43): losses no
backward reached (TL124, TL131), in-place shape changes of temporary aliases (TL127), logits
thresholded at 0.5 (TL129), and the rule that a static finding there ran without harm only where
the run saw its situation (`Session.unobservable`)."""

from __future__ import annotations

import gc
import importlib.util
import inspect

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


def _line(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.fixture
def session():
    from torchlint.runtime.session import Options, Session

    session = Session(Options(max_steps=0), lambda filename: filename == __file__)
    session.install()
    try:
        yield session
    finally:
        session.uninstall()


def _codes(session, code):
    return {(o.line, o.confirms_only) for o in session.observations.find(code)}


def _train_overwriting(torch):
    model = torch.nn.Linear(4, 1)
    criterion = torch.nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        loss = criterion(model(x), y)  # overwritten
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def _losses_before_either_step(torch):
    first, second = torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)
    criterion = torch.nn.MSELoss()
    opt_first = torch.optim.SGD(first.parameters(), lr=0.1)
    opt_second = torch.optim.SGD(second.parameters(), lr=0.1)
    for _ in range(3):
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        second_loss = criterion(second(x), y)  # used after the first model's step
        first_loss = criterion(first(x), y)
        opt_first.zero_grad()
        first_loss.backward()
        opt_first.step()
        opt_second.zero_grad()
        second_loss.backward()
        opt_second.step()


def test_an_overwritten_loss_is_evidence_for_a_static_finding_and_its_line_is_watched(session):
    import torch

    _train_overwriting(torch)
    gc.collect()
    session.finish(script_ended=True)
    line = _line(_train_overwriting, "# overwritten")
    assert _codes(session, "TL131") == {(line, True)}
    assert session.unobservable("TL131", __file__, line) is None
    # a line that computed no loss the run tracks: no evidence either way
    other = _line(_train_overwriting, "model(x).pow(2)")
    assert "saw no loss computed there" in session.unobservable("TL131", __file__, other)


def test_losses_backpropagated_after_another_networks_step_are_not_unreached(session):
    import torch

    _losses_before_either_step(torch)
    gc.collect()
    session.finish(script_ended=True)
    assert not session.observations.find("TL131")


def _copied(torch):
    model = torch.nn.Linear(4, 4)
    criterion = torch.nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        out = model(torch.randn(2, 4))
        extra = criterion(out, torch.zeros(2, 4))
        loss = criterion(out, torch.ones(2, 4)) + torch.tensor(extra)  # copy
        logged = float(extra)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return logged


def test_a_loss_copied_into_a_new_tensor_and_never_reached(session):
    import torch

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _copied(torch)
    gc.collect()
    session.finish(script_ended=True)
    line = _line(_copied, "# copy")
    assert _codes(session, "TL124") == {(line, True)}
    assert session.unobservable("TL124", __file__, line) is None
    assert session.unobservable("TL124", __file__, _line(_copied, "logged = float")) is not None


def _aliases(torch):
    x = torch.randn(3, 5)
    x.data.t_()  # changes the alias
    kept = x.data.t_()  # assigned: nothing lost
    x.detach().squeeze_()  # nothing to squeeze
    return kept


def test_an_in_place_shape_change_of_a_discarded_alias(session):
    import torch

    _aliases(torch)
    found = session.observations.find("TL127")
    assert [o.line for o in found] == [_line(_aliases, "# changes the alias")]
    assert "`x` is still (3, 5)" in found[0].evidence
    assert session.unobservable("TL127", __file__, _line(_aliases, "# nothing to squeeze")) is None
    assert session.unobservable("TL127", __file__, _line(_aliases, "# assigned")) is not None


def _thresholds(torch):
    logits = torch.tensor([-1.0, 0.2, 0.4, 2.0])
    probabilities = torch.sigmoid(logits)
    a = logits > 0.5  # logits
    b = probabilities > 0.5  # probabilities
    c = logits > 0  # at zero
    return a, b, c


def test_logits_thresholded_at_a_half_count_the_decisions_that_change(session):
    import torch

    _thresholds(torch)
    found = session.observations.find("TL129")
    assert [(o.line, o.confirms_only) for o in found] == [(_line(_thresholds, "# logits"), True)]
    assert "2 decisions differ" in found[0].evidence
    assert session.unobservable("TL129", __file__, _line(_thresholds, "# probabilities")) is None
    assert session.unobservable("TL129", __file__, _line(_thresholds, "# at zero")) is not None
