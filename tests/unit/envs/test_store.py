"""envs/store.py: where the environments live, and the check that one can still run evalkit's workers."""
from __future__ import annotations

import pytest
from fake_envs import fake_env

from evalkit import names
from evalkit.envs import store


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv(names.ENVS_DIR_ENV, str(tmp_path / "envs"))
    return tmp_path / "envs"


def test_the_folder_is_the_users_cache_unless_moved(monkeypatch, tmp_path):
    monkeypatch.delenv(names.ENVS_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert store.envs_root() == tmp_path / "evalkit" / "envs"
    monkeypatch.setenv(names.ENVS_DIR_ENV, str(tmp_path / "elsewhere"))
    assert store.envs_root() == tmp_path / "elsewhere"


def test_a_ready_environment_is_found_with_its_interpreter(root):
    fake_env(root, "pytorch-ignite-0.4.11", requirements=["pytorch-ignite==0.4.11"])
    env = store.ready("pytorch-ignite-0.4.11")
    assert env.python == root / "pytorch-ignite-0.4.11" / "bin" / "python"
    assert env.manifest()["requirements"] == ["pytorch-ignite==0.4.11"]
    assert [e.name for e in store.all_envs()] == ["pytorch-ignite-0.4.11"]


def test_a_missing_environment_names_the_command_that_creates_it(root):
    with pytest.raises(store.EnvUnavailable) as exc:
        store.ready("pytorch-ignite-0.4.11")
    assert str(exc.value) == (f"trainer.env=pytorch-ignite-0.4.11: no such environment in {root}: create it with "
                              "`evalkit-env create pytorch-ignite==0.4.11`")


@pytest.mark.parametrize("manifest, says", [
    ({"requirements": None}, "is incomplete (its creation did not finish)"),
    ({"torch": "1.13.1"}, "was created beside torch 1.13.1, evalkit now runs torch"),
    ({"base_site_packages": ["/old/venv/site-packages"]}, "was created for evalkit's environment at /old/venv"),
])
def test_an_environment_that_cannot_run_the_workers_today_says_how_to_recreate_it(root, manifest, says):
    fake_env(root, "lightning-2.5.2", **manifest)
    with pytest.raises(store.EnvUnavailable) as exc:
        store.ready("lightning-2.5.2")
    assert says in str(exc.value)
    assert str(exc.value).endswith("`evalkit-env remove lightning-2.5.2` then `evalkit-env create lightning==2.5.2`")


def test_remove_deletes_an_environment_complete_or_not_and_only_an_environment(root):
    fake_env(root, "a-1.0", requirements=None)
    assert store.remove("a-1.0").name == "a-1.0" and not (root / "a-1.0").exists()
    with pytest.raises(store.EnvUnavailable, match="no environment 'a-1.0'"):
        store.remove("a-1.0")
    with pytest.raises(store.EnvUnavailable, match="is not an environment name"):
        store.remove("..")
