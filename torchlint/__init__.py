"""torchlint: find PyTorch antipatterns before the code runs."""

__version__ = "0.1.0"
