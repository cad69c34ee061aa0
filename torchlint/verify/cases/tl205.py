"""TL205: calling an instance of an autograd.Function (the pre-1.5 legacy style)."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL205",
        title="legacy autograd.Function with forward(self, x) called as Clip()(x)",
        bad="""\
import torch


class Clip(torch.autograd.Function):
    def forward(self, x):
        self.save_for_backward(x)
        return x.clamp(0, 1)

    def backward(self, grad):
        x, = self.saved_tensors
        return grad * ((x >= 0) & (x <= 1))


x = torch.randn(6, device=DEVICE, requires_grad=True)
y = Clip()(x)
y.sum().backward()
""",
        good="""\
import torch


class Clip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(0, 1)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * ((x >= 0) & (x <= 1))


x = torch.randn(6, device=DEVICE, requires_grad=True)
y = Clip.apply(x)
y.sum().backward()
""",
        bad_line=15,
        probe="raises",
        expect={"exc": "RuntimeError",
                "match": "Legacy autograd function with non-static forward method is deprecated",
                "show": ["x.grad"]},
    ),
]
