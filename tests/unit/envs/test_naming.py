"""envs/naming.py: an environment's name from its requirements, and back to the command that creates it."""
from __future__ import annotations

import pytest

from evalkit.envs.naming import create_command, env_name, name_problem, requirements_of


@pytest.mark.parametrize("requirements, name", [
    (["pytorch-ignite==0.4.11"], "pytorch-ignite-0.4.11"),
    (["PyTorch_Ignite == 0.4.11"], "pytorch-ignite-0.4.11"),          # the index's spelling of the name
    (["transformers==4.45.2", "accelerate==0.34.2"], "transformers-4.45.2_accelerate-0.34.2"),
    (["pytorch-ignite==0.5.0.post2"], "pytorch-ignite-0.5.0.post2"),
])
def test_plain_pins_name_their_environment_and_the_name_gives_them_back(requirements, name):
    assert env_name(requirements) == name
    assert requirements_of(name) == [line.replace(" ", "").replace("PyTorch_Ignite", "pytorch-ignite")
                                     for line in requirements]
    assert create_command(name) == "evalkit-env create " + " ".join(requirements_of(name))
    assert name_problem(name) is None


def test_a_range_gets_a_slug_and_a_hash_and_its_command_needs_a_name():
    name = env_name(["transformers>=4.40,<4.46"])
    assert name.startswith("transformers-4.40-4.46-") and len(name.rsplit("-", 1)[1]) == 8
    assert env_name(["transformers>=4.40,<4.47"]) != name                 # another range, another environment
    assert requirements_of(name) is None
    assert create_command(name) == f"evalkit-env create <requirement> --name {name}"
    assert create_command("my-hf") == "evalkit-env create <requirement> --name my-hf"


@pytest.mark.parametrize("bad", ["../etc", "a/b", "", ".hidden", "x" * 200])
def test_a_name_is_one_folder_never_a_path(bad):
    assert "is not an environment name" in name_problem(bad)
