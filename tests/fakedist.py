"""A small fake installed wrapper for the maintenance tests: `build_site(dir)` writes `.dist-info` folders and
packages that `importlib.metadata` and a child process with the folder on PYTHONPATH see as installed."""
from __future__ import annotations

from pathlib import Path

FAKEWRAP = '''\
import warnings

_BALLAST = b"\\x01" * (4 << 20)      # 4 MiB written at import: resident memory the import adds


class FakeDeprecation(DeprecationWarning):
    pass


def old_api():
    warnings.warn("old_api is deprecated, use new_api", DeprecationWarning, stacklevel=2)


def older_api():
    warnings.warn("older_api is going away", FakeDeprecation, stacklevel=2)


def future_api():
    warnings.warn("future_api will change", FutureWarning, stacklevel=2)


def shaky():
    warnings.warn("shaky is experimental", UserWarning, stacklevel=2)
'''


def _dist_info(site, name: str, version: str, requires: list[str], record: list[str] | None) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    if record is not None:
        (info / "RECORD").write_text("".join(f"{path},,\n" for path in record))


def build_site(site: Path) -> Path:
    """fakewrap 1.2.0 -> fakedep 1.0 -> fake-leaf 0.1 (no RECORD), plus a requirement nothing installs."""
    _dist_info(site, "fakewrap", "1.2.0",
               ["FakeDep>=1", "torch<2.10", "numpy<3; python_version>='3'", 'otherdep; extra == "x"',
                "fakemissing>=0.1"],
               ["fakewrap/__init__.py", "fakewrap-1.2.0.dist-info/METADATA"])
    _dist_info(site, "fakedep", "1.0", ["Fake.Leaf", "torch~=2.13"],
               ["fakedep/a.bin", "fakedep/b.bin", "fakedep/gone.bin"])
    _dist_info(site, "fake-leaf", "0.1", ["torch>=2.0"], None)
    (site / "fakewrap").mkdir()
    (site / "fakewrap" / "__init__.py").write_text(FAKEWRAP)
    (site / "fakedep").mkdir()
    (site / "fakedep" / "a.bin").write_bytes(b"a" * 1000)
    (site / "fakedep" / "b.bin").write_bytes(b"b" * 234)
    (site / "fakebroken").mkdir()
    (site / "fakebroken" / "__init__.py").write_text("raise RuntimeError('fakebroken cannot start')\n")
    return site


