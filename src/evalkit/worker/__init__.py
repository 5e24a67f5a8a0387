"""The worker side: one process per rank builds the task, attaches the observers and hands the job to the
adapter. It talks to nobody but its spool; it never imports the controller, the tracking client or a verdict.
"""
import importlib
import os
import sys

OWN_PACKAGES = ("evalkit.adapters",)   # installed from adapters/ (setup.py), found before the cwd


def working_directory_last() -> None:
    """`python -m evalkit.worker` puts the caller's working directory first on sys.path, so a folder there named
    like a package the worker imports (a user's own `lightning/` or `transformers/`) would be imported instead of
    it. The bundled adapters are found with the directory off the path (they install as `evalkit.adapters`, which no
    folder there can be), then it goes back, last: the user's own modules there (a third party's adapter beside the
    command) still import, and the installed packages come first."""
    if not sys.path or sys.path[0] not in ("", os.getcwd()):
        return
    cwd = sys.path.pop(0)
    try:
        for name in OWN_PACKAGES:      # the package itself only: its modules follow its __path__
            importlib.import_module(name)
    except ImportError:                # not installed here (a worker of a wrapper's environment says why later)
        pass
    finally:
        sys.path.append(cwd)
