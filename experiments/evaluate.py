"""Evaluate a trained run: `python -m experiments.evaluate runs/<name> [--episodes N] [--video]`.

Loads the latest complete checkpoint (or `--step`), plays full episodes without life loss or
reward clipping with sampled actions (or the argmax with `--argmax` / `--greedy`), prints the
mean and std of the returns, lists the `--worst N` episodes, and can write a video (mp4 or
gif).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import jax
import numpy as np
import tyro

from agents.core.config import flag
from agents.core.hooks import check_given_again
from agents.core.registry import get_agent
from engine.args import cli
from engine.checkpoint import CheckpointError
from engine.common import (
    env_options,
    load_run,
    restore_learner,
    trained_hooks,
    use_compile_cache,
)
from engine.driver import agent_class
from engine.evaluation import MAX_EPISODES, EvaluationError, eval_feedback, evaluate
from engine.runfolder import (
    UnsafePathError,
    WriteError,
    atomic_path,
    check_file_target,
    check_folder,
    one_line,
    write_json_atomic,
)
from envs import clips_rewards, make_eval_env
from envs.gymnax_env import PREFIX as GYMNAX
from envs.gymnax_render import FrameRenderer, video_refusal
from envs.partial import PARTIAL_OBS

# The hooks an agent acts with (agents.core.hooks), given again to evaluate a run trained
# with them.
ACTING_HOOKS = ("preprocess_obs", "network")


@dataclass(frozen=True)
class EvalArgs:
    """Evaluate the latest checkpoint of a run folder on full, unclipped episodes."""

    run: tyro.conf.Positional[str]
    """The run folder (runs/<name>)."""
    episodes: int = 20
    """Number of full episodes to play."""
    num_envs: int = 0
    """Parallel evaluation envs (0: min(episodes, 16))."""
    step: int | None = None
    """Checkpoint to load (env step); default the latest complete one."""
    greedy: bool = False
    """Play the argmax action (the mean, for continuous actions) instead of sampling from π."""
    argmax: bool = False
    """The same as --greedy (torch-ac's name for it)."""
    worst: int = 0
    """Also list the N episodes with the lowest returns (episode number, return, length)."""
    seed: int = 12345
    """Seed of the evaluation envs and action sampling."""
    video: bool = False
    """Also record one episode to <run>/videos/."""
    video_format: Literal["mp4", "gif"] = "mp4"
    """Container of the video."""
    out: str | None = None
    """Optional JSON file for the results."""
    preprocess_obs: str | None = None
    """PPO, A2C: the `module:function` observation hook to act with; required when the run
    was trained with --preprocess-obs (a run folder's hooks are never imported)."""
    network: str | None = None
    """SAC, TD3, PPO, A2C, DQN: the `module:function` network plug-in to act with; required
    when the run was trained with --network (a run folder's hooks are never imported)."""

    def __post_init__(self):
        def need(ok: bool, name: str, allowed: str):
            if not ok:
                raise ValueError(f"{flag(name)} must be {allowed}, got {getattr(self, name)!r}")

        if not self.run.strip():
            raise ValueError("RUN (the run folder) must be non-empty, got ''")
        need(1 <= self.episodes <= MAX_EPISODES, "episodes", f"in [1, {MAX_EPISODES:,}]")
        need(
            0 <= self.num_envs <= self.episodes, "num_envs",
            "in [0, --episodes] (0: min(--episodes, 16); an env beyond --episodes would play "
            "no episode)",
        )  # fmt: skip
        need(self.step is None or self.step >= 0, "step", ">= 0")
        need(0 <= self.worst <= self.episodes, "worst", "in [0, --episodes] (0: no list)")
        need(0 <= self.seed < 2**30, "seed", "in [0, 2**30)")
        if self.out is not None:
            need(self.out.strip() != "", "out", "a file name")
            parent = Path(self.out).parent
            need(parent.is_dir(), "out", f"a file in an existing folder ({parent} is not one)")
            need(not Path(self.out).is_dir(), "out", "a file, not a folder")
        if self.video_format != "mp4" and not self.video:  # it would do nothing
            raise ValueError("--video-format needs --video")
        for name in ACTING_HOOKS:
            value = getattr(self, name)
            need(value is None or value.strip() != "", name, "module:function")


def _acting_hooks(config, trained: dict[str, str], args: EvalArgs, run_dir: Path):
    """(`config` with the hooks acting needs, from the command line only; notes for stderr):
    `trained` names the run's hooks (config.json, never imported). Acting applies
    --preprocess-obs (the network was trained on its output) and --network (it is the
    network), so a run trained with one needs it given again; the others (--reshape-reward)
    only shape training and are reported, not used. The notes are the caller's to print
    once the evaluation is set up, so that a refusal stays one line."""
    notes = [
        f"note: {run_dir} was trained with {flag(name)} {value!r}; acting does not use it "
        "(--resume needs it given again: a run folder's hooks are never imported)"
        for name, value in trained.items()
        if name not in ACTING_HOOKS
    ]
    for name in ACTING_HOOKS:
        given = getattr(args, name)
        check_given_again(name, trained.get(name), given, str(run_dir))
        if given is not None:
            config = dataclasses.replace(config, **{name: given})
    return config, notes


def _record_video(
    acting, eval_env, act, params, feedback, args: EvalArgs, run_dir: Path, env_kwargs: dict
) -> Path:
    """One episode. Atari: the 84×84 frames the agent sees. gymnax: frames drawn from the
    observations (envs/gymnax_render.py). Others: gymnasium's rgb render, the observations
    converted as `eval_env` converts them."""
    import imageio.v2 as imageio

    spec = eval_env.spec
    env_id, frames = spec.env_id, []
    if spec.is_atari or env_id.startswith(GYMNAX):
        env = make_eval_env(env_id, 1, args.seed, **env_kwargs)
        if spec.is_atari:
            draw = lambda obs: np.repeat(np.repeat(obs[-1], 2, 0), 2, 1)  # noqa: E731
        else:  # gymnax: MinAtar's channels, or gymnasium's picture of the observed state
            draw = FrameRenderer(env_id, spec.obs_shape)
        evaluate(
            act,
            params,
            env,
            1,
            jax.random.PRNGKey(args.seed),
            acting.initial_core(1),
            feedback=feedback,
            on_step=lambda ts: frames.append(draw(np.asarray(ts.obs[0]))),
        )
        if isinstance(draw, FrameRenderer):
            draw.close()
    else:
        import gymnasium as gym

        from envs.gymnasium_env import register_optional_envs

        # a partially observed variant renders its full env (its observations are converted
        # by `eval_env`, which keeps its subset)
        full_id = PARTIAL_OBS.get(env_id, (env_id,))[0]
        register_optional_envs(full_id)
        env = gym.make(full_id, render_mode="rgb_array")
        obs, _ = env.reset(seed=args.seed)
        key, core, first = jax.random.PRNGKey(args.seed), acting.initial_core(1), np.ones(1, bool)
        frames.append(env.render())
        while True:
            key, sub = jax.random.split(key)
            # the raw gymnasium observation as the agent's env gives it (envs.VecEnv)
            batch = eval_env.convert_obs(jax.tree.map(lambda x: np.asarray(x)[None], obs))
            action, core = act(params, batch, first, core, sub)
            a = np.asarray(action[0])
            obs, reward, terminated, truncated, _ = env.step(int(a) if spec.discrete else a)
            if feedback is not None:  # as `evaluate` feeds the core back
                core = feedback(core, action, np.full(1, reward, np.float32))
            first = np.zeros(1, bool)
            frames.append(env.render())
            if terminated or truncated:
                break
        env.close()
    path = _video_path(run_dir, args)
    check_folder(path.parent, run_dir)
    path.parent.mkdir(exist_ok=True)
    with atomic_path(path, run_dir) as tmp:  # never through a link, never outside the run
        if args.video_format == "gif":
            imageio.mimsave(tmp, frames, duration=1000 / 30, loop=0)
        else:
            imageio.mimsave(tmp, frames, fps=30, macro_block_size=1)
    return path


def _video_path(run_dir: Path, args: EvalArgs) -> Path:
    return run_dir / "videos" / f"eval.{args.video_format}"


def main(argv: list[str] | None = None) -> dict:
    args = cli(EvalArgs, argv, prog="python -m experiments.evaluate")
    try:
        run_dir = Path(args.run)
        if args.video:  # refused before anything is built: a link, or videos/ led outside
            check_file_target(_video_path(run_dir, args), run_dir)
        if args.out:
            check_file_target(args.out)
        train_args = load_run(run_dir)
        use_compile_cache()
        if args.video and train_args.run.env.startswith(GYMNAX):
            reason = video_refusal(train_args.run.env)
            if reason is not None:
                raise ValueError(reason)
        config, notes = _acting_hooks(train_args.config, trained_hooks(run_dir), args, run_dir)
        n = args.num_envs or min(args.episodes, 16)
        run = train_args.run
        env = make_eval_env(run.env, n, args.seed, **env_options(run))
        acting = agent_class(get_agent(run.agent)).acting(config, env, seed=args.seed)
        learner, _, step = restore_learner(acting.init_learner, run_dir, args.step)
    except (ValueError, OSError, CheckpointError) as err:
        raise SystemExit(f"error: {err}") from None
    for note in notes:
        print(note, file=sys.stderr)
    greedy = args.greedy or args.argmax
    act = acting.act(greedy)
    params = acting.params(learner)
    # the reward a core is fed back, clipped as the run's training env clipped it
    clipped = clips_rewards(env.spec.is_atari, True, run.reward_clip)
    feedback = eval_feedback(acting.feedback, clipped)
    try:
        returns, lengths = evaluate(
            act, params, env, args.episodes, jax.random.PRNGKey(args.seed),
            acting.initial_core(n), feedback=feedback,
        )  # fmt: skip
    except EvaluationError as err:
        raise SystemExit(f"error: {err}") from None
    result = {
        "run": str(run_dir),
        "checkpoint_step": step,
        "env": train_args.run.env,
        "episodes": len(returns),
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
        "length_mean": float(np.mean(lengths)),
        "policy": "greedy" if greedy else "sample",
    }
    if args.worst:
        order = np.argsort(returns, kind="stable")[: args.worst]
        result["worst"] = [
            {"episode": int(k), "return": float(returns[k]), "length": int(lengths[k])}
            for k in order
        ]
    if args.video:
        try:
            result["video"] = str(
                _record_video(acting, env, act, params, feedback, args, run_dir, env_options(run))
            )
        except (UnsafePathError, WriteError) as err:
            raise SystemExit(f"error: {err}") from None
        except (ValueError, OSError) as err:  # imageio's: ffmpeg's errors span lines
            path = _video_path(run_dir, args)
            raise SystemExit(f"error: cannot write {path}: {one_line(err)}") from None
    print(
        f"{train_args.run.env} @ step {step}: return {result['return_mean']:.2f} ± "
        f"{result['return_std']:.2f} over {len(returns)} episodes "
        f"(mean length {result['length_mean']:.0f})"
        + (f"; video {result['video']}" if args.video else "")
    )
    for row in result.get("worst", []):
        print(
            f"  worst: episode {row['episode']}: return {row['return']:.2f}, length {row['length']}"
        )
    if args.out:
        try:
            write_json_atomic(args.out, result)
        except UnsafePathError as err:
            raise SystemExit(f"error: --out: {err}") from None
        except OSError as err:
            raise SystemExit(f"error: --out {args.out}: {err.strerror or err}") from None
    return result


def command() -> None:
    """The `reactor-evaluate` command (pyproject.toml): `main` without its return value."""
    main()


if __name__ == "__main__":
    command()
