"""The adapter contract's package (`evalkit.contract`): every name its single module offered is still imported from
it, and its torch-free modules (what the controller's process checks a config with) import no torch, nor does the
package until a name of adapter.py is asked for."""
from __future__ import annotations

import importlib
import sys

import pytest

import evalkit

# What `from evalkit.contract import ...` gave when the contract was one module (src/evalkit/contract.py).
PUBLIC = ["ADAPTER_METHODS", "Adapter", "AdapterUnavailable", "Departure", "Deviation", "EffectiveConfig", "MODES",
          "NotAnAdapter", "OWNED", "OrderedSampler", "Precision", "QuickStartPage", "Recipe", "Task", "TrainJob",
          "UnsupportedCombination", "ValSampler", "WrapperAdapter", "adapter_class_problem", "check_mode",
          "declared_in", "jsonable", "no_value_sink", "not_an_adapter", "same_device", "unknown_options"]


def test_every_name_of_the_contract_is_imported_from_the_package():
    import evalkit.contract as contract
    from evalkit.contract import adapter, adapter_class, effective, options

    assert sorted(contract.__all__) == sorted(PUBLIC)
    for name in PUBLIC:   # the very object of the module that holds it
        assert any(getattr(home, name, None) is getattr(contract, name)
                   for home in (adapter, adapter_class, effective, options)), name
    assert set(PUBLIC) <= set(dir(contract))
    with pytest.raises(AttributeError, match="no_such_name"):
        contract.no_such_name   # noqa: B018 - the lookup is the test


def test_the_torch_free_modules_and_the_package_import_no_torch(monkeypatch):
    """torch made unimportable and the package imported afresh: the torch-free modules and names load, and only a
    name of adapter.py reaches for torch."""
    monkeypatch.setattr(evalkit, "contract", evalkit.contract)           # the package's attribute, put back after
    for module in [m for m in sys.modules if m == "evalkit.contract" or m.startswith("evalkit.contract.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "torch", None)                      # `import torch` raises ImportError
    for module in ("evalkit.contract.adapter_class", "evalkit.contract.options", "evalkit.contract.effective"):
        importlib.import_module(module)
    from evalkit.contract import MODES, EffectiveConfig, not_an_adapter  # noqa: F401 - torch-free names
    assert "evalkit.contract.adapter" not in sys.modules
    with pytest.raises(ImportError):
        from evalkit.contract import TrainJob  # noqa: F401 - adapter.py imports torch
