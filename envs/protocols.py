"""Published evaluation protocols, as settings of our envs and runs (`--protocol NAME`).

**Atari 100k** (Kaiser et al. 2019, "Model-Based Reinforcement Learning for Atari",
arXiv:1903.00374, §6 and Table 1; as Dopamine's `labs/atari_100k` runs it, whose gin configs
set each of these): 26 games, 100k agent steps (400k frames) of training, then an evaluation
of 100 episodes (`MaxEpisodeEvalRunner.num_eval_episodes = 100`), reported human-normalised.

What the protocol asks (Dopamine's setting, in brackets) and where it comes from here:

- frame skip 4 with a max over the last 2 frames, 84x84 grey, 4 stacked frames: envpool's
  `-v5` defaults (`frame_skip=4`, `img_height=img_width=84`, `gray_scale`, `stack_num=4`;
  its resize is INTER_AREA, as Dopamine's `cv2.resize`);
- up to 30 no-op starts: envpool's `noop_max=30`;
- no sticky actions (`sticky_actions = False`): envpool's `repeat_action_probability=0`;
- episodes capped at 27,000 agent steps (`max_steps_per_episode = 27000`): envpool's
  `max_episode_steps=27000`, set explicitly;
- a life loss ends the agent's episode in training (`terminal_on_life_loss = True`):
  `make_env(train=True)`'s episodic life;
- rewards clipped to [-1, 1] in training only: `make_env(train=True)`'s clipping; the
  evaluation sums raw rewards;
- no FIRE pressed for the agent after a reset (Dopamine's ALE wrappers press none):
  `fire_reset=False`. **This is where envpool differs**: its default (`use_fire_reset=True`)
  presses FIRE after every reset and life loss; the protocol turns it off;
- 100k agent steps of training: `--total-steps 100000`;
- 100 evaluation episodes (whole games), ε-greedy with ε = 0.001 for value-based agents:
  `--eval-episodes 100`, and each agent's evaluation ε (DQN's `--eval-epsilon 0.001`).

The evaluation counts whole games (`game_over`), and the agent sees a life loss as the end of
its episode there as in training (Dopamine's evaluation runner signals it the same way).
tests/envs/test_protocols.py checks each row against the envs built under the protocol.
"""

from __future__ import annotations

from typing import Any

# The 26 games of Atari 100k (Kaiser et al. 2019, Table 1), as envpool names them (`<Game>-v5`).
ATARI_100K_GAMES = (
    "Alien", "Amidar", "Assault", "Asterix", "BankHeist", "BattleZone", "Boxing", "Breakout",
    "ChopperCommand", "CrazyClimber", "DemonAttack", "Freeway", "Frostbite", "Gopher", "Hero",
    "Jamesbond", "Kangaroo", "Krull", "KungFuMaster", "MsPacman", "Pong", "PrivateEye", "Qbert",
    "RoadRunner", "Seaquest", "UpNDown",
)  # fmt: skip

# `--protocol NAME`: the run options it fixes and the env settings it makes.
PROTOCOLS: dict[str, dict[str, Any]] = {
    "none": {},
    "atari100k": {
        "run": {"total_steps": 100_000, "eval_episodes": 100},
        "env": {"fire_reset": False, "max_episode_steps": 27_000},
    },
}


def protocol_env_kwargs(protocol: str) -> dict[str, Any]:
    """The `make_env` keyword arguments of `protocol` (train and evaluation envs alike)."""
    return dict(PROTOCOLS[protocol].get("env", {}))


def check_protocol_env(protocol: str, env_id: str) -> None:
    """A one-line ValueError unless `env_id` is an env of `protocol` (Atari 100k: one of its
    26 games, `<Game>-v5`)."""
    if protocol != "atari100k":
        return
    game, _, version = env_id.partition("-")
    if version != "v5" or game not in ATARI_100K_GAMES:
        close = [g for g in ATARI_100K_GAMES if g.lower() == game.lower()]
        hint = f" (did you mean {close[0]}-v5?)" if close else ""
        raise ValueError(
            f"--protocol atari100k runs one of its 26 games as <Game>-v5; {env_id!r} is not "
            f"one{hint}: {', '.join(ATARI_100K_GAMES)}"
        )
