"""Atomic checkpoints with orbax.

Orbax writes each checkpoint into a temporary folder and renames it into place only once
every file is complete, so a run killed at any moment (even `kill -9`) leaves either a whole
checkpoint or none; half-written temporaries are ignored by `latest_step`. Arrays are stored
as tensorstore/OCDBT data and metadata as JSON: loading never unpickles objects.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

logging.getLogger("absl").setLevel(logging.ERROR)


class Checkpointer:
    def __init__(self, directory: str | Path, keep: int = 3):
        self.directory = Path(directory).absolute()
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep, create=True, enable_async_checkpointing=False
            ),
        )

    def save(self, step: int, state: Any, meta: dict) -> Path:
        """Save a pytree of arrays plus a JSON-able dict under `step` (an env-step count)."""
        self._manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)
            ),
            force=True,
        )
        self._manager.wait_until_finished()
        return self.directory / str(step)

    def latest_step(self) -> int | None:
        self._manager.reload()
        return self._manager.latest_step()

    def restore(self, target: Any, step: int | None = None) -> tuple[Any, dict, int]:
        """Restore into the structure of `target` (arrays or ShapeDtypeStructs)."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no complete checkpoint in {self.directory}")
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
        out = self._manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()
            ),
        )
        return out["state"], dict(out["meta"]), step

    def close(self):
        self._manager.close()
