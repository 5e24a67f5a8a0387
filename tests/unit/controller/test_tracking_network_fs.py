"""A SQLite store on a network filesystem is refused before anything is written (issue 47): its locks do not hold
there, and a sweep's jobs on several nodes would corrupt it. Read from a planted mount table."""
from __future__ import annotations

import pytest

from evalkit.controller import tracking


@pytest.fixture
def shared(tmp_path, monkeypatch):
    """tmp_path/shared mounted over NFS, the rest of tmp_path on a local disk."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "local").mkdir()
    table = tmp_path / "mounts"
    table.write_text(f"/dev/sda1 / ext4 rw 0 0\nnas:/export/evalkit {tmp_path}/shared nfs4 rw,vers=4.2 0 0\n"
                     f"tmpfs {tmp_path}/odd\\040name tmpfs rw 0 0\n")
    monkeypatch.setattr(tracking, "MOUNTS", str(table))
    return tmp_path


def test_the_mount_holding_a_path_is_the_longest_mount_point_above_it(shared):
    assert tracking.filesystem_of(str(shared / "shared" / "sweeps" / "new")) == ("nfs4", f"{shared}/shared")
    assert tracking.filesystem_of(str(shared / "local")) == ("ext4", "/")
    assert tracking.filesystem_of(str(shared / "odd name" / "x")) == ("tmpfs", f"{shared}/odd name")
    assert tracking.filesystem_of(str(shared), mounts=str(shared / "no-such-table")) is None


def test_sqlite_on_nfs_is_refused_with_the_way_out_and_nothing_is_written(shared, monkeypatch):
    uri = f"sqlite:///{shared}/shared/mlflow.db"
    with pytest.raises(tracking.TrackingUnavailable, match=r"is on a network filesystem \(nfs4 mounted at .*shared\)"
                       r".*team's tracking server.*EVALKIT_ALLOW_SQLITE_ON_NETWORK_FS=1"):
        tracking.check_reachable(uri)
    assert not (shared / "shared" / "mlflow.db").exists()
    tracking.check_reachable(f"sqlite:///{shared}/local/mlflow.db")        # a local disk: as before
    monkeypatch.setenv(tracking.SQLITE_ON_NETWORK_ENV, "1")                 # the user insists: one host writes it
    tracking.check_reachable(uri)
