"""Checkpoint integrity: checksums at save, damaged checkpoints skipped and set aside (never
deleted), legacy checkpoints still load, `keep` validated, kills leave nothing half-done."""

import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from engine.checkpoint import CHECKSUMS, Checkpointer, CheckpointError, write_checksums
from engine.runfolder import UnsafePathError, WriteError

ROOT = Path(__file__).resolve().parents[2]
# When tensorstore fails to read damaged data, a callback of orbax's may land on an asyncio
# loop that is already closed; Python reports that as an unraisable exception. Harmless.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def _tree(v: float) -> dict:
    return {
        "w": np.full((16, 32), v, np.float32),
        "b": np.arange(5, dtype=np.int32) + int(v),
        "nested": {"s": np.array(v, np.float64)},
    }


def _target() -> dict:
    return jax.tree.map(np.zeros_like, _tree(0.0))


def _filled(tmp_path, steps=(100, 200, 300), keep=3) -> Path:
    directory = tmp_path / "ckpt"
    ckpt = Checkpointer(directory, keep=keep)
    for step in steps:
        ckpt.save(step, _tree(step), {"counters": {"env_steps": step}})
    ckpt.close()
    return directory


def _data_files(folder: Path) -> list[Path]:
    """The array data (tensorstore/OCDBT) files, largest first."""
    files = [p for p in (folder / "state").rglob("*") if p.is_file() and p.parent.name == "d"]
    return sorted(files, key=lambda p: (-p.stat().st_size, str(p)))


def _truncate(folder: Path):
    path = _data_files(folder)[0]
    os.truncate(path, path.stat().st_size // 2)


def _zero(folder: Path):
    for path in _data_files(folder):
        path.write_bytes(bytes(path.stat().st_size))


def _random_bytes(folder: Path):
    rng = np.random.default_rng(0)
    for path in _data_files(folder):
        path.write_bytes(rng.bytes(path.stat().st_size))


def _bad_state_metadata(folder: Path):
    (folder / "state" / "_METADATA").write_text('{"tree_metadata": {')


def _bad_meta_json(folder: Path):
    (folder / "meta" / "metadata").write_text("{not json")


def _missing_checksums(folder: Path):
    (folder / CHECKSUMS).unlink()


def _missing_file(folder: Path):
    _data_files(folder)[0].unlink()


DAMAGES = {
    "truncated": (_truncate, "bytes, expected"),
    "zeroed": (_zero, "sha256"),
    "random_bytes": (_random_bytes, "sha256"),
    "bad_state_metadata_json": (_bad_state_metadata, "_METADATA"),
    "bad_meta_json": (_bad_meta_json, "meta/metadata"),
    "missing_checksums": (_missing_checksums, f"{CHECKSUMS} is missing"),
    "missing_file": (_missing_file, "is missing"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_newest_falls_back_reports_and_sets_aside(tmp_path, capsys, damage):
    directory = _filled(tmp_path)
    damage_fn, expected = DAMAGES[damage]
    damage_fn(directory / "300")
    before = sorted(p.relative_to(directory / "300") for p in (directory / "300").rglob("*"))

    ckpt = Checkpointer(directory, keep=3)
    assert ckpt.latest_step() == 200  # newest that verifies; nothing moved yet
    assert (directory / "300").is_dir()
    state, meta, step = ckpt.restore(_target())

    assert step == 200 and meta == {"counters": {"env_steps": 200}}
    np.testing.assert_array_equal(state["w"], _tree(200)["w"])
    assert [s for s, _ in ckpt.skipped] == [300]
    assert expected in ckpt.skipped[0][1]
    err = capsys.readouterr().err
    assert f"checkpoint 300 skipped: {ckpt.skipped[0][1]}" in err
    # Moved aside with its files, not deleted; orbax no longer lists it.
    aside = directory / "damaged-300-1"
    assert aside.is_dir() and not (directory / "300").exists()
    assert sorted(p.relative_to(aside) for p in aside.rglob("*")) == before
    assert ckpt.steps() == [100, 200] and ckpt.latest_step() == 200
    ckpt.close()


def test_set_aside_checkpoint_survives_rotation_and_step_can_be_rewritten(tmp_path):
    directory = _filled(tmp_path, keep=2, steps=(200, 300))
    _zero(directory / "300")
    ckpt = Checkpointer(directory, keep=2)
    assert ckpt.restore(_target())[2] == 200
    ckpt.save(300, _tree(301), {"counters": {"env_steps": 300}})  # the resumed run's 300
    ckpt.save(400, _tree(400), {"counters": {"env_steps": 400}})
    assert ckpt.steps() == [300, 400]
    assert (directory / "damaged-300-1").is_dir()
    _truncate(directory / "400")
    _truncate(directory / "300")
    with pytest.raises(CheckpointError):
        ckpt.restore(_target())
    assert (directory / "damaged-300-2").is_dir() and (directory / "damaged-400-1").is_dir()
    ckpt.close()


def test_all_damaged_raises_one_line_checkpoint_error(tmp_path, capsys):
    directory = _filled(tmp_path, steps=(100, 200))
    _truncate(directory / "200")
    _bad_meta_json(directory / "100")
    ckpt = Checkpointer(directory)
    with pytest.raises(CheckpointError) as info:
        ckpt.restore(_target())
    message = str(info.value)
    assert "\n" not in message and str(directory) in message
    assert "200: " in message and "100: " in message
    assert [s for s, _ in ckpt.skipped] == [200, 100]
    assert capsys.readouterr().err.count("skipped:") == 2
    assert sorted(p.name for p in directory.iterdir()) == ["damaged-100-1", "damaged-200-1"]
    # A later attempt says what happened earlier, still in one line.
    with pytest.raises(CheckpointError, match="damaged-100-1, damaged-200-1") as info:
        Checkpointer(directory).restore(_target())
    assert "\n" not in str(info.value)


def test_explicit_damaged_step_raises_and_is_left_in_place(tmp_path):
    directory = _filled(tmp_path)
    _random_bytes(directory / "200")
    ckpt = Checkpointer(directory)
    with pytest.raises(CheckpointError, match=r"checkpoint 200 .* is damaged: .*sha256"):
        ckpt.restore(_target(), step=200)
    assert (directory / "200").is_dir() and ckpt.skipped == []
    with pytest.raises(CheckpointError, match=r"no checkpoint 250 .*100, 200, 300"):
        ckpt.restore(_target(), step=250)
    assert ckpt.restore(_target(), step=100)[2] == 100
    assert ckpt.verify(200) is not None and ckpt.verify(300) is None


def test_orbax_failure_with_matching_checksums_is_skipped(tmp_path):
    """Files that match their checksums but that orbax cannot read are damaged too."""
    directory = _filled(tmp_path, steps=(100, 200))
    _truncate(directory / "200")
    write_checksums(directory / "200", 200)  # checksums of the damaged files
    ckpt = Checkpointer(directory)
    assert ckpt.verify(200) is None
    assert ckpt.restore(_target())[2] == 100
    assert "orbax cannot read" in ckpt.skipped[0][1]
    assert (directory / "damaged-200-1").is_dir()


def test_target_mismatch_is_a_value_error_not_damage(tmp_path):
    directory = _filled(tmp_path, steps=(100, 200))
    ckpt = Checkpointer(directory)
    wrong_keys = {**_target(), "extra": np.zeros(2, np.uint32)}
    with pytest.raises(ValueError, match="does not match the restore target: not saved: extra"):
        ckpt.restore(wrong_keys)
    wrong_shape = {**_target(), "w": np.zeros((4, 4), np.float32)}
    with pytest.raises(ValueError, match=r"w has shape \(16, 32\), target \(4, 4\)"):
        ckpt.restore(wrong_shape)
    assert ckpt.skipped == [] and ckpt.steps() == [100, 200]
    assert not list(directory.glob("damaged-*"))


def _save_legacy(directory: Path, steps, tree_fn=_tree):
    """Checkpoints as the previous Checkpointer wrote them: orbax's manager, no checksums."""
    manager = ocp.CheckpointManager(
        directory,
        options=ocp.CheckpointManagerOptions(
            max_to_keep=3, create=True, enable_async_checkpointing=False
        ),
    )
    for step in steps:
        manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(tree_fn(step)),
                meta=ocp.args.JsonSave({"counters": {"env_steps": step}}),
            ),
            force=True,
        )
    manager.wait_until_finished()
    manager.close()


def test_legacy_checkpoint_without_checksums_still_restores_and_resumes(tmp_path):
    directory = tmp_path / "ckpt"
    _save_legacy(directory, (100, 200))
    assert not (directory / "200" / CHECKSUMS).exists()
    ckpt = Checkpointer(directory, keep=2)
    assert ckpt.verify(200) is None and ckpt.latest_step() == 200
    state, meta, step = ckpt.restore(_target())
    assert step == 200 and meta["counters"]["env_steps"] == 200 and ckpt.skipped == []
    np.testing.assert_array_equal(state["b"], _tree(200)["b"])
    # The run goes on in the same folder: new checkpoints get checksums, rotation counts all.
    ckpt.save(300, _tree(300), {"counters": {"env_steps": 300}})
    assert ckpt.steps() == [200, 300] and (directory / "300" / CHECKSUMS).exists()
    ckpt.close()


def test_unreadable_legacy_checkpoint_is_skipped_like_damage(tmp_path):
    directory = tmp_path / "ckpt"
    _save_legacy(directory, (100, 200))
    _truncate(directory / "200")
    ckpt = Checkpointer(directory)
    assert ckpt.restore(_target())[2] == 100
    assert "orbax cannot read" in ckpt.skipped[0][1]
    assert (directory / "damaged-200-1").is_dir()


def test_checksums_manifest_lists_every_file(tmp_path):
    directory = _filled(tmp_path, steps=(100,))
    folder = directory / "100"
    manifest = json.loads((folder / CHECKSUMS).read_text())
    assert manifest["step"] == 100
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {
        CHECKSUMS
    }
    assert set(manifest["files"]) == on_disk and any(k.startswith("state/") for k in on_disk)
    for rel, entry in manifest["files"].items():
        data = (folder / rel).read_bytes()
        assert entry == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    marker = json.loads((folder / "_CHECKPOINT_METADATA").read_text())["custom_metadata"]
    assert marker == {"checksums": CHECKSUMS}
    assert not (directory / ".staging").exists()  # removed after each commit


@pytest.mark.parametrize("keep", [0, -1, 1.5, None])
def test_keep_below_one_is_rejected(tmp_path, keep):
    with pytest.raises(ValueError, match=r"--keep-checkpoints must be an integer >= 1") as info:
        Checkpointer(tmp_path / "ckpt", keep=keep)
    assert repr(keep) in str(info.value)


def test_keep_one_keeps_only_the_newest(tmp_path):
    directory = _filled(tmp_path, steps=(100, 200, 300), keep=1)
    assert sorted(p.name for p in directory.iterdir()) == ["300"]


def test_saving_an_existing_step_is_refused(tmp_path):
    directory = _filled(tmp_path, steps=(100,))
    ckpt = Checkpointer(directory)
    with pytest.raises(ValueError, match="checkpoint 100 already exists"):
        ckpt.save(100, _tree(1), {})


def test_leftover_staging_is_ignored_and_cleaned(tmp_path):
    directory = _filled(tmp_path, steps=(100,))
    partial = directory / ".staging" / "200"
    partial.mkdir(parents=True)
    (partial / "garbage").write_text("half")
    ckpt = Checkpointer(directory)
    assert ckpt.steps() == [100] and ckpt.restore(_target())[2] == 100
    ckpt.save(200, _tree(200), {})
    assert sorted(p.name for p in directory.iterdir()) == ["100", "200"]


def test_rotation_moves_the_old_checkpoint_out_before_removing_it(tmp_path, monkeypatch):
    """A kill inside the rotation's removal (simulated: the removal fails half way) leaves
    the old checkpoint outside the listing, never a half-deleted `<step>/` in it."""
    import engine.checkpoint as checkpoint_module

    directory = _filled(tmp_path, steps=(100, 200))
    ckpt = Checkpointer(directory, keep=2)
    real_rmtree = checkpoint_module.shutil.rmtree
    removed = []

    def half_rmtree(path, ignore_errors=False):
        path = Path(path)
        if (path / "rotated").exists():  # remove one file of the rotated step, then "die"
            victim = next(p for p in (path / "rotated").rglob("*") if p.is_file())
            victim.unlink()
            removed.append(victim)
            return
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(checkpoint_module.shutil, "rmtree", half_rmtree)
    ckpt.save(300, _tree(300), {})
    assert removed and ckpt.steps() == [200, 300]
    assert all(ckpt.verify(s) is None for s in ckpt.steps())
    monkeypatch.setattr(checkpoint_module.shutil, "rmtree", real_rmtree)
    ckpt.save(400, _tree(400), {})  # the next save clears the leftovers
    assert sorted(p.name for p in directory.iterdir()) == ["300", "400"]


def _foreign_tree(root: Path, names) -> dict:
    """Integer-named folders of someone else's files under `root`; returns {path: bytes}."""
    files = {}
    for name in names:
        (root / name).mkdir(parents=True)
        for leaf in ("photo.jpg", "notes.txt"):
            files[root / name / leaf] = f"{name}/{leaf}".encode()
            (root / name / leaf).write_bytes(files[root / name / leaf])
    return files


def test_checkpoint_folder_linked_elsewhere_is_refused_and_nothing_there_deleted(tmp_path):
    outside = tmp_path / "photos"
    files = _foreign_tree(outside, ["1", "2", "2019"])
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(outside, run / "checkpoints")
    with pytest.raises(UnsafePathError) as info:
        Checkpointer(run / "checkpoints", keep=1)
    message = str(info.value)
    assert "\n" not in message and str(run / "checkpoints") in message
    assert "symbolic link" in message and "for safety" in message
    assert all(path.read_bytes() == data for path, data in files.items())
    assert sorted(p.name for p in outside.iterdir()) == ["1", "2", "2019"]


def test_staging_folder_linked_elsewhere_is_refused(tmp_path):
    directory = _filled(tmp_path, steps=(100,))
    outside = tmp_path / "elsewhere"
    files = _foreign_tree(outside, ["5"])
    os.symlink(outside, directory / ".staging")
    with pytest.raises(UnsafePathError, match=r"\.staging: it is a symbolic link"):
        Checkpointer(directory)
    assert all(path.read_bytes() == data for path, data in files.items())


def test_only_own_checkpoints_are_listed_restored_and_rotated(tmp_path):
    """An integer-named folder without the checkpointer's marks, and an integer-named link,
    are never listed, restored, set aside or rotated away, even when older or newer than
    every checkpoint; nothing a link points to is touched."""
    directory = tmp_path / "ckpt"
    foreign = _foreign_tree(directory, ["1", "99999"])  # older and newer than the saves
    outside = tmp_path / "elsewhere"
    linked = _foreign_tree(outside, ["7"])
    os.symlink(outside / "7", directory / "2")
    os.symlink(outside / "7", directory / "88888")
    ckpt = Checkpointer(directory, keep=1)
    assert ckpt.steps() == [] and ckpt.latest_step() is None
    for step in (100, 200, 300):
        ckpt.save(step, _tree(step), {"counters": {"env_steps": step}})
    assert ckpt.steps() == [300]  # 100 and 200 rotated; the others are not checkpoints
    assert sorted(p.name for p in directory.iterdir()) == ["1", "2", "300", "88888", "99999"]
    assert all(path.read_bytes() == data for path, data in {**foreign, **linked}.items())
    assert (directory / "2").is_symlink() and (directory / "88888").is_symlink()
    again = Checkpointer(directory)
    _, meta, step = again.restore(_target())  # the newest own one, nothing skipped or moved
    assert step == 300 and meta == {"counters": {"env_steps": 300}} and again.skipped == []
    assert not list(directory.glob("damaged-*"))
    again.close()
    with pytest.raises(ValueError, match=r"99999 exists and is not a checkpoint of this run"):
        ckpt.save(99999, _tree(1), {})
    ckpt.close()


def test_legacy_checkpoints_are_still_the_runs_own_and_rotate(tmp_path):
    """Checkpoints of the older checkpointer (no checksums, no marker) count as the run's
    own by orbax's state/ and meta/ items: a resumed legacy run rotates them as before."""
    directory = tmp_path / "ckpt"
    _save_legacy(directory, (100, 200))
    _foreign_tree(directory, ["150"])  # no items: not a checkpoint
    ckpt = Checkpointer(directory, keep=2)
    assert ckpt.steps() == [100, 200]
    ckpt.save(300, _tree(300), {"counters": {"env_steps": 300}})
    ckpt.save(400, _tree(400), {"counters": {"env_steps": 400}})
    assert ckpt.steps() == [300, 400]
    assert sorted(p.name for p in directory.iterdir()) == ["150", "300", "400"]
    ckpt.close()


def test_folders_named_state_and_meta_without_orbax_files_are_not_a_legacy_checkpoint(tmp_path):
    """Someone's integer-named folder that happens to hold state/ and meta/ folders (but not
    orbax's metadata files in them) is not rotated away."""
    directory = tmp_path / "ckpt"
    files = _foreign_tree(directory, ["8"])
    (directory / "8" / "state").mkdir()
    (directory / "8" / "meta").mkdir()
    files[directory / "8" / "state" / "photo.jpg"] = b"photo"
    (directory / "8" / "state" / "photo.jpg").write_bytes(b"photo")
    ckpt = Checkpointer(directory, keep=1)
    assert ckpt.steps() == []
    for step in (100, 200):
        ckpt.save(step, _tree(step), {"counters": {"env_steps": step}})
    assert ckpt.steps() == [200]
    assert sorted(p.name for p in directory.iterdir()) == ["200", "8"]
    assert all(path.read_bytes() == data for path, data in files.items())
    ckpt.close()


@pytest.mark.parametrize("kind", ["link"])  # a FIFO: orbax's own reads may block on it
def test_a_checksummed_file_that_is_not_a_regular_file_is_damage_and_never_read(tmp_path, kind):
    """A file of the checkpoint replaced by a link (to /dev/zero: reading it never ends) with
    checksums.json edited to match its size: the checkpoint is damaged, skipped and set
    aside, never read through."""
    directory = _filled(tmp_path, steps=(100, 200))
    victim = _data_files(directory / "200")[0]
    rel = victim.relative_to(directory / "200").as_posix()
    victim.unlink()
    if kind == "link":
        os.symlink("/dev/zero", victim)
    else:
        os.mkfifo(victim)
    manifest = json.loads((directory / "200" / CHECKSUMS).read_text())
    manifest["files"][rel]["size"] = 0
    (directory / "200" / CHECKSUMS).write_text(json.dumps(manifest))
    ckpt = Checkpointer(directory)
    assert "is not a regular file" in ckpt.verify(200)
    _, _, step = ckpt.restore(_target())
    assert step == 100 and [s for s, _ in ckpt.skipped] == [200]
    ckpt.close()


def test_full_disk_during_a_save_is_one_write_error_and_nothing_else_printed(
    tmp_path, capfd, caplog, monkeypatch
):
    """What orbax does when tensorstore hits a full disk, simulated: its writer thread fails
    (excepthook), logs the failure (absl), and the save re-raises tensorstore's status text.
    (tests/engine/test_runfolder.py runs the real thing on a small tmpfs, where it can.)"""
    directory = _filled(tmp_path, steps=(100,))
    ckpt = Checkpointer(directory)
    full = ValueError(
        'RESOURCE_EXHAUSTED: Error writing "w/0" in OCDBT database: Failed to write 12295 '
        "bytes to file 13: No space left on device [os_error_code='28']"
    )

    def failing_save(path, args, custom_metadata):
        def write():
            raise full

        thread = threading.Thread(target=write)
        thread.start()
        thread.join()
        logging.getLogger("absl").error("_SignalingThread.run() raised an exception: %s", full)
        raise full

    monkeypatch.setattr(ckpt._writer, "save", failing_save)
    with pytest.raises(WriteError) as info:
        ckpt.save(200, _tree(200), {})
    where = directory / "200"
    assert str(info.value) == f"cannot write {where} (checkpoint 200): No space left on device"
    assert capfd.readouterr().err == "" and not caplog.records
    assert ckpt.steps() == [100]
    ckpt.close()


_WRITER = """
import sys
import numpy as np
from engine.checkpoint import Checkpointer

ckpt = Checkpointer(sys.argv[1], keep=2)
step = 0
while True:
    step += 1
    ckpt.save(step, {"w": np.full((512, 1024), step, np.float32)}, {"step": step})
    print(step, flush=True)
"""


@pytest.mark.parametrize("extra_delay", [0.0, 0.13])
def test_kill_9_during_saves_leaves_only_verifiable_checkpoints(tmp_path, extra_delay):
    directory = tmp_path / "ckpt"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(directory)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "1"
        assert proc.stdout.readline().strip() == "2"
        time.sleep(extra_delay)  # somewhere inside the next save
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    ckpt = Checkpointer(directory, keep=2)
    steps = ckpt.steps()
    assert steps and all(ckpt.verify(s) is None for s in steps)
    state, meta, step = ckpt.restore({"w": np.zeros((512, 1024), np.float32)})
    assert step == steps[-1] and meta == {"step": step} and float(state["w"][0, 0]) == step
    assert ckpt.skipped == []
    ckpt.save(step + 1, {"w": np.zeros((512, 1024), np.float32)}, {"step": step + 1})
    assert not (directory / ".staging").exists()
