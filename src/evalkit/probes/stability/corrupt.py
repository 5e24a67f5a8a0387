"""Damaged copies of a checkpoint, offered to a resume: truncated, bytes flipped, another model's; and the control,
an intact copy of the same checkpoint (`intact`), whose resume tells a refusal of the damage from a wrapper that
fails every resume.

A copy holds every entry the source job wrote after one step (a checkpoint may be a file, a directory, or a file
and its checksum), in a directory of its own beside the probe's jobs. The damage goes to the copy's largest file:
cut to half its length, or 256 bytes inverted in the middle of its largest floating-point tensor: a zip archive's
(torch.save's format; its reader checks no CRC) storage of a float type, as its data.pkl names them; a safetensors
file's tensor of a float dtype; else the file's middle. Flipped there, the damage is to weights, which only a
checksum finds: never to a header that any reader refuses, nor to an RNG state or a step count whose garbage fails
the resume by accident (either would be no test of the wrapper). Nothing of the source is changed.
"""
from __future__ import annotations

import json
import os
import pickletools
import shutil
import zipfile

FLIPPED = 256


def copy_step(ckpt_dir: str, listing: list[dict], step: int, dest: str) -> list[str]:
    """Copy the entries written after `step` (from the job summary's checkpoint listing) into `dest`."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    copied = []
    for entry in listing:
        if entry["after_step"] != step:
            continue
        src = os.path.join(ckpt_dir, entry["name"])
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(dest, entry["name"]))
        elif os.path.exists(src):
            shutil.copy2(src, os.path.join(dest, entry["name"]))
        copied.append(entry["name"])
    return copied


def largest_file(root: str) -> str:
    files = [os.path.join(r, f) for r, _, fs in os.walk(root) for f in fs]
    if not files:
        raise FileNotFoundError(f"no checkpoint file under {root}")
    return max(files, key=lambda p: (os.path.getsize(p), p))


def truncate(path: str) -> str:
    size = os.path.getsize(path)
    with open(path, "r+b") as fh:
        fh.truncate(size // 2)
    return f"{os.path.basename(path)} cut from {size} to {size // 2} bytes"


FLOAT_STORAGES = {"FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage"}
FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}


def payload(path: str) -> tuple[int, int]:
    """(start, end) of the bytes of the file's largest floating-point tensor (a zip archive's storage, a safetensors
    tensor); the whole file when it holds none that can be told."""
    size = os.path.getsize(path)
    if zipfile.is_zipfile(path):
        found = _zip_float_storage(path)
        if found is not None:
            return found
    if path.endswith(".safetensors") and size > 8:
        with open(path, "rb") as fh:
            length = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(length))
        floats = [v["data_offsets"] for k, v in header.items() if k != "__metadata__" and v["dtype"] in FLOAT_DTYPES]
        if floats:
            begin, end = max(floats, key=lambda o: o[1] - o[0])
            return 8 + length + begin, 8 + length + end
    return 0, size


def _zip_float_storage(path: str) -> tuple[int, int] | None:
    """The largest float storage of a torch.save archive: its data.pkl names each storage's type, then its key
    (the entry `<archive>/data/<key>`)."""
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if not pickles:
            return None
        kinds, kind, memo, last = {}, None, {}, None     # a storage type named again is fetched from the memo
        for op, arg, _ in pickletools.genops(archive.read(pickles[0])):
            if op.name == "GLOBAL" and isinstance(arg, str) and arg.startswith("torch ") and arg.endswith("Storage"):
                kind = last = arg.split()[1]
                continue
            if op.name in ("BINPUT", "LONG_BINPUT") and last is not None:
                memo[arg] = last
            elif op.name in ("BINGET", "LONG_BINGET") and arg in memo:
                kind = memo[arg]
            elif kind is not None and op.name in ("BINUNICODE", "SHORT_BINUNICODE", "UNICODE") and arg != "storage":
                kinds[arg], kind = kind, None
            last = None
        prefix = pickles[0][: -len("data.pkl")]
        entries = [archive.getinfo(f"{prefix}data/{key}") for key, k in kinds.items()
                   if k in FLOAT_STORAGES and f"{prefix}data/{key}" in archive.namelist()]
    if not entries:
        return None
    entry = max(entries, key=lambda i: (i.file_size, i.filename))
    with open(path, "rb") as fh:
        fh.seek(entry.header_offset)
        local = fh.read(30)      # the local file header: its name and extra field lengths end it
    start = entry.header_offset + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
    return start, start + entry.compress_size


def flip(path: str) -> str:
    size = os.path.getsize(path)
    start, end = payload(path)
    at = max(start, (start + end) // 2 - FLIPPED // 2)
    with open(path, "r+b") as fh:
        fh.seek(at)
        data = fh.read(FLIPPED)
        fh.seek(at)
        fh.write(bytes(b ^ 0xFF for b in data[: end - at]) + data[end - at:])
    return (f"{min(len(data), end - at)} bytes inverted at offset {at} of {os.path.basename(path)} ({size} bytes; "
            f"its tensors' bytes {start}..{end})")


def prepare(kind: str, ckpt_dir: str, listing: list[dict], dest: str, at_most: int) -> str:
    """The damaged copy in `dest` of the latest checkpoint of `listing` written at or before step `at_most` (so
    the resume has steps left to train); returns what was done, in words."""
    steps = [e["after_step"] for e in listing if 0 < e["after_step"] <= at_most]
    if not steps:
        raise FileNotFoundError(f"the job that wrote {ckpt_dir} listed no checkpoint up to step {at_most}")
    step = max(steps)
    names = copy_step(ckpt_dir, listing, step, dest)
    if kind == "other-model":
        return f"the checkpoint of step {step} of a wider model ({', '.join(names)})"
    if kind == "intact":
        return f"an undamaged copy of the checkpoint of step {step} ({', '.join(names)})"
    target = largest_file(dest)
    return f"checkpoint of step {step}: " + (truncate(target) if kind == "truncated" else flip(target))
