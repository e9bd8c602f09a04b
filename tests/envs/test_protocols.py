"""The Atari 100k protocol (envs/protocols.py) as our envs build it: every row of the
protocol's table checked on the envpool env the runner makes under `--protocol atari100k`."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from envs import make_env, make_eval_env
from envs.protocols import ATARI_100K_GAMES, check_protocol_env, protocol_env_kwargs

REFERENCE = Path(__file__).resolve().parents[2] / "experiments" / "references" / "atari100k.csv"


def test_the_26_games_are_the_published_tables():
    rows = [r for r in open(REFERENCE) if not r.startswith("#")]
    games = [row["game"] for row in csv.DictReader(rows)]
    assert tuple(games) == ATARI_100K_GAMES and len(games) == 26


def test_the_protocols_envs_follow_dopamines_atari_100k_settings():
    """Kaiser et al. 2019 as Dopamine's labs/atari_100k runs it: frame skip 4 (max-pooled by
    envpool), 84x84 grey, 4 stacked frames, up to 30 no-op starts, no sticky actions, episodes
    capped at 27,000 agent steps, no FIRE pressed at resets; a life loss ends a training
    episode and training rewards are clipped; the evaluation env sums raw rewards."""
    kwargs = protocol_env_kwargs("atari100k")
    train = make_env("Breakout-v5", 2, 0, train=True, **kwargs)
    test = make_eval_env("Breakout-v5", 2, 0, **kwargs)
    try:
        for env in (train, test):
            config = env._pool.config
            assert (config["frame_skip"], config["img_height"], config["img_width"]) == (4, 84, 84)
            assert config["gray_scale"] and config["stack_num"] == 4
            assert config["noop_max"] == 30 and config["repeat_action_probability"] == 0.0
            assert config["max_episode_steps"] == 27_000
            assert config["use_fire_reset"] is False  # envpool's default presses FIRE
            assert env.spec.obs_shape == (4, 84, 84) and env.spec.max_episode_steps == 27_000
        assert train.spec.episodic_life and train.spec.reward_clip
        assert not test.spec.reward_clip  # whole-game returns of raw rewards (game_over)
    finally:
        train.close()
        test.close()
    default = make_env("Breakout-v5", 1, 0)
    assert default._pool.config["use_fire_reset"] is True  # what the protocol changes
    default.close()


def test_fire_reset_is_an_atari_option_only():
    with pytest.raises(ValueError, match="fire_reset applies to Atari envs only"):
        make_env("CartPole-v1", 1, 0, fire_reset=False)


@pytest.mark.parametrize("env_id", ["Alien-v5", "UpNDown-v5", "Pong-v5"])
def test_every_game_of_the_protocol_is_accepted(env_id):
    check_protocol_env("atari100k", env_id)
    check_protocol_env("none", "CartPole-v1")


def test_the_der_preset_runs_the_protocol():
    from engine.args import parse

    args = parse(["--agent", "dqn", "--preset", "der", "--env", "Alien-v5"])
    run, cfg = args.run, args.config
    assert (run.protocol, run.total_steps, run.eval_episodes) == ("atari100k", 100_000, 100)
    assert (cfg.cnn, cfg.head_hidden, cfg.noisy_std, cfg.n_step) == ("data-efficient", 256, 0.1, 20)
    # one update of 32 transitions per env step
    assert cfg.batch_size * cfg.trace_len == 32 and cfg.replay_ratio / 32 == 1.0
    # a run of another agent under the protocol gets its budget and evaluation count too
    acer = parse(["--agent", "acer", "--protocol", "atari100k", "--env", "Pong-v5"]).run
    assert (acer.total_steps, acer.eval_episodes) == (100_000, 100)


def test_the_der_agent_runs_many_iterations_per_device_program_on_cpu():
    """DER's torso has no convolution that XLA:CPU runs slowly in a rolled loop (its stride-5
    convolutions are TiledConv's reshapes and matmuls), so its iterations run as chunks on the
    device, where the Nature CNN's are driven one by one from the host."""
    from engine.common import make_agent

    der = make_agent("dqn", "Pong-v5", preset="der", buffer_size=2_000)
    nature = make_agent("dqn", "Pong-v5", preset="der", buffer_size=2_000, cnn="nature")
    try:
        assert der.host_driven is None and der.max_chunk > 1
        assert "convolution" in nature.host_driven
    finally:
        der.env.close()
        nature.env.close()
