"""The bundled adapters: each runs one training wrapper on an evalkit task (the contract: `evalkit.contract`).

A bundled trainer is these files and no others (tests, the quick evaluation and every probe find it by its YAML,
through `evalkit.trainers.bundled_trainers()`):

- `src/evalkit/conf/trainer/<name>.yaml`, the one place what the wrapper needs is written:
  `_target_` (its adapter class), `name`, `mode: aligned`, `options: {}`,
  `requirements` (pip requirements, pinned, the wrapper's own distribution first: install hint, versions recorded,
  the maintenance probe's releases; pyproject's `all` extra lists each too, as pip reads extras nowhere else, and
  tests/unit/test_trainers.py names a missing one), `modules` (what the adapter imports: checked before launch,
  imported before the task is built by the worker and the warm server, the maintenance probe's import cost), and
  `customizations: {loss: <class>, callback: <class>}` for the customization probe.
- `adapters/<module>.py`: the adapter class, a `evalkit.contract.WrapperAdapter` with `fit(job)`; it imports its
  wrapper inside `fit` (never at module level) and states nothing of the YAML's (no module or distribution lists).
  Written once in it: `deviations`, every difference from the baseline's semantics it knows of, a tuple of
  `Deviation(code, text)` (`code`: the semantic finding it explains, `clip.not_applied`, or its family, `lr`; else
  a code of its own, `resume.scaler_not_saved`), of which `fit` reports those that apply to its job with
  `self.record_deviations(code, ...)`; `aligns` (finding code or family -> the wrapper's setting that aligns it);
  `quick_start` and `departures` (defaults mode); what aligned mode sets, as `self.explicit_settings`; anything else
  the wrapper reports, in `self._effective`. Its docstring is short: what the adapter is, its modes in a line each,
  what a reader of the code must not guess, and a pointer to `docs/wrappers/<module>.md`, which keeps the full record
  (launch, each mode line by line, the pages followed); it points at `deviations` instead of repeating them.
- `adapters/custom/<name>_loss.py` and `<name>_callback.py`: subclasses of that class adding a custom loss and a
  callback the wrapper's documented way (the customization probe measures what they cost).
"""
