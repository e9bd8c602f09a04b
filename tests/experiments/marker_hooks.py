"""Hooks that leave a trace, for tests/experiments/test_run_folder_hooks.py: each appends its
name to the file named by $HOOK_MARKER when it is called (the class: when it is
instantiated), so a test can see that a hook it expects refused was never called, and that
one it expects used was."""

import os

from tests.agents.ppo_hooks import shaped  # noqa: F401  (defined elsewhere: refused as ours)


def _mark(name: str) -> None:
    with open(os.environ["HOOK_MARKER"], "a") as f:
        f.write(name + "\n")


def identity(obs):
    """A valid preprocess_obs."""
    _mark("identity")
    return obs


def bonus(obs, action, reward, done):
    """A valid reshape_reward."""
    _mark("bonus")
    return reward + 0.5


def two_args(obs, action):
    """Too few parameters for reshape_reward's four arguments."""
    _mark("two_args")
    return obs


def keyword_only(obs, *, scale):
    """A required keyword-only parameter: preprocess_obs(obs) cannot bind it."""
    _mark("keyword_only")
    return obs * scale


class Shaper:
    """A class: calling it would build an instance, not a reward."""

    def __init__(self, obs, action, reward, done):
        _mark("Shaper")
