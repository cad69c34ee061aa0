"""`torchlint run`: execute a training script under instrumentation and confirm torchlint's
findings on it, at the user's own lines (see command.py for the flow and session.py for the hooks).

This package is the only part of torchlint that executes user code and imports torch, and only
when `torchlint run` is asked for; importing `torchlint.runtime` itself imports neither.
"""
