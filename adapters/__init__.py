"""The bundled adapters: each runs one training wrapper on an evalkit task (the contract: `evalkit.contract`).

A bundled trainer is these files and no others (tests, the quick evaluation and every probe find it by its YAML,
through `evalkit.trainers.bundled_trainers()`; each file's fields: docs/adapters.md, "Adding a bundled trainer"):
- `src/evalkit/conf/trainer/<name>.yaml`, the one place what the wrapper needs is written (requirements, modules,
  launch, docs, customizations);
- `adapters/<module>.py`: the adapter class, a `evalkit.contract.WrapperAdapter` with `fit(job)`. It imports its
  wrapper inside `fit` (never at module level) and states nothing of the YAML's (no module or distribution lists);
  it declares once `deviations` (reported by `fit` as they apply), `aligns`, `quick_start` and `departures`. Its
  docstring is short and points at `docs/wrappers/<module>.md`, the wrapper's full record.
- `adapters/custom/<name>_loss.py` and `<name>_callback.py`: subclasses of that class adding a custom loss and a
  callback the wrapper's documented way (the customization probe measures what they cost).
"""
