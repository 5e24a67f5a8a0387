"""envs/pip_output.py: pip's answer read into one line, on pip's own recorded output."""
from __future__ import annotations

from evalkit.envs.pip_output import conflict_lines, refusal, report_problem

# `pip install --dry-run -c constraints.txt pytorch-ignite==0.4.8` beside torch 2.13.0+cpu (pip 23.2.1, recorded)
IGNITE_048 = """\
Looking in indexes: https://pypi.org/simple, file:///opt/pypi/simple
Collecting pytorch-ignite==0.4.8
  Downloading pytorch_ignite-0.4.8-py3-none-any.whl (251 kB)
INFO: pip is looking at multiple versions of pytorch-ignite to determine which version is compatible with other ...
ERROR: Cannot install pytorch-ignite==0.4.8 because these package versions have conflicting dependencies.

The conflict is caused by:
    pytorch-ignite 0.4.8 depends on torch<2 and >=1.3
    The user requested (constraint) torch<=2.14.1,==2.13.0+cpu

To fix this you could try to:
1. loosen the range of package versions you've specified
2. remove package versions to allow pip attempt to solve the dependency conflict

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/
"""
NO_SUCH_VERSION = """\
ERROR: Could not find a version that satisfies the requirement pytorch-ignite==9.9 (from versions: 0.1.0, 0.1.1)
ERROR: No matching distribution found for pytorch-ignite==9.9
"""


def test_a_release_that_needs_another_torch_is_refused_in_one_line_naming_the_conflict():
    line = refusal(["pytorch-ignite==0.4.8"], IGNITE_048, "2.13.0+cpu")
    assert line == ("pytorch-ignite==0.4.8 cannot install beside torch 2.13.0+cpu (evalkit's workers reuse it): "
                    "pytorch-ignite 0.4.8 depends on torch<2 and >=1.3")
    assert "\n" not in line


def test_a_conflict_between_other_packages_and_a_missing_version_are_named_too():
    other = IGNITE_048.replace("pytorch-ignite 0.4.8 depends on torch<2 and >=1.3",
                               "a 1.0 depends on numpy<2\n    b 2.0 depends on numpy>=2")
    assert conflict_lines(other) == ["a 1.0 depends on numpy<2", "b 2.0 depends on numpy>=2"]
    assert refusal(["a==1.0", "b==2.0"], other, "2.13.0") == \
        "a==1.0 b==2.0 cannot install: conflicting dependencies: a 1.0 depends on numpy<2; b 2.0 depends on numpy>=2"
    assert refusal(["pytorch-ignite==9.9"], NO_SUCH_VERSION, "2.13.0") == (
        "pytorch-ignite==9.9 cannot install: Could not find a version that satisfies the requirement "
        "pytorch-ignite==9.9 (from versions: 0.1.0, 0.1.1)")
    assert len(refusal(["x==1"], "ERROR: " + "y" * 5000, "2.13.0")) <= 400


def _item(name, version):
    return {"metadata": {"name": name, "version": version}}


def test_a_plan_that_would_install_torch_or_evalkit_into_the_environment_is_refused():
    assert report_problem({"install": [_item("pytorch-ignite", "0.4.11")]}, "2.13.0") is None
    assert "pip would install Torch 2.1.0 into the environment" in \
        report_problem({"install": [_item("pytorch-ignite", "0.4.11"), _item("Torch", "2.1.0")]}, "2.13.0")
    assert "evalkit" in report_problem({"install": [_item("evalkit", "9")]}, "2.13.0")
