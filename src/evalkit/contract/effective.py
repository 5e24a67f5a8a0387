"""The wrapper's effective config, typed: what an adapter reports after `fit` (`Adapter.effective_config()`), what the
worker records as `evalkit/effective_config.json` (`EffectiveConfig.as_json`) and what the probes read back
(`EffectiveConfig.of`).

Typed are the parts evalkit reads: the deviations the adapter knows of that apply to the job (`Deviation`, matched
to the semantic probe's findings by code), the setting that aligns each kind of finding (`aligns`), the knobs aligned
mode sets (`explicit_settings`) and the quick start defaults mode follows (`quick_start`, `departures`). Everything
else the wrapper says about itself is `details`, recorded as it is beside them (the JSON is one flat object).
No torch here: the probes and the controller's process read it.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

OWNED = ("model", "data", "observation")     # what evalkit may own in a quick start (`Departure.owns`)
CODE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*")
UNEXPLAINED = "unexplained"
EVALKITS_SETTING = "evalkit's setting, not the page's (the page makes no such choice)"


def jsonable(value: Any) -> Any:
    """A JSON-safe copy of a wrapper's report (anything unknown becomes its string)."""
    return json.loads(json.dumps(value, default=str))


def finding_family(code: str) -> str:
    """The kind of difference a finding code names: its first part (`lr` of `lr.per_epoch`), or for a difference the
    probe could not explain, the kind it was checking (`lr` of `unexplained.lr`)."""
    head, _, rest = code.partition(".")
    return rest.partition(".")[0] if head == UNEXPLAINED and rest else head


@dataclass(frozen=True)
class Deviation:
    """A difference from the baseline's semantics that the adapter knows of and that no setting of the wrapper
    removes. `code` is stable and says what it explains: a semantic finding's code (`clip.not_applied`) or a family
    of them (`lr`: every `lr.*` finding and `unexplained.lr`), compared whole (`explains`), never as a substring of
    the text. A difference the probe cannot observe (of a resumed run, of fp16 on CUDA) gets a code of
    its own (`resume.scaler_not_saved`): it is noted as declared and not observed. `by` says whose choice it is:
    the wrapper's, or evalkit's where the quick start's page makes none (a per-step schedule put in the per-epoch slot
    of a wrapper whose page has no scheduler): a finding it explains is labelled as evalkit's setting."""

    code: str
    text: str
    by: str = "wrapper"         # wrapper | evalkit

    def __post_init__(self) -> None:
        if not CODE.fullmatch(self.code):
            raise ValueError(f"deviation code {self.code!r} is not dotted lower-case words (e.g. 'clip.not_applied')")
        if not self.text.strip():
            raise ValueError(f"deviation {self.code!r} has no text")
        if self.by not in ("wrapper", "evalkit"):
            raise ValueError(f"deviation {self.code!r}: by={self.by!r} is neither 'wrapper' nor 'evalkit'")

    @property
    def declared(self) -> str:
        """The text a finding it explains quotes: labelled where the choice is evalkit's, not the page's."""
        return f"{EVALKITS_SETTING}: {self.text}" if self.by == "evalkit" else self.text

    def explains(self, finding_code: str) -> bool:
        """Whether a finding of this code is this deviation: the same code, or this deviation names its family."""
        return self.code in (finding_code, finding_family(finding_code))


@dataclass(frozen=True)
class QuickStartPage:
    """A documentation page that defaults mode follows line for line: its address and the wrapper version whose
    documentation it is (the installed one)."""

    address: str
    version: str
    follows: str = ""        # which part of the page, when it has several


@dataclass(frozen=True)
class Departure:
    """Where defaults mode departs from its quick start: `what` differs, `why` evalkit must own it, and which
    of `OWNED` it is. A departure that changes training semantics (a sampler, a loss division, a clip setting, an
    optimizer, an extra validation) is not one of these and is not allowed."""

    what: str
    why: str
    owns: str

    def __post_init__(self) -> None:
        if self.owns not in OWNED:
            raise ValueError(f"a quick-start departure may only concern {OWNED}, not {self.owns!r}: {self.what}")


@dataclass
class EffectiveConfig:
    """What the wrapper itself reports it did, after fit (see the module docstring)."""

    mode: str = "aligned"
    deviations: list[Deviation] = field(default_factory=list)     # the adapter's known ones that apply to this job
    aligns: dict[str, str] = field(default_factory=dict)          # finding code or family -> the setting aligning it
    explicit_settings: dict[str, Any] | None = None               # aligned: every knob set to match the baseline
    quick_start: list[QuickStartPage] = field(default_factory=list)    # defaults: the pages followed
    departures: list[Departure] = field(default_factory=list)          # defaults: where it departs from them
    details: dict[str, Any] = field(default_factory=dict)              # the rest of the wrapper's report, as it is

    def as_json(self) -> dict[str, Any]:
        deviations = [{"code": d.code, "text": d.text, **({"by": d.by} if d.by != "wrapper" else {})}
                      for d in self.deviations]      # `by` only where it is evalkit's choice
        typed: dict[str, Any] = {"mode": self.mode, "deviations": deviations,
                                 "aligns": dict(self.aligns)}
        if self.explicit_settings is not None:
            typed["explicit_settings"] = self.explicit_settings
        if self.mode == "defaults":
            typed["quick_start"] = [asdict(page) for page in self.quick_start]
            typed["departures"] = [asdict(d) for d in self.departures]
        return jsonable({**self.details, **typed})

    @classmethod
    def of(cls, report: "EffectiveConfig | Mapping[str, Any]") -> "EffectiveConfig":
        """An adapter's report or a recorded one, typed; a typed key of the wrong shape raises ValueError (a third
        party's plain dict lands in `details`, but for the keys this class types)."""
        if isinstance(report, EffectiveConfig):
            return report
        if not isinstance(report, Mapping):
            raise ValueError(f"an effective config is a mapping, not {type(report).__name__}")
        details = dict(report)
        try:
            return cls(mode=str(details.pop("mode", "aligned")),
                       deviations=[Deviation(**d) for d in details.pop("deviations", None) or []],
                       aligns={str(k): str(v) for k, v in (details.pop("aligns", None) or {}).items()},
                       explicit_settings=details.pop("explicit_settings", None),
                       quick_start=[QuickStartPage(**p) for p in details.pop("quick_start", None) or []],
                       departures=[Departure(**d) for d in details.pop("departures", None) or []],
                       details=details)
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"an effective config's typed keys have the wrong shape: {exc}") from exc
