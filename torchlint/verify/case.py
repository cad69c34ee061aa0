"""What a runtime confirmation case is. Imported by the parent process, so no torch here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Case:
    """One runtime confirmation of a rule (or refutation of a claim).

    `bad` and `good` are complete snippets, executed as `__main__`-like modules with the globals
    `DEVICE` ("cpu" or "cuda") and `OTHER_DEVICE` ("meta" when DEVICE is cpu, "cpu" when it is
    cuda). `probe` names a function in `torchlint.verify.probes` that executes a snippet and
    observes whether the harm happened; `expect` holds its keyword arguments.

    For a rule case (`rule` = "TLnnn"): the static analyzer must report `rule` on `bad` at
    `bad_line` and must not report it on `good`; the probe must see the harm in `bad` and not in
    `good`.

    For a claim (`rule` = "CLAIM-nnn"): `bad` is the code the claim says misbehaves and `good` is
    a positive control that really shows the harm, so the probe is shown able to see it. A claim
    is REFUTED when the probe sees no harm in `bad` and sees it in the control. `bad_line` is 0.

    `requires` names the top-level packages the snippets import besides torch (`("torchvision",)`).
    Where one of them is not installed (torchvision cannot be installed beside the pinned CPU
    torch), the snippets are not executed: the static part is still checked and the verdict is
    SOURCE-CHECKED, its reason naming `source`, the released sources where the runtime claim was
    read ("torchvision 0.29.1 torchvision/models/_utils.py"). Where they are installed the case
    runs like any other.
    """

    rule: str
    title: str
    bad: str
    good: str
    bad_line: int
    probe: str
    expect: dict = field(default_factory=dict)
    devices: tuple = ("cpu", "cuda")
    requires: tuple = ()
    source: str = ""

    @property
    def is_claim(self) -> bool:
        return self.rule.upper().startswith("CLAIM-")

    def to_json(self) -> dict:
        data = asdict(self)
        data["devices"] = list(self.devices)
        data["requires"] = list(self.requires)
        return data

    @classmethod
    def from_json(cls, data: dict) -> "Case":
        data = dict(data)
        data["devices"] = tuple(data.get("devices", ("cpu", "cuda")))
        data["requires"] = tuple(data.get("requires", ()))
        return cls(**data)


@dataclass(frozen=True)
class Observation:
    """What a probe saw when it executed one snippet. `evidence` is always observed text
    (exception message, measured bytes, ratios), never a constant."""

    harm: bool
    evidence: str

    def to_json(self) -> dict:
        return {"harm": self.harm, "evidence": self.evidence}
