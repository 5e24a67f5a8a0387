"""envs/create.py with pip played by a fake (no process, no index): what pip is asked, in which order, what the
manifest holds, and that a refusal leaves nothing behind. The real pip is tested in tests/e2e/test_envs.py."""
from __future__ import annotations

import datetime
import json
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from evalkit.envs import create as create_module
from evalkit.envs.create import CreateRefused, create
from evalkit.envs.store import PTH_FILE, base_site_packages, torch_version

CONFLICT = """ERROR: Cannot install pytorch-ignite==0.4.8 because these package versions have conflicting dependencies.

The conflict is caused by:
    pytorch-ignite 0.4.8 depends on torch<2 and >=1.3
    The user requested (constraint) torch==2.13.0+cpu

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/
"""
SHADOWED = "omegaconf"     # a distribution evalkit's environment holds (evalkit needs it)


class FakePip:
    """Answers the environment's pip and its import check as the real ones would."""

    def __init__(self, install: list[tuple[str, str]], dry_run_fails: str | None = None, import_error: str = ""):
        self.install, self.dry_run_fails, self.import_error = install, dry_run_fails, import_error
        self.calls: list[list[str]] = []

    def __call__(self, command, **kwargs):
        command = [str(c) for c in command]
        self.calls.append(command)
        if "-c" in command and command[command.index("-c") + 1].startswith("\nimport importlib"):
            errors = {"ignite.engine": self.import_error} if self.import_error else {}
            torch_file = f"{base_site_packages()[0]}/torch/__init__.py"
            return subprocess.CompletedProcess(command, 0, json.dumps({"errors": errors,
                                                                       "torch": [torch_version(), torch_file]}), "")
        if "--dry-run" in command:
            if self.dry_run_fails:
                return subprocess.CompletedProcess(command, 1, self.dry_run_fails)
            report = {"install": [{"metadata": {"name": n, "version": v}} for n, v in self.install]}
            Path(command[command.index("--report") + 1]).write_text(json.dumps(report))
            return subprocess.CompletedProcess(command, 0, "Would install ...")
        site = Path(command[0]).parent.parent / "lib"
        site = next(site.glob("python*/site-packages"))
        for pin in command[command.index("--no-warn-conflicts") + 1:]:
            name, version = pin.split("==")
            info = site / f"{name}-{version}.dist-info"
            info.mkdir()
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        return subprocess.CompletedProcess(command, 0, "Successfully installed ...")


def _installed_here(name: str) -> bool:
    try:
        return bool(metadata.version(name))
    except metadata.PackageNotFoundError:
        return False


@pytest.fixture
def pip(monkeypatch):
    def use(*args, **kwargs) -> FakePip:
        fake = FakePip(*args, **kwargs)
        monkeypatch.setattr(create_module.subprocess, "run", fake)
        return fake
    return use


def test_pip_resolves_beside_evalkits_torch_then_installs_only_what_it_listed_into_the_environment(tmp_path, pip):
    fake = pip([("pytorch-ignite", "0.4.11"), (SHADOWED, "2.3.0")])
    env, created = create(["pytorch-ignite==0.4.11"], root=tmp_path)
    assert created and env.path == tmp_path / "pytorch-ignite-0.4.11"
    dry, install, check = fake.calls
    # the dry run sees evalkit's environment (torch pinned to the installed one); nothing is installed before it
    assert dry[:4] == [str(env.python), "-m", "pip", "install"] and "--dry-run" in dry
    constraints = Path(dry[dry.index("-c") + 1]).read_text()
    assert constraints == f"torch=={torch_version()}\n" and dry[-1] == "pytorch-ignite==0.4.11"
    # then exactly its list, into the environment, never looking at (so never uninstalling) evalkit's own
    assert {"--no-deps", "--ignore-installed"} <= set(install)
    assert install[-2:] == ["pytorch-ignite==0.4.11", f"{SHADOWED}==2.3.0"]
    assert check[0] == str(env.python) and check[-4:] == ["ignite.engine", "ignite.handlers", "ignite.metrics",
                                                          "ignite.distributed"]   # the bundled ignite's modules
    # evalkit's site-packages after the environment's own, their .pth files read (site.addsitedir)
    assert (env.site_packages / PTH_FILE).read_text() == \
        "".join(f"import site; site.addsitedir({p!r})\n" for p in base_site_packages())
    manifest = env.manifest()
    assert manifest["requirements"] == ["pytorch-ignite==0.4.11"]
    assert manifest["resolved"] == {"pytorch-ignite": "0.4.11"}
    assert manifest["installed"] == {"pytorch-ignite": "0.4.11", SHADOWED: "2.3.0"}
    assert manifest["shadows"] == {name: metadata.version(name) for name in ("pytorch-ignite", SHADOWED)
                                   if _installed_here(name)}     # evalkit's versions of those it shadows
    assert SHADOWED in manifest["shadows"]
    assert manifest["torch"] == torch_version() and manifest["base_site_packages"] == base_site_packages()
    assert manifest["created"][:10] == datetime.datetime.now(datetime.timezone.utc).date().isoformat()


@pytest.mark.parametrize("requirement", ["lightning>=!2", "lightning==", "==2.5.3", "lightning 2.5.3"])
def test_a_requirement_that_does_not_parse_is_refused_before_pip_or_a_folder(tmp_path, pip, requirement):
    """Issue 48: `evalkit-env create 'lightning>=!2'` "succeeded"."""
    fake = pip([])
    with pytest.raises(CreateRefused, match=r"is not a requirement .*e\.g\. lightning==2\.5\.3"):
        create([requirement], root=tmp_path)
    assert fake.calls == [] and list(tmp_path.iterdir()) == []


def test_a_second_create_finds_the_environment_without_asking_pip(tmp_path, pip):
    pip([("pytorch-ignite", "0.4.11")])
    first, _ = create(["pytorch-ignite==0.4.11"], root=tmp_path)
    fake = pip([])
    again, created = create(["pytorch-ignite==0.4.11"], root=tmp_path)
    assert (again, created, fake.calls) == (first, False, [])
    with pytest.raises(CreateRefused, match="exists with pytorch-ignite==0.4.11: remove it first"):
        create(["pytorch-ignite==0.4.12"], name="pytorch-ignite-0.4.11", root=tmp_path)


def test_a_release_that_needs_another_torch_is_refused_before_anything_is_installed(tmp_path, pip):
    fake = pip([], dry_run_fails=CONFLICT)
    with pytest.raises(CreateRefused) as exc:
        create(["pytorch-ignite==0.4.8"], root=tmp_path)
    assert str(exc.value) == (f"pytorch-ignite==0.4.8 cannot install beside torch {torch_version()} (evalkit's "
                              "workers reuse it): pytorch-ignite 0.4.8 depends on torch<2 and >=1.3")
    assert len(fake.calls) == 1 and "--dry-run" in fake.calls[0]
    assert not (tmp_path / "pytorch-ignite-0.4.8").exists()


def test_a_wrapper_that_installs_but_does_not_import_is_refused_and_removed(tmp_path, pip):
    pip([("pytorch-ignite", "0.4.11")], import_error="ImportError: cannot import name 'x' from 'torch'")
    with pytest.raises(CreateRefused, match="installs beside torch .* but ignite.engine does not import there: "
                                            "ImportError: cannot import name 'x'"):
        create(["pytorch-ignite==0.4.11"], root=tmp_path)
    assert not (tmp_path / "pytorch-ignite-0.4.11").exists()


def test_an_unfinished_environment_is_created_again(tmp_path, pip):
    (tmp_path / "pytorch-ignite-0.4.11" / "lib").mkdir(parents=True)      # a creation killed half-way
    (tmp_path / "pytorch-ignite-0.4.11" / "pyvenv.cfg").write_text("")
    pip([("pytorch-ignite", "0.4.11")])
    env, created = create(["pytorch-ignite==0.4.11"], root=tmp_path)
    assert created and env.manifest()["installed"] == {"pytorch-ignite": "0.4.11"}
