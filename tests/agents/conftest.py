"""Fixtures of the agent tests."""

import jax
import pytest


@pytest.fixture
def learnt_batches(monkeypatch):
    """`record(agent) -> list`: from then on, every batch the agent's learner updates on is
    appended to the list, as arrays, also from inside a jitted update (through
    `jax.debug.callback`: run the updates jitted, not op by op, which compiles each op of an
    update on its own). The learner's `update` is wrapped with `monkeypatch`, so it is
    restored after the test (equal agents share their parts, learner included)."""

    def record(agent):
        batches, update = [], agent.modules.learner.update

        def recording(state, batch, *args):
            jax.debug.callback(batches.append, batch)
            return update(state, batch, *args)

        monkeypatch.setattr(agent.modules.learner, "update", recording)
        return batches

    return record
