"""A wrapper's environment as evalkit-env leaves it (`trainer.env`), made without pip."""
from __future__ import annotations

from pathlib import Path


def fake_env(root, name: str, python: str | None = None, **manifest):
    """A wrapper's environment as evalkit-env leaves it, without pip: its folder under `root`, `bin/python` (the
    script `python` when given, else an empty file) and its manifest (beside this torch and site-packages unless
    `manifest` says otherwise; None: incomplete)."""
    import json

    from evalkit import names
    from evalkit.envs.store import base_site_packages, torch_version

    path = Path(root) / name
    (path / "bin").mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (path / "bin" / "python").write_text(python or "")
    (path / "bin" / "python").chmod(0o755)
    if manifest.get("requirements", ()) is not None:
        full = {"name": name, "requirements": [], "resolved": {}, "installed": {}, "shadows": {},
                "torch": torch_version(), "base_site_packages": base_site_packages(), "created": "2026-12-05"}
        (path / names.ENV_MANIFEST_FILE).write_text(json.dumps({**full, **manifest}))
    return path
