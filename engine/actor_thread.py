"""Acting decoupled from learning (the Reactor's §3.5, Gruslys et al. 2018): a thread steps
the env with a snapshot of the policy, T steps at a time, and hands each rollout (with the
behaviour μ and the recurrent states at its start, which the rollout records) to the learner
through a queue of one. The learner publishes a fresh snapshot after the updates of an
iteration, which the thread picks up for its next rollout. Acting and learning overlap; the
acting policy is at most two rollouts stale, and an off-policy correction (Retrace, β-LOO)
accounts for that through the stored μ. Whichever side is faster waits on the queue.

The parts driver (engine/driver.py) runs one for an agent whose `AgentParts.decoupled`
says why; the rest of the iteration (storing the rollout, the owed updates) is the host-driven
path's, unchanged.
"""

from __future__ import annotations

import queue
import threading
import time

import jax

from engine.programs import copy_tree


class ActorThread:
    """Rollouts of `rollout` (a `RolloutProgram`) in a daemon thread, from `params` and the
    actor state `actor`; `get()` returns the next one, `publish(params)` replaces the acting
    params, `close()` stops the thread (idempotent). An error in the thread is raised by the
    next `get()`."""

    def __init__(self, rollout, params, actor):
        self._rollout = rollout
        self._params = copy_tree(params)  # the learner's buffers are donated to its updates
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._loop, args=(actor,), daemon=True, name="decoupled-actor"
        )
        self._thread.start()

    def _loop(self, actor) -> None:
        try:
            while not self._stop.is_set():
                actor, traj = self._rollout.run(self._params, actor)
                jax.block_until_ready(traj)
                while not self._stop.is_set():
                    try:
                        self._queue.put((actor, traj), timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as err:  # surfaced on the learner's thread by `get`
            self._error = err

    def get(self):
        """`(actor state, rollout, seconds waited)` of the next rollout."""
        t0 = time.perf_counter()
        while True:
            if self._error is not None:
                raise RuntimeError("the actor thread failed") from self._error
            try:
                actor, traj = self._queue.get(timeout=0.1)
                return actor, traj, time.perf_counter() - t0
            except queue.Empty:
                continue

    def publish(self, params) -> None:
        """Act with (a copy of) `params` from the next rollout on."""
        self._params = copy_tree(params)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
