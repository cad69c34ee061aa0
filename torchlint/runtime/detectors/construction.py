"""TL112: a layer with parameters constructed during a forward, anew on every call.

A global parameter-registration hook (`torch.nn.modules.module.
register_module_parameter_registration_hook`) sees every `nn.Parameter` a module registers (and
the buffer-registration hook the running statistics of a BatchNorm with `affine=False`, which has
no parameters but a training and an eval mode). One
registered while a forward runs (the session's forward depth is above 0) comes from a layer built
inside `forward`. The construction site (the innermost user frame) is reported once a second,
different module is built there: lazy initialisation (`if self.fc is None: self.fc = ...`) builds
once and stays silent. The same hook notes, outside forwards, the line that built each BatchNorm:
TL113's run finding (a rank error raised inside it) points there too.
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, Optional, Tuple


class Construction:
    def __init__(self, session) -> None:
        self.session = session
        # (path, line, class name) -> (weak reference to the last module built there, modules built)
        self._built: Dict[Tuple[str, int, str], Tuple[Any, int]] = {}
        # BatchNorm module -> (path, line) of the user's line that built it
        self._batchnorms: "weakref.WeakKeyDictionary[Any, Tuple[str, int]]" = weakref.WeakKeyDictionary()

    def remember_batchnorm(self, module: Any, frame: Any) -> None:
        site = self.session.frames.site(frame)
        if site is not None:
            try:
                self._batchnorms[module] = (site.path, site.line)
            except TypeError:  # not weak-referenceable
                pass

    def batchnorm_site(self, module: Any) -> Optional[Tuple[str, int]]:
        try:
            return self._batchnorms.get(module)
        except TypeError:
            return None

    def parameter_registered(self, module: Any, parameter: str, param: Any, frame: Any) -> None:
        site = self.session.frames.site(frame)
        if site is None:
            return
        name = type(module).__name__
        key = (site.path, site.line, name)
        last, count = self._built.get(key, (None, 0))
        if last is not None and last() is module:
            return  # the same module's next parameter (weight, then bias)
        count += 1
        self._built[key] = (weakref.ref(module), count)
        if count != 2:
            return
        shape = "x".join(str(s) for s in getattr(param, "shape", ())) or "?"
        stateful = not any(p is not None for p in module._parameters.values())
        self.session.observe(
            "TL112", site,
            f"a `{name}` is built inside a forward on every call: a fresh layer is in training mode, so even after "
            "`model.eval()` it normalises with each batch's statistics; build it once in `__init__`" if stateful else
            f"a `{name}` is built inside a forward on every call: its weights start random each time and the "
            "optimizer never sees them; build it once in `__init__`",
            f"a new `{name}` (its `{parameter}` {shape}, freshly initialised) was constructed at this line during a "
            f"forward in {count} separate calls")
