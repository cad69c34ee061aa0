"""Issue 25, items 2 and 3: findings that were false or said the wrong thing on real code, and the
severity each rule decides per finding from the program's facts."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.engine import lint_source
from torchlint.finding import Applicability, Severity
from torchlint.rules import all_rules


def lint(source: str, code: str):
    return [f for f in lint_source(textwrap.dedent(source), select=[code]) if f.code == code]


def one(source: str, code: str):
    found = lint(source, code)
    assert len(found) == 1, [f.message for f in found]
    return found[0]


# -- TL006 --------------------------------------------------------------------------------------

STORED = """
    import torch
    import torch.nn as nn
    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
        def forward(self, x):
            h = torch.tanh(self.fc(x))
            self.last = h
            return h
"""


def test_tl006_read_back_in_the_same_step_is_not_a_leak():
    source = STORED + """
    def step(model: Encoder, x, opt):
        model(x)
        score = sum(m.last.sum() for m in [model])
        score.backward()
    """
    assert lint(source, "TL006") == []


def test_tl006_read_into_a_later_step_is_an_error_without_a_fix():
    source = STORED + """
    def train(model: Encoder, batches, opt):
        previous = None
        for x in batches:
            h = model(x)
            loss = h.sum()
            if previous is not None:
                loss = loss + (h - previous).sum()
            loss.backward()
            previous = model.last
    """
    finding = one(source, "TL006")
    assert finding.severity is Severity.ERROR and finding.fix is None
    assert "Trying to backward through the graph a second time" in finding.message


def test_tl006_unread_store_is_a_warning_and_does_not_claim_a_failing_backward():
    finding = one(STORED, "TL006")
    assert finding.severity is Severity.WARNING
    assert "backward" not in finding.message
    assert finding.fix is not None and finding.fix.applicability is Applicability.UNSAFE
    assert not finding.fixable  # `[*]` means `--fix` applies it: unsafe fixes do not count


def test_tl006_running_statistic_is_a_chain_across_calls():
    source = STORED.replace("self.last = h", "self.avg = 0.9 * self.avg + 0.1 * h.mean(0)").replace(
        "self.fc = nn.Linear(8, 8)", "self.fc = nn.Linear(8, 8)\n            self.avg = torch.zeros(8)")
    finding = one(source, "TL006")
    assert "chains every call's autograd graph" in finding.message
    assert "this call's graph" not in finding.message


# -- TL008 --------------------------------------------------------------------------------------

def test_tl008_advice_without_a_device_name_says_what_to_define():
    finding = one("""
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--no-cuda", action="store_true")
        args = parser.parse_args()
        args.cuda = not args.no_cuda and torch.cuda.is_available()
        mask = torch.ones(4).cuda()
    """, "TL008")
    assert "define `device = torch.device(" in finding.message and finding.severity is Severity.ERROR


def test_tl008_legacy_type_names_the_type_error():
    finding = one("""
        import torch
        cuda = True if torch.cuda.is_available() else False
        device = torch.device("cuda" if cuda else "cpu")
        z = torch.cuda.FloatTensor(3)
    """, "TL008")
    assert "TypeError: type torch.cuda.FloatTensor not available" in finding.message
    assert "AssertionError" not in finding.message


def test_tl008_device_parameter_only_is_a_warning():
    finding = one("""
        import torch
        def make(device):
            return torch.ones(3).cuda()
    """, "TL008")
    assert finding.severity is Severity.WARNING


# -- TL207 --------------------------------------------------------------------------------------

SCHEDULED = """
    import torch
    from torch.optim import lr_scheduler
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = {scheduler}
    for epoch in range(3):
        scheduler.step()
        for x in [torch.randn(2, 2)]:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
"""


@pytest.mark.parametrize("scheduler, effect", [
    ("lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.1)", "every `StepLR` decay comes one epoch early"),
    ("lr_scheduler.MultiStepLR(optimizer, [2, 4])", "every `MultiStepLR` decay comes one epoch early"),
    ("lr_scheduler.StepLR(optimizer, 1, 0.1)", "its first learning rate is never used"),
    ("lr_scheduler.ExponentialLR(optimizer, 0.5)", "its first learning rate is never used"),
])
def test_tl207_says_what_happens_for_the_scheduler_at_hand(scheduler, effect):
    finding = one(SCHEDULED.format(scheduler=scheduler), "TL207")
    assert effect in finding.message and finding.severity is Severity.WARNING


# -- TL106 / TL202 ------------------------------------------------------------------------------

EVALUATION = """
    import torch.nn as nn
    from torch.autograd import Variable
    model = nn.Linear(4, 2)
    def evaluate(loader):
        model.eval()
        for x, y in loader:
            x = Variable(x, volatile=True)
            y = Variable(y, volatile=True)
            outputs = model(x)
            {detach}
            print(outputs.argmax(1))
"""


def test_tl106_outputs_detached_in_place_and_volatile_relied_on():
    finding = one(EVALUATION.format(detach="outputs.detach_()"), "TL106")
    assert "every output keeps its graph" not in finding.message
    assert "`outputs.detach_()`" in finding.message and "`volatile=True` does not help" in finding.message
    assert finding.severity is Severity.NOTE
    # Issue 40: each batch's graph is freed when the next output replaces it (a note); kept across
    # batches in a list made before the loop, it is a warning.
    assert one(EVALUATION.format(detach="pass"), "TL106").severity is Severity.NOTE
    kept = EVALUATION.replace("        for x, y in loader:", "        kept = []\n        for x, y in loader:")
    assert one(kept.format(detach="kept.append(outputs)"), "TL106").severity is Severity.WARNING


def test_tl202_labels_and_training_steps_just_delete_volatile():
    found = {f.start.row: f for f in lint(EVALUATION.format(detach="pass"), "TL202")}
    image, label = found[8], found[9]
    assert "no_grad" in image.message and image.severity is Severity.NOTE and not image.fixable  # issue 40: graph freed per batch
    assert "builds an autograd graph" not in label.message and label.fixable and label.severity is Severity.NOTE
    training = one("""
        from torch.autograd import Variable
        def train(model, loader, optimizer, criterion):
            for images, labels in loader:
                images = Variable(images, volatile=True)
                optimizer.zero_grad()
                criterion(model(images), labels).backward()
                optimizer.step()
    """, "TL202")
    assert "no_grad" not in training.message and "delete `volatile=`" in training.message and training.fixable


# -- TL108 / TL109 ------------------------------------------------------------------------------

MODEL_WITH_ACTIVATION = """
    import torch
    import torch.nn as nn
    class D(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 1)
        def forward(self, x):
            return torch.sigmoid(self.fc(x))
    model = D()
    criterion = nn.BCELoss()
"""


def test_tl109_inside_the_model_points_at_the_model():
    finding = one(MODEL_WITH_ACTIVATION + """
    def train(x, y, opt):
        loss = criterion(model(x), y)
        loss.backward()
    """, "TL109")
    assert "inside the model (in `forward`)" in finding.message and finding.severity is Severity.WARNING


def test_tl109_without_backward_claims_no_vanishing_gradient():
    finding = one(MODEL_WITH_ACTIVATION + """
    with torch.no_grad():
        print(criterion(model(torch.randn(2, 4)), torch.ones(2, 1)))
    """, "TL109")
    assert "gradient vanishes" not in finding.message and finding.severity is Severity.NOTE


def test_tl108_is_an_error():
    finding = one("""
        import torch
        import torch.nn.functional as F
        def step(logits, y):
            F.cross_entropy(F.softmax(logits, dim=1), y).backward()
    """, "TL108")
    assert finding.severity is Severity.ERROR


# -- TL107 / TL103 ------------------------------------------------------------------------------

def test_tl107_dropout_only_model_does_not_mention_batchnorm():
    finding = one("""
        import torch
        import torch.nn as nn
        tower = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.2), nn.Linear(4, 2))
        with torch.no_grad():
            for x in [torch.randn(2, 4)]:
                print(tower(x).argmax(1))
    """, "TL107")
    assert "BatchNorm" not in finding.message and finding.severity is Severity.ERROR


def test_tl103_note_without_hooks_warning_with_them():
    source = """
        import torch.nn as nn
        m = nn.Linear(2, 2)
        {hook}
        y = m.forward(1)
    """
    assert one(source.format(hook=""), "TL103").severity is Severity.NOTE
    assert one(source.format(hook="m.register_forward_hook(print)"), "TL103").severity is Severity.WARNING
    assert one(source.format(hook="nn.utils.spectral_norm(m)"), "TL103").severity is Severity.WARNING


# -- every rule of this part documents its severities -------------------------------------------

def test_severity_docs_on_every_rule():
    for rule in all_rules():
        docs = getattr(rule, "severity_docs", "")
        assert docs.strip(), rule.code
        assert any(word in docs for word in ("**error**", "**warning**", "**note**")), rule.code


def test_tl101_error_only_where_an_optimizer_trains_the_model():
    source = """
        import torch
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = [nn.Linear(2, 2) for _ in range(3)]
        model = Net()
        {optimizer}
    """
    trained = one(source.format(optimizer="opt = torch.optim.SGD(model.parameters(), lr=0.1)"), "TL101")
    assert trained.severity is Severity.ERROR and "never trains them" in trained.message
    assert one(source.format(optimizer="pass"), "TL101").severity is Severity.WARNING


def test_tl106_volatile_input_bound_before_the_loop():
    finding = one("""
        import torch
        import torch.nn as nn
        from torch.autograd import Variable
        net = nn.Linear(4, 2)
        test_x = Variable(torch.randn(8, 4), volatile=True)
        net.eval()
        for step in range(3):
            print(net(test_x).argmax(1))
    """, "TL106")
    assert "`volatile=True` does not help" in finding.message


def test_tl102_error_where_an_instance_is_moved():
    source = """
        import torch
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)
                self.scale = torch.ones(3)
            def forward(self, x):
                return self.fc(x) * self.scale
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net(){move}
    """
    moved = one(source.format(move=".to(device)"), "TL102")
    assert moved.severity is Severity.ERROR and "after `Net().to(device)`" in moved.message
    assert one(source.format(move=""), "TL102").severity is Severity.WARNING


def test_tl105_error_when_used_as_a_gradient_warning_when_shown():
    found = {f.start.row: f.severity for f in lint("""
        import torch
        x = torch.ones(2, requires_grad=True)
        y = x * 2
        y.sum().backward()
        print(y.grad)
        z = x - 0.1 * y.grad
        (x.grad, y.grad)
    """, "TL105")}
    assert found == {6: Severity.WARNING, 7: Severity.ERROR, 8: Severity.WARNING}
