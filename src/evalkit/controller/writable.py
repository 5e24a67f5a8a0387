"""Whether new files can be created in a folder: tried, not read from mode bits (root, read-only mounts and
ACLs decide, and `os.access` sees none of them the way the write will)."""
from __future__ import annotations

import errno
import os
import tempfile


def write_problem(folder: str) -> str | None:
    """None when a file can be created in `folder`, or, if it does not exist yet, in the nearest existing
    folder above it (where it would be created); else where and why not: '/data/ro: Permission denied'."""
    target = os.path.abspath(folder)
    while not os.path.lexists(target) and os.path.dirname(target) != target:
        target = os.path.dirname(target)
    if not os.path.isdir(target):
        return f"{target}: not a directory"
    try:
        with tempfile.TemporaryFile(dir=target):
            pass
    except OSError as exc:
        return f"{target}: {exc.strerror or exc}"
    return None


def space_problem(folder: str) -> str | None:
    """'<folder>: No space left on device' when 64 KiB cannot be written there (a full disk, a quota); None
    otherwise (other failures are not this question's)."""
    try:
        with tempfile.TemporaryFile(dir=folder) as fh:
            fh.write(b"\0" * 65536)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"{folder}: {exc.strerror}"
    return None
