"""The packages evalkit installs: src/evalkit's, and adapters/ under evalkit's own name (`evalkit.adapters`), so that
`import adapters` means nothing of evalkit's (AdapterHub's `adapters` is another package) and a folder named
`adapters/` beside a command cannot stand in for the bundled adapters. pyproject.toml holds everything else; this
file exists because a `find` directive in pyproject.toml cannot install a folder under another package's name."""
from setuptools import find_namespace_packages, setup

EVALKIT = find_namespace_packages("src", include=["evalkit*"])     # conf/'s folders of YAML too (namespace packages)
ADAPTERS = [f"evalkit.{name}" for name in find_namespace_packages(".", include=["adapters*"])]

setup(packages=EVALKIT + ADAPTERS, package_dir={"evalkit": "src/evalkit", "evalkit.adapters": "adapters"})
