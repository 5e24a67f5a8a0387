"""Keep secrets out of MLflow: values under a credential-like key, and credential-shaped values anywhere.

Two rules, applied together by `redact` (every writer of params, config and reports uses it):
- by key: a non-empty value whose key looks like a credential (`hub_token`, `api_key`, `password`, ...)
  is replaced whole;
- by shape: inside any string, well-known token formats (Hugging Face, GitHub, OpenAI-style `sk-`, AWS
  access key ids, Slack, JWTs, `Bearer ...`), the password of a `scheme://user:password@host` URL, and long
  random-looking runs of the base64/hex alphabet are replaced, the rest of the string kept.

Not secrets, kept: paths, URIs without a password, dotted import paths, numbers, UUIDs, 32-hex MLflow run
ids, and hex hashes under a key that names one (`commit`, `sha`, `digest`, ...: a git commit is 40 hex
characters, as was a pre-2021 GitHub token, so a bare 40-hex value under a neutral key is still masked).
"""
from __future__ import annotations

import re
from typing import Any

# `token` but not a count or an id of tokens (`max_tokens`, `tokenizer`, `pad_token_id`, `token_type_ids`)
SECRET_KEY = re.compile(r"(token(?!s|iz|_?ids?(?![a-z])|_type)|passw|secret|api[_-]?key|access[_-]?key|"
                        r"private[_-]?key|credential|auth)", re.IGNORECASE)
HASH_KEY = re.compile(r"commit|sha(1|256|512)?($|_)|hash|digest|checksum|revision|fingerprint", re.IGNORECASE)
REDACTED = "***redacted***"

TOKEN_SHAPES = re.compile("|".join((
    r"\bhf_(?=[A-Za-z]*\d)[A-Za-z0-9]{30,}",           # Hugging Face
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",                   # GitHub (personal, OAuth, user, server, refresh)
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",                 # GitHub fine-grained
    r"\bglpat-[A-Za-z0-9_-]{20,}",                     # GitLab
    r"(?<![\w-])sk-(?=[A-Za-z_-]*\d)[A-Za-z0-9_-]{20,}",  # OpenAI / Anthropic style (`sk-learn-...` is a name)
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",                  # AWS access key id
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",                # Slack
    r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",  # JWT (header.payload.signature)
)))
BEARER = re.compile(r"\b(Bearer)\s+(?=\S*\d)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
# up to the authority's last `@`: an unencoded `@` in the password leaks nothing
URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)[^/\s]*@")
OPAQUE_RUN = re.compile(r"[A-Za-z0-9+=_-]{32,}")   # `/`, `.` and `:` split: paths and import paths fall apart
SEPARATORS = re.compile(r"[+=_-]")
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
HEX = re.compile(r"[0-9a-fA-F]+")
# Random base64/base62 changes character class (upper, lower, digit) at ~62% of positions, 99% of 32-char
# strings at >= 40%; snake_case, kebab-case and CamelCase names with digits stay below (0.05-0.38).
RANDOM_CLASS_CHANGES = 0.4


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY.search(key))


def _class_changes(run: str) -> float:
    """The fraction of neighbouring characters of different classes (upper, lower, digit), separators ignored."""
    chars = SEPARATORS.sub("", run)
    kinds = ["u" if c.isupper() else "l" if c.islower() else "d" for c in chars]
    return sum(a != b for a, b in zip(kinds, kinds[1:])) / max(1, len(kinds) - 1)


def _looks_random(run: str, key: str) -> bool:
    """Whether a long base64/hex-alphabet run is a random credential rather than an identifier or a name."""
    if not (any(c.isdigit() for c in run) and any(c.isalpha() for c in run)) or UUID.fullmatch(run):
        return False
    if HEX.fullmatch(run):   # hashes and ids: a 32-hex run id, or a hash under a key naming one
        return len(run) > 32 and not HASH_KEY.search(key.rsplit(".", 1)[-1])
    return _class_changes(run) >= RANDOM_CLASS_CHANGES


def mask_url_passwords(text: str, mask: str = REDACTED) -> str:
    """`text` with the password of every `scheme://user:password@host` in it replaced by `mask`."""
    return URL_PASSWORD.sub(lambda m: f"{m.group('head')}{mask}@", text)


def redact_text(text: str, key: str = "") -> str:
    """`text` with every credential-shaped part replaced (the rest kept); `key` names where it came from."""
    text = TOKEN_SHAPES.sub(REDACTED, text)
    text = BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = mask_url_passwords(text)
    return OPAQUE_RUN.sub(lambda m: REDACTED if _looks_random(m.group(0), key) else m.group(0), text)


def redact(value: Any, key: str = "") -> Any:
    """A copy of `value` (recursively) with entries under a credential-like key replaced and every string
    passed through `redact_text`."""
    if key and is_secret_key(key) and value not in (None, "", [], {}):
        return REDACTED
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, key) for v in value]
    if isinstance(value, str):
        return redact_text(value, key)
    return value


def redact_override(override: str) -> str:
    """A command-line override (`key=value`, `+key=value`) with its value redacted as `redact` would."""
    key, sep, value = override.partition("=")
    if not sep:
        return redact_text(override)
    name = key.lstrip("+~")
    return f"{key}={REDACTED}" if is_secret_key(name) and value else f"{key}={redact_text(value, name)}"
