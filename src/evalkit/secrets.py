"""Keep secrets out of MLflow: values whose key looks like a credential are redacted."""
from __future__ import annotations

import re
from typing import Any

SECRET_KEY = re.compile(r"(token|passw|secret|api[_-]?key|access[_-]?key|private[_-]?key|credential|auth)",
                        re.IGNORECASE)
REDACTED = "***redacted***"


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY.search(key))


def redact(value: Any, key: str = "") -> Any:
    """A copy of `value` with every entry under a credential-like key replaced (recursively)."""
    if key and is_secret_key(key) and value not in (None, "", [], {}):
        return REDACTED
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value
