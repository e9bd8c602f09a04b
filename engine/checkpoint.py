"""Checkpoints with orbax: atomic, checksummed, and set aside (never deleted) when damaged.

Layout of a checkpoint folder (`<run_dir>/checkpoints/`):

    <step>/                  one checkpoint as orbax writes it: state/ (the arrays, as
      state/ meta/ ...       tensorstore/OCDBT data: loading never unpickles), meta/ (JSON),
      checksums.json         plus the sha256 and size of every other file in <step>/
    .staging/                only while a save runs (or after a kill during one)
    damaged-<step>-<n>/      a checkpoint that failed to verify or restore, set aside

Saving: orbax writes the checkpoint into `.staging/<step>` (itself through a temporary
folder and a rename); its files are hashed and fsynced; `checksums.json` is written inside
it (temporary file, fsync, rename); only then is the finished folder renamed to `<step>`.
That rename is the commit: a kill at any moment leaves either a complete, verifiable
`<step>/` or leftovers in `.staging/`, which are never listed and are removed by the next
save. Rotation (keeping the newest `keep`) renames an old `<step>/` into `.staging/rotated/`
before removing it, so a kill during the removal never leaves a half-deleted checkpoint in
the listing. Readers (an evaluation of a live run) never see a checkpoint whose checksums
are still being written. Orbax's step metadata of each new checkpoint also records
`{"checksums": "checksums.json"}` (inside orbax's own atomic write), so a new checkpoint
whose checksums.json has gone missing is detected as damaged. Files that checksums.json does
not list are ignored.

Restoring (`restore(target)`) tries checkpoints newest first. One is skipped when its files
differ from checksums.json (a file missing, truncated or overwritten, a JSON metadata file
damaged) or when orbax cannot read it. Each skip is printed to stderr and recorded in
`Checkpointer.skipped`, and process 0 renames the folder to `damaged-<step>-<n>/`, keeping
its files for inspection: it is neither retried nor counted by the rotation. A target whose
leaves or shapes differ from the saved ones is the caller's mistake, not damage: it raises
`ValueError` at once and nothing is skipped or moved (this is what lets
`engine.common.restore_checkpoint` retry with the older `actor_key` layout). Other
errors (no permission, device out of memory) propagate and move nothing.

Checkpoints written before checksums existed (no checksums.json, no marker) are legacy:
accepted unverified if orbax restores them; when it cannot, they are skipped and set aside
like damaged ones. A legacy run folder stays resumable, and its next saves get checksums.

Rotation (`keep`) is done here rather than by orbax, after the new checkpoint is committed,
so the newest complete checkpoint is never removed to make room for one that may not finish.

Only this checkpointer's own checkpoints are listed, restored, set aside or rotated: a real
`<step>/` folder (never a symbolic link, never followed) holding the checksums marker in
orbax's step metadata or a checksums.json of this format, or, for a legacy checkpoint (neither
of those), orbax's `state/` and `meta/` items as this checkpointer has always written them
(with their `state/_METADATA` and `meta/metadata` files). Anything else under an integer name
(a link, someone's folder) is left alone. The checkpoint folder itself and its `.staging/`
must not be symbolic links: `Checkpointer` refuses them with one line
(`engine.runfolder.UnsafePathError`) before anything is written or deleted.

A save that the disk refuses (full, over quota, read-only) raises one `WriteError` line naming
the checkpoint; what orbax's writer threads print about it is held back
(`engine.runfolder.held_thread_output`), as is what they print about a damaged
checkpoint whose skip is reported.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from engine.runfolder import (
    WriteError,
    check_folder,
    fsync_dir,
    held_thread_output,
    one_line,
    storage_errno,
    write_json_atomic,
)

logging.getLogger("absl").setLevel(logging.ERROR)

CHECKSUMS = "checksums.json"
STAGING = ".staging"
DAMAGED_PREFIX = "damaged-"
_STEP_METADATA = "_CHECKPOINT_METADATA"  # orbax's per-step metadata file
_FORMAT = "reactor-jax checkpoint checksums v1"
_CHUNK = 1 << 20


class CheckpointError(RuntimeError):
    """No checkpoint could be restored, or an explicitly requested one is damaged."""


class _Damaged(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Checkpointer:
    """Save and restore (state pytree, JSON meta) pairs under integer steps in `directory`.

    `keep`: how many recent checkpoints to keep (at least 1). `skipped` lists
    `(step, reason)` for every checkpoint this object skipped while restoring.
    """

    def __init__(self, directory: str | Path, keep: int = 3):
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ValueError(
                f"--keep-checkpoints must be an integer >= 1 (got {keep!r}); "
                "the newest checkpoint is always kept"
            )
        self.directory = Path(directory).absolute()
        self._check_folders()
        self.keep = keep
        self.skipped: list[tuple[int, str]] = []
        self._lead = jax.process_index() == 0
        self._saves = 0
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=None, create=True, enable_async_checkpointing=False
            ),
        )
        self._writer = ocp.Checkpointer(ocp.CompositeCheckpointHandler())

    # Saving.

    def _check_folders(self):
        """The checkpoint folder and its .staging/ are real folders: rotation and the
        staging cleanup delete in them, so a link would have them delete elsewhere."""
        check_folder(self.directory, self.directory.parent, link_ok=False)
        check_folder(self.directory / STAGING, self.directory, link_ok=False)

    def save(self, step: int, state: Any, meta: dict, exact: Any = None) -> Path:
        """Save a pytree of arrays plus a JSON-able dict under `step` (an env-step count);
        returns the committed folder. `exact`: a second pytree of arrays (--exact-resume: the
        replay and the actor's env states and key), saved as an item of its own, `exact/`,
        so that a reader of `state` alone (evaluation) never needs its structure. Every
        process of a multi-process run must call it; process 0 writes the checksums,
        commits and rotates. A full disk (or quota, or a read-only one) is one `WriteError`
        line."""
        step = int(step)
        final = self.directory / str(step)
        self._check_folders()
        if step in self.steps():
            raise ValueError(f"checkpoint {step} already exists in {self.directory}")
        if os.path.lexists(final):
            raise ValueError(
                f"cannot save checkpoint {step}: {final} exists and is not a checkpoint of "
                "this run (left alone); move it away"
            )
        staging = self.directory / STAGING
        self._saves += 1
        try:
            self._stage_and_commit(step, state, meta, exact, staging, final)
        except Exception as err:
            code = storage_errno(err)
            if code is None:
                raise
            what = f"{final} (checkpoint {step})"
            raise WriteError(code, os.strerror(code), what) from None
        self._barrier(f"commit_{step}")
        self._manager.reload()
        if self._lead:  # rotate: an atomic rename out of the listing, then the removal
            doomed = staging / "rotated"
            for old in self.steps()[: -self.keep]:  # this checkpointer's own only
                doomed.mkdir(parents=True, exist_ok=True)
                os.rename(self.directory / str(old), doomed / str(old))
            fsync_dir(self.directory)
            shutil.rmtree(staging, ignore_errors=True)
        self._barrier(f"rotate_{step}")
        self._manager.reload()
        return final

    def _stage_and_commit(self, step, state, meta, exact, staging: Path, final: Path):
        if self._lead:  # leftovers of a save that was killed
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
        self._barrier(f"stage_{step}")
        staged = staging / str(step)
        items = dict(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        if exact is not None:
            items["exact"] = ocp.args.StandardSave(exact)
        with held_thread_output():
            self._writer.save(
                staged, args=ocp.args.Composite(**items), custom_metadata={"checksums": CHECKSUMS}
            )
        if self._lead:
            write_checksums(staged, step)
            os.rename(staged, final)
            fsync_dir(self.directory)
            shutil.rmtree(staging, ignore_errors=True)

    def _barrier(self, name: str):
        ocp.multihost.sync_global_processes(f"reactor_checkpoint_{name}_{self._saves}")

    # Verifying.

    def steps(self) -> list[int]:
        """The steps of this checkpointer's own checkpoints present (verified or not; see
        the module docstring for what is its own), oldest first."""
        self._manager.reload()
        own = (s for s in self._manager.all_steps() if _kind(self.directory / str(s)))
        return sorted(own)

    def verify(self, step: int) -> str | None:
        """None if checkpoint `step` matches its checksums (or is a legacy checkpoint written
        before checksums, accepted unverified); otherwise why it is damaged. Reads every file."""
        try:
            _verify(self.directory / str(step), step)
        except _Damaged as err:
            return err.reason
        return None

    def latest_step(self) -> int | None:
        """The newest step that verifies (legacy checkpoints count), or None. Moves nothing."""
        for step in reversed(self.steps()):
            if self.verify(step) is None:
                return step
        return None

    # Restoring.

    def restore(
        self, target: Any, step: int | None = None, exact: Any = None
    ) -> tuple[Any, dict, int]:
        """Restore into the structure of `target` (arrays or ShapeDtypeStructs); returns
        (state, meta, step). With `exact` (a second target): also the `exact` item saved
        beside the state, returned as (state, exact) in place of state; a checkpoint saved
        without one is the caller's mistake (ValueError, as a structure mismatch).

        Without `step`: the newest checkpoint that verifies and restores; each damaged one
        on the way is skipped, reported and set aside (see the module docstring). With
        `step`: that checkpoint, or `CheckpointError` if it is missing or damaged (it is
        left in place). `CheckpointError` (one line) when none restores; `ValueError` when
        `target` does not match the saved structure."""
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
        if exact is not None:
            exact = jax.tree.map(ocp.utils.to_shape_dtype_struct, exact)
        if step is not None:
            step = int(step)
            if step not in self.steps():
                have = ", ".join(map(str, self.steps())) or "none"
                raise CheckpointError(
                    f"no checkpoint {step} in {self.directory} (checkpoints: {have})"
                )
            try:
                return self._restore_one(step, abstract, exact)
            except _Damaged as err:
                raise CheckpointError(
                    f"checkpoint {step} in {self.directory} is damaged: {err.reason}"
                ) from None
        failed = []
        for candidate in reversed(self.steps()):
            try:
                return self._restore_one(candidate, abstract, exact)
            except _Damaged as err:
                reason = err.reason + self._set_aside(candidate)
            self.skipped.append((candidate, reason))
            failed.append(f"{candidate}: {reason}")
            print(f"checkpoint {candidate} skipped: {reason}", file=sys.stderr, flush=True)
        if failed:
            raise CheckpointError(
                f"no checkpoint in {self.directory} could be restored ({'; '.join(failed)})"
            )
        aside = sorted(p.name for p in self.directory.glob(f"{DAMAGED_PREFIX}*"))
        earlier = f" (set aside earlier as damaged: {', '.join(aside)})" if aside else ""
        raise CheckpointError(f"no complete checkpoint in {self.directory}{earlier}")

    def _restore_one(self, step: int, abstract: Any, exact: Any) -> tuple[Any, dict, int]:
        folder = self.directory / str(step)
        _verify(folder, step)
        items = {"state": abstract, **({"exact": exact} if exact is not None else {})}
        for item, wanted in items.items():
            if item == "exact" and not (folder / item).is_dir():
                raise ValueError(
                    f"checkpoint {step} in {self.directory} holds no replay or env states "
                    "(saved without --exact-resume)"
                )
            saved = _saved_tree(folder, item)
            items[item] = wanted = _fit_empty(wanted, saved)
            mismatch = _structure_mismatch(saved, wanted)
            if mismatch:
                raise ValueError(
                    f"checkpoint {step} in {self.directory} does not match the restore "
                    f"target: {'' if item == 'state' else 'exact: '}{mismatch}"
                )
        args = {k: ocp.args.StandardRestore(v) for k, v in items.items()}
        try:
            with held_thread_output():  # a failure is reported once, as a skip or an error
                out = self._manager.restore(
                    step, args=ocp.args.Composite(**args, meta=ocp.args.JsonRestore())
                )
        except PermissionError:
            raise
        except ValueError as err:
            if "structures do not match" in str(err):  # orbax's own, finer structure check
                raise
            raise _Damaged(f"orbax cannot read it: {one_line(err, 200)}") from err
        except (OSError, KeyError, EOFError) as err:
            raise _Damaged(f"orbax cannot read it: {one_line(err, 200)}") from err
        meta = out["meta"]
        if not isinstance(meta, dict):
            raise _Damaged(f"meta holds a {type(meta).__name__}, expected a JSON object")
        restored = out["state"] if exact is None else (out["state"], out["exact"])
        return restored, dict(meta), step

    def _set_aside(self, step: int) -> str:
        """Rename a damaged checkpoint to damaged-<step>-<n>/; returns a note for the report.
        Only process 0 renames; the others just skip it."""
        if not self._lead:
            return ""
        n = 1
        while (self.directory / f"{DAMAGED_PREFIX}{step}-{n}").exists():
            n += 1
        aside = self.directory / f"{DAMAGED_PREFIX}{step}-{n}"
        try:
            os.rename(self.directory / str(step), aside)
        except OSError as err:
            return f"; left in place, could not set it aside: {err.strerror or err}"
        fsync_dir(self.directory)
        self._manager.reload()
        return f"; set aside as {aside}"

    def close(self):
        self._manager.close()
        self._writer.close()


def holds_intact_step(ckpt_dir: Path, at_least: int) -> bool:
    """Whether `ckpt_dir` holds a checkpoint of step >= `at_least` that matches its checksums
    (a legacy one without checksums counts), read only: nothing is set aside or written, and
    no link is followed (a linked checkpoints folder holds none here)."""
    if ckpt_dir.is_symlink() or not ckpt_dir.is_dir():
        return False
    steps = sorted((int(p.name) for p in ckpt_dir.iterdir() if p.name.isdigit()), reverse=True)
    for step in (s for s in steps if s >= at_least):
        folder = ckpt_dir / str(step)
        try:
            if _kind(folder):
                _verify(folder, step)
                return True
        except (_Damaged, OSError):
            continue
    return False


def write_checksums(folder: Path, step: int):
    """Hash (and fsync) every file under `folder`, then write `folder/checksums.json`
    atomically."""
    files = {}
    for path in sorted(_files(folder)):
        rel = path.relative_to(folder).as_posix()
        if rel == CHECKSUMS:
            continue
        digest, size = _sha256(path, sync=True)
        files[rel] = {"sha256": digest, "size": size}
    for sub in sorted({p.parent for p in _files(folder)} | {folder}):
        fsync_dir(sub)
    write_json_atomic(folder / CHECKSUMS, {"format": _FORMAT, "step": step, "files": files})


def _verify(folder: Path, step: int):
    """Raise `_Damaged` if `folder` does not match its checksums.json (or, lacking one, is
    marked as a checkpoint that should have one)."""
    manifest_path = folder / CHECKSUMS
    if not manifest_path.exists():
        if _has_checksums_marker(folder):
            raise _Damaged(f"{CHECKSUMS} is missing")
        return  # legacy: accepted unverified, orbax will tell
    if manifest_path.is_symlink() or not manifest_path.is_file():
        raise _Damaged(f"{CHECKSUMS} is not a regular file")
    try:
        manifest = json.loads(manifest_path.read_text())
        files = manifest["files"]
        if manifest.get("step") != step:
            raise ValueError(f"it describes step {manifest.get('step')}")
        for entry in files.values():
            if not isinstance(entry["size"], int) or not isinstance(entry["sha256"], str):
                raise ValueError("an entry lacks an integer size or a sha256 string")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise _Damaged(f"{CHECKSUMS} is unreadable: {one_line(err, 200)}") from None
    for rel, entry in sorted(files.items()):
        path = folder / rel
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise _Damaged(f"{CHECKSUMS} names a path outside the checkpoint: {rel}")
        try:
            info = path.lstat()
        except FileNotFoundError:
            raise _Damaged(f"{rel} is missing") from None
        except ValueError as err:  # a NUL in the name
            raise _Damaged(f"{CHECKSUMS} names an impossible path: {rel!r} ({err})") from None
        if not stat.S_ISREG(info.st_mode):  # a link (never followed), a FIFO, a device
            raise _Damaged(f"{rel} is not a regular file")
        size = info.st_size
        if size != entry["size"]:
            raise _Damaged(f"{rel} has {size} bytes, expected {entry['size']}")
        try:
            digest, _ = _sha256(path)
        except PermissionError:
            raise
        except OSError as err:
            raise _Damaged(f"{rel} cannot be read: {err.strerror or err}") from None
        if digest != entry["sha256"]:
            raise _Damaged(f"{rel} does not match its sha256 (contents changed)")


def _kind(folder: Path) -> str | None:
    """Whether `folder` is a checkpoint this checkpointer wrote (see the module docstring):
    "checksummed", "legacy", or None. Links are never followed: a link is not one."""
    if folder.is_symlink() or not folder.is_dir():
        return None
    if _has_checksums_marker(folder) or _has_own_manifest(folder):
        return "checksummed"
    # orbax's items as the earlier checkpointer wrote them, with their metadata files: two
    # empty folders named state/ and meta/ (someone's data) are not a checkpoint
    items = [folder / "state", folder / "meta"]
    files = [folder / "state" / "_METADATA", folder / "meta" / "metadata"]
    if all(p.is_dir() and not p.is_symlink() for p in items) and all(
        p.is_file() and not p.is_symlink() for p in files
    ):
        return "legacy"
    return None


def _has_own_manifest(folder: Path) -> bool:
    path = folder / CHECKSUMS
    if path.is_symlink() or not path.is_file():  # a FIFO would block the read
        return False
    try:
        return json.loads(path.read_text()).get("format") == _FORMAT
    except (OSError, ValueError, AttributeError, RecursionError):
        return False


def _has_checksums_marker(folder: Path) -> bool:
    """Whether orbax's step metadata says this checkpoint was saved with checksums."""
    path = folder / _STEP_METADATA
    if path.is_symlink() or not path.is_file():  # a FIFO would block the read
        return False
    try:
        custom = json.loads(path.read_text()).get("custom_metadata")
    except (OSError, ValueError, AttributeError, RecursionError):
        return False  # unreadable or absent: treat as legacy, orbax decides
    return isinstance(custom, dict) and custom.get("checksums") == CHECKSUMS


def _saved_tree(folder: Path, item: str = "state") -> Any:
    """The metadata tree of `folder/<item>` (array metadata at its leaves, and the empty
    containers saved as they were). Unreadable metadata is damage."""
    try:
        saved = ocp.StandardCheckpointHandler().metadata(folder / item)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise _Damaged(f"orbax cannot read its metadata: {one_line(err, 200)}") from err
    return getattr(saved, "tree", saved)


def _fit_empty(wanted: Any, saved: Any) -> Any:
    """`wanted` with the entries of its dicts that hold no arrays and were not saved left out,
    and the saved ones that hold none and are not wanted put in, as saved: an empty field
    (e.g. a learner state's `icm`, `()` while its option is off) added to a state after a
    checkpoint was saved, or taken out of it since, changes nothing that is read. The caller
    rebuilds its state with the empty values of its own (engine.common.restore_checkpoint)."""
    if isinstance(wanted, tuple) and hasattr(wanted, "_fields") and isinstance(saved, dict):
        fitted = _fit_empty(wanted._asdict(), saved)  # a NamedTuple is saved as a dict
        return wanted if list(fitted) == list(wanted._fields) else fitted
    if not (isinstance(wanted, dict) and isinstance(saved, dict)):
        return wanted
    out = {
        k: _fit_empty(v, saved[k]) if k in saved else v
        for k, v in wanted.items()
        if k in saved or jax.tree.leaves(v)
    }
    out.update({k: v for k, v in saved.items() if k not in wanted and not jax.tree.leaves(v)})
    return out


def _structure_mismatch(saved: Any, abstract: Any) -> str | None:
    """Why `abstract` cannot be restored from the saved metadata tree `saved` (different
    leaves or shapes), or None."""
    saved = ocp.tree.to_flat_dict(saved)
    wanted = ocp.tree.to_flat_dict(abstract)
    name = "/".join
    missing = sorted(name(k) for k in wanted.keys() - saved.keys())
    extra = sorted(name(k) for k in saved.keys() - wanted.keys())
    problems = []
    if missing:
        problems.append(f"not saved: {', '.join(missing[:5])}")
    if extra:
        problems.append(f"saved but not in the target: {', '.join(extra[:5])}")
    for key in sorted(wanted.keys() & saved.keys()):
        want = tuple(getattr(wanted[key], "shape", ()))
        have = getattr(saved[key], "shape", None)
        if have is not None and tuple(have) != want:
            problems.append(f"{name(key)} has shape {tuple(have)}, target {want}")
            break
    return "; ".join(problems) or None


def _files(folder: Path):
    for root, _, names in os.walk(folder):
        for n in names:
            yield Path(root) / n


def _sha256(path: Path, sync: bool = False) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
        if sync:
            os.fsync(f.fileno())
    return h.hexdigest(), size
