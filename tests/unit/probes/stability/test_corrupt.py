"""The flipped-bytes drill damages the weights, never a header (issue 44): in a torch.save archive the 256 bytes
inverted lie inside its largest entry's data, so torch's reader (no CRC check) still loads it and only a checksum
can refuse it; a flip landing on an entry's header would be refused by any reader and judge nothing of the
wrapper. The probe reads the file, imports no torch; the test builds the archive with torch."""
from __future__ import annotations

import zipfile

import torch

from evalkit.probes.stability.corrupt import FLIPPED, flip, payload


def test_the_flip_lands_inside_the_largest_float_tensor_and_the_archive_still_loads(tmp_path):
    """Larger entries that are not weights (an RNG state, an int64 step table) are left alone: their garbage would
    fail the resume by accident, not by the wrapper's check."""
    path = tmp_path / "step_00000012.ckpt"
    state = {"small": torch.arange(7, dtype=torch.float32), "big": torch.ones(3000),
             "rng": torch.get_rng_state(), "steps": torch.arange(4000), "meta": {"epoch": 1, "name": "x" * 500}}
    torch.save(state, path)
    start, end = payload(str(path))
    assert end - start == 3000 * 4                              # "big", not the larger int64 and RNG entries
    with zipfile.ZipFile(path) as archive:
        (biggest,) = [i for i in archive.infolist() if i.file_size == 3000 * 4]
    said = flip(str(path))
    assert said.startswith(f"{FLIPPED} bytes inverted at offset ") and f"its tensors' bytes {start}..{end}" in said
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() == biggest.filename          # only that entry's bytes differ from its CRC
    loaded = torch.load(path, weights_only=True)                # torch's reader checks no CRC: it loads
    assert torch.equal(loaded["small"], state["small"]) and loaded["meta"] == state["meta"]
    assert torch.equal(loaded["rng"], state["rng"]) and torch.equal(loaded["steps"], state["steps"])  # larger,
    changed = (loaded["big"] != state["big"]).sum().item()
    assert changed == FLIPPED // 4


def test_a_safetensors_file_is_flipped_after_its_header_and_anything_else_at_its_middle(tmp_path):
    header = (b'{"ids":{"dtype":"I64","shape":[400],"data_offsets":[0,3200]},'
              b'"w":{"dtype":"F32","shape":[400],"data_offsets":[3200,4800]}}')
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4800)
    assert payload(str(path)) == (8 + len(header) + 3200, 8 + len(header) + 4800)
    flip(str(path))
    assert path.read_bytes()[8:8 + len(header)] == header
    other = tmp_path / "opt.bin"
    other.write_bytes(b"\0" * 1000)
    assert payload(str(other)) == (0, 1000)
