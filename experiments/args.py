"""Command-line arguments of `python -m experiments.train`, and the paper presets.

Every field's docstring becomes its `--help` text (tyro). A preset replaces the defaults;
flags given explicitly on the command line override the preset.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Literal

import tyro

from agents.acer.config import ACERConfig
from agents.reactor.config import ReactorConfig


@dataclass(frozen=True)
class TrainArgs:
    """Train an off-policy actor-critic agent on an envpool (or gymnasium) environment.

    Outputs go to the run folder: config.json, metrics.csv, TensorBoard events,
    checkpoints/ and summary.json.
    """

    agent: Literal["acer", "reactor"] = "acer"
    """Which agent to train."""
    preset: str | None = None
    """Named hyper-parameter preset (acer-classic, acer-atari, reactor-classic, reactor-atari;
    default: <agent>-classic); explicit flags override it."""
    env: str = "CartPole-v1"
    """Environment id: envpool ids (Pong-v5, CartPole-v1, Acrobot-v1, HalfCheetah-v5, ...) or
    any gymnasium id envpool lacks."""
    total_steps: int = 100_000
    """Environment steps to train for (agent steps over all envs; one Atari step = 4 frames)."""
    seed: int = 0
    """Random seed for parameters, actions, replay sampling and the environments."""
    num_envs: int = 16
    """Parallel environments (envpool batch)."""
    num_threads: int = 0
    """envpool worker threads (0: envpool's default)."""
    run_dir: str | None = None
    """Run folder; default runs/<exp-name>."""
    exp_name: str | None = None
    """Name of the experiment (the run folder's name); default <agent>-<env>-seed<seed>."""
    resume: str | None = None
    """Resume the run in this folder from its latest complete checkpoint (other flags are read
    from its config.json; only --total-steps, --max-minutes and --progress may change)."""

    # Data parallelism (replaces Hogwild threads).
    num_devices: int | None = None
    """Devices per process for data parallelism (default: all local devices). Envs, replay
    and batches are split evenly over the devices; gradients are averaged with lax.pmean."""
    coordinator_address: str | None = None
    """Multi-host: HOST:PORT of process 0 for jax.distributed.initialize."""
    num_processes: int = 1
    """Multi-host: number of processes (each runs its own envpool on num_envs / P envs)."""
    process_id: int = 0
    """Multi-host: this process's index; only process 0 writes logs and summary.json."""

    # ACER / REACTOR-torch hyper-parameters.
    trace_len: int = 20
    """Trace length T (steps per trace; stored traces hold T+1 observations)."""
    batch_size: int = 16
    """Traces per off-policy (replay) update."""
    replay_ratio: float = 4.0
    """Mean number of off-policy updates per on-policy update (Poisson, ACER §4)."""
    buffer_size: int = 50_000
    """Replay capacity in transitions over all envs (rounded down to whole traces)."""
    start_train_at: int = 0
    """Env steps before off-policy training starts (on-policy updates always run)."""
    discount: float = 0.99
    """Discount factor γ."""
    c: float = 10.0
    """Truncation c of the policy importance weight (ACER eq. 9). REACTOR-torch's --c
    truncated Retrace; here that is --retrace-c-max."""
    retrace_c_max: float = 1.0
    """Truncation of the Retrace trace coefficients c_t = λ·min(c_max, ρ_t) (ACER eq. 5)."""
    retrace_lambda: float = 1.0
    """Retrace λ."""
    trust_region: bool = True
    """Use ACER's efficient trust region against the averaged policy (§3.3)."""
    trust_region_threshold: float = 1.0
    """Trust-region threshold δ (ACER eq. 12)."""
    tau: float = 0.99
    """Averaged-policy decay: θ_a ← τ·θ_a + (1 − τ)·θ (ACER's α)."""
    lr: float = 2e-3
    """Adam learning rate."""
    adam_eps: float = 1e-5
    """Adam ε."""
    max_grad_norm: float = 40.0
    """Clip gradients to this global L2 norm."""
    entropy_weight: float = 1e-3
    """Entropy regularisation weight."""
    value_weight: float = 0.5
    """Weight of the critic loss."""
    reward_clip: bool | None = None
    """Clip training rewards to [-1, 1] (default: on for Atari, off otherwise). Evaluation
    always uses raw rewards."""
    hidden: tuple[int, ...] = (64, 64)
    """MLP torso widths for vector observations (Atari uses the Nature CNN)."""
    lstm_size: int = 0
    """LSTM core size after the torso (0: feed-forward)."""
    microbatch_traces: int = 0
    """Traces (Reactor: sequences) per gradient chunk inside one update (0: no split). On
    CPU, chunks of about 32 frames are fastest (see PERF-NOTES.md)."""

    # Reactor (Gruslys et al. 2018) only.
    distributional: bool = True
    """Reactor: distributional Retrace critic; --no-distributional gives "Reactor ND"."""
    num_atoms: int = 51
    """Reactor: atoms of the fixed categorical support."""
    v_min: float = -10.0
    """Reactor: lowest atom of the support."""
    v_max: float = 10.0
    """Reactor: highest atom of the support."""
    beta_loo_c: float = 1.0
    """Reactor: β-LOO truncation c, β = min(c, 1/μ(A)); 1 gives plain leave-one-out."""
    target_update_period: int = 1000
    """Reactor: learner steps between target-network copies."""
    env_steps_per_update: float = 8.0
    """Reactor: acting steps per learning step (the paper uses 4-6)."""
    decoupled: bool = True
    """Reactor: act and learn in concurrent threads; --no-decoupled runs them in lock-step
    (deterministic, for debugging)."""
    uniform_mix: float = 0.01
    """Reactor: weight of the uniform component mixed into the policy."""
    priority_epsilon: float = 0.01
    """Reactor: probability of a uniform draw in prioritized sequence replay."""
    adam_b1: float = 0.9
    """Adam β1 (Reactor's paper uses 0)."""
    torso_out: int = 128
    """Reactor: width of the linear layer after the torso."""

    # Logging, evaluation, checkpoints.
    eval_episodes: int = 20
    """Full episodes (no life loss, no reward clipping) to evaluate at the end."""
    eval_greedy: bool = False
    """Evaluate the greedy (argmax) policy instead of sampling from π."""
    checkpoint_every: int = 50_000
    """Write a checkpoint every this many env steps (and at the end)."""
    keep_checkpoints: int = 3
    """How many recent checkpoints to keep."""
    return_window: int = 20
    """Episodes in the moving window of the logged mean return."""
    max_minutes: float | None = None
    """Stop training after this many minutes (after compilation), then checkpoint, evaluate
    and write summary.json as at the end; for job time limits. SIGTERM and Ctrl-C stop the
    same way (a second signal aborts)."""
    progress: bool = True
    """Show a live progress bar."""
    debug: bool = False
    """Debug mode: jax_debug_nans on, no TensorBoard."""

    def reactor_config(self) -> ReactorConfig:
        return ReactorConfig(
            num_envs=self.num_envs,
            trace_len=self.trace_len,
            batch_size=self.batch_size,
            buffer_size=self.buffer_size,
            start_train_at=self.start_train_at,
            discount=self.discount,
            retrace_lambda=self.retrace_lambda,
            beta_loo_c=self.beta_loo_c,
            entropy_weight=self.entropy_weight,
            distributional=self.distributional,
            num_atoms=self.num_atoms,
            v_min=self.v_min,
            v_max=self.v_max,
            uniform_mix=self.uniform_mix,
            target_update_period=self.target_update_period,
            lr=self.lr,
            adam_b1=self.adam_b1,
            adam_eps=self.adam_eps,
            max_grad_norm=self.max_grad_norm,
            value_weight=self.value_weight,
            hidden=tuple(self.hidden),
            torso_out=self.torso_out,
            lstm_size=self.lstm_size,
            priority_epsilon=self.priority_epsilon,
            env_steps_per_update=self.env_steps_per_update,
            decoupled=self.decoupled,
            microbatch_sequences=self.microbatch_traces,
        )

    def acer_config(self) -> ACERConfig:
        return ACERConfig(
            num_envs=self.num_envs,
            trace_len=self.trace_len,
            batch_size=self.batch_size,
            replay_ratio=self.replay_ratio,
            buffer_size=self.buffer_size,
            start_train_at=self.start_train_at,
            discount=self.discount,
            c=self.c,
            retrace_c_max=self.retrace_c_max,
            retrace_lambda=self.retrace_lambda,
            trust_region=self.trust_region,
            trust_region_delta=self.trust_region_threshold,
            tau=self.tau,
            lr=self.lr,
            adam_eps=self.adam_eps,
            max_grad_norm=self.max_grad_norm,
            entropy_weight=self.entropy_weight,
            value_weight=self.value_weight,
            hidden=tuple(self.hidden),
            lstm_size=self.lstm_size,
            microbatch_traces=self.microbatch_traces,
        )


PRESETS: dict[str, dict] = {
    # CartPole-v1 / Acrobot-v1. Tuned here for a 2-core CPU: small MLP, short traces.
    "acer-classic": {},
    # Wang et al. 2017, "Sample Efficient Actor-Critic with Experience Replay", §5 (Atari):
    # c = 10, δ = 1, α = 0.99, T = 20 (k in the paper), replay ratio 4, entropy 0.001,
    # γ = 0.99, 16 actors. The paper keeps a replay per thread; we default to one shared
    # replay of 200,000 transitions (about 1.4 GB with frames stored once; raise
    # --buffer-size on a larger machine). Reward clipping and episodic life are on for
    # training only (envs/). Adam replaces the paper's RMSProp; lr is our choice.
    "acer-atari": {
        "env": "Pong-v5",
        "total_steps": 10_000_000,
        "num_envs": 16,
        "trace_len": 20,
        "batch_size": 16,
        "replay_ratio": 4.0,
        "buffer_size": 200_000,
        "discount": 0.99,
        "c": 10.0,
        "trust_region": True,
        "trust_region_threshold": 1.0,
        "tau": 0.99,
        "lr": 2.5e-4,
        "entropy_weight": 1e-3,
        "max_grad_norm": 40.0,
        "microbatch_traces": 2,
        "checkpoint_every": 200_000,
        "return_window": 10,
    },
    # The Reactor on CartPole-v1 / Acrobot-v1: our choices for a 2-core CPU (small LSTMs,
    # support [-10, 110] covering CartPole's discounted returns of at most 100).
    "reactor-classic": {
        "agent": "reactor",
        "num_envs": 8,
        "trace_len": 32,
        "batch_size": 8,
        "buffer_size": 50_000,
        "start_train_at": 2_000,
        "lr": 1e-3,
        "adam_b1": 0.0,
        "adam_eps": 1e-6,
        "entropy_weight": 0.01,
        "v_min": -10.0,
        "v_max": 110.0,
        "hidden": (64,),
        "torso_out": 64,
        "lstm_size": 64,
        "target_update_period": 200,
        "env_steps_per_update": 8.0,
        "total_steps": 200_000,
    },
    # Gruslys et al. 2018, "The Reactor", arXiv:1704.04651: Adam lr 5e-5 with β1 = 0, λ = 1,
    # β-LOO c = 1, sequences of 33 (T = 32) sampled in batches of 4, 4-6 acting steps per
    # learning step (§3.4), target update every 1000 learner steps, 51 atoms.
    # We take 6 acting steps per learning step: on a 2-core CPU the learner is the bottleneck,
    # so updates per second are fixed and the top of the paper's range brings 1.5x the fresh
    # data per hour. Not given in the paper's text available to us, so our choices: support
    # [-10, 10] (rewards are clipped), torso -> linear 128 -> LSTMs of 128, 8 envs (the actor's
    # parameters are at most two rollouts of 8 x 32 steps old), policy uniform mix 0.01,
    # entropy 0.01.
    "reactor-atari": {
        "agent": "reactor",
        "env": "Pong-v5",
        "total_steps": 10_000_000,
        "num_envs": 8,
        "trace_len": 32,
        "batch_size": 4,
        "buffer_size": 200_000,
        "start_train_at": 20_000,
        "lr": 5e-5,
        "adam_b1": 0.0,
        "adam_eps": 1e-6,
        "retrace_lambda": 1.0,
        "beta_loo_c": 1.0,
        "entropy_weight": 0.01,
        "v_min": -10.0,
        "v_max": 10.0,
        "torso_out": 128,
        "lstm_size": 128,
        "target_update_period": 1000,
        "env_steps_per_update": 6.0,
        "microbatch_traces": 1,
        "checkpoint_every": 200_000,
        "return_window": 10,
    },
}


def _flag_value(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def parse_train_args(argv: list[str] | None = None) -> TrainArgs:
    """Parse the CLI: preset values become the defaults, explicit flags override them."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name = _flag_value(argv, "--preset")
    agent = _flag_value(argv, "--agent")
    if name is None and agent not in (None, "acer"):
        name = f"{agent}-classic"  # each agent's own defaults
    default = TrainArgs()
    if name is not None:
        if name not in PRESETS:
            raise SystemExit(f"error: unknown preset {name!r}; choose from {', '.join(PRESETS)}")
        default = dataclasses.replace(default, preset=name, **PRESETS[name])
    args = tyro.cli(TrainArgs, default=default, args=argv)
    preset_agent = PRESETS.get(args.preset or "", {}).get("agent", "acer")
    if args.preset and preset_agent != args.agent:
        raise SystemExit(f"error: preset {args.preset!r} is for --agent {preset_agent}")
    return args
