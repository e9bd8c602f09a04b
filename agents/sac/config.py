"""SAC configuration and presets: the command line of `--agent sac`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agents.core.config import (
    ConfigError,
    check,
    check_positive_int,
    check_sequence_window,
    field_defaults,
)
from agents.core.offpolicy import OffPolicyConfig


@dataclass(frozen=True)
class SACConfig(OffPolicyConfig):
    """Soft actor-critic (Haarnoja et al. 2018, arXiv:1812.05905) for continuous actions, and
    discrete SAC (Christodoulou 2019, arXiv:1910.07207) when the env's actions are discrete;
    with a critic ensemble and REDQ's random subset (Chen et al. 2021, arXiv:2101.05982),
    n-step or V-trace targets and prioritized replay; optionally running observation
    normalisation (--normalize-obs) and curiosity, by random network distillation
    (--rnd-coef) or the intrinsic curiosity module (--icm-coef); or recurrent (--recurrent:
    R2D2's stored state, burn-in and sequences, Kapturowski et al. 2019, "Recurrent
    Experience Replay in Distributed Reinforcement Learning", ICLR; agents/sac/recurrent.py).
    The defaults are the sac-classic preset (Pendulum-v1)."""

    alpha_lr: float = 1e-3
    """Adam learning rate of log α (automatic temperature)."""
    autotune: bool = True
    """Learn the temperature α towards the target entropy (arXiv:1812.05905 §5)."""
    init_alpha: float = 1.0
    """α at the start (the fixed α when --no-autotune)."""
    target_entropy: float | None = None
    """Target entropy H̄ (default: −|A| for continuous actions, target_entropy_scale·log A
    for discrete ones)."""
    target_entropy_scale: float = 0.89
    """Discrete SAC's H̄ as a fraction of the maximum entropy log A (the paper's 0.98 is
    known to keep α too high; 0.89 is CleanRL's sac_atari)."""
    log_std_min: float = -5.0
    """Lower end of the policy's log σ (CleanRL; the SAC code uses −20)."""
    log_std_max: float = 2.0
    """Upper end of the policy's log σ."""
    num_critics: int = 2
    """N: critics in the ensemble (2: SAC's clipped double Q; 10: REDQ)."""
    critic_subset: int = 2
    """M: the target's min is over M critics drawn at random per update (REDQ; M = N: all)."""
    actor_q: str = "min"
    """How the actor combines the N critics: "min" (SAC) or "mean" (REDQ)."""
    target: str = "n-step"
    """Critic targets: "n-step" (n = --n-step; 1 is SAC's one-step target; for n > 1 the
    uncorrected n-step return of n-step DDPG/D4PG on soft values: no off-policy correction)
    or "vtrace" (V-trace over the n steps after the sampled one, with the stored behaviour
    log-probs, on soft values). Either way each step after the sampled one adds the entropy
    bonus α H(π(·|x)), estimated by −α log π(a'|x) of the fresh action a' ~ π that the soft
    value draws (V-trace since 2026-11-29, n-step since 2026-11-29 too: before, its
    intermediate steps had none)."""
    overwrite_mu: bool = False
    """V-trace: after each update overwrite the stored behaviour log-probs of the sampled
    steps with the current policy's (as the Advanced-SAC seed does)."""
    vtrace_lambda: float = 1.0
    """V-trace: λ of its traces c_s = λ·min(c̄, ρ_s) (IMPALA's 1; the seed's v_lambda)."""
    vtrace_rho: float = 1.0
    """V-trace: ρ̄, the truncation of the importance ratio in its TD errors (IMPALA's 1; the
    seed's v_rho); at most 100."""
    vtrace_c: float = 1.0
    """V-trace: c̄, the truncation of the importance ratio in its traces (IMPALA's 1; the
    seed's v_c); at most 100."""
    recurrent: bool = False
    """R2D2's recurrent mode (Kapturowski et al. 2019): the actor and the critics each get an
    LSTM fed the previous action and reward (networks/sac.py), acting carries its state, the
    replay stores it at the start of every trace, and an update learns --batch-size
    sequences of --seq-len steps, each unrolled from its stored state over a --burn-in with
    no gradient first (agents/sac/recurrent.py). Continuous or discrete; n-step or V-trace
    targets (each learnt step's as the feed-forward learner's), uniform or prioritized
    sequence replay, RND or ICM (the cores are fed the env's reward, the targets the reward
    with the bonus)."""
    lstm_size: int = 64
    """Recurrent only: LSTM size of the actor's core and of the critics' (R2D2: 512)."""
    seq_len: int = 16
    """Recurrent only: steps learnt per sequence (R2D2: 80); a multiple of --trace-len,
    which is the period at which sequences start."""
    burn_in: int = 8
    """Recurrent only: steps unrolled from the stored state before the learnt ones, with no
    gradient (R2D2: 40); a multiple of --trace-len."""
    refresh_stored_state: bool = True
    """Recurrent only: after each update, write the core states its unroll recomputed with the
    online networks back into the replay, at the start of every later trace of each sampled
    window's burn-in and learnt steps (agents/sac/recurrent.py); off: keep the states stored
    at acting time."""

    q_only: bool = False
    """Discrete actions: the Advanced-SAC seed's Q-only mode (discrete_dqn_like): no actor
    and no temperature are learnt; the critics learn hard n-step targets r + γ max_a' min_M
    Q'(x', a') (the drawn members' minimum, action by action: clipped double Q over the
    ensemble) and the agent acts ε-greedily (--q-only-epsilon) on the mean of the critics'
    Q values, greedily in evaluation. Feed-forward, n-step targets."""
    q_only_epsilon: float = 0.05
    """--q-only: ε of the ε-greedy acting while training (after --start-train-at; uniform
    before)."""
    noisy: bool = False
    """NoisyNet layers (Fortunato et al. 2018, arXiv:1706.10295; factorised Gaussian noise) in
    the MLPs of the actor and the critics (their torsos and recurrent cores stay
    deterministic), as the Advanced-SAC seed offers: each update draws anew for the actor,
    the critics and the target critics, each acting step for the actor (one draw for the
    envs of the step); evaluation acts on the noise-free means. The entropy term still
    explores: the noise adds state-dependent, temporally consistent exploration."""
    noisy_std: float = 0.5
    """--noisy: σ0 of every noisy layer (σ starts at σ0/√inputs; the paper's 0.5)."""
    prediction: bool = False
    """The Advanced-SAC seed's prediction model (agents/sac/prediction.py): transition,
    reward and observation models on the critics' representation (the recurrent critics'
    core state; feed-forward, a ReLU layer of width hidden[0] added to their torso, or the
    --network plug-in's features), trained
    with them; their gradient reaches the representation only while its cosine with the
    critics' loss's gradient there is positive. With --privileged-obs the models get the
    privileged dimensions and reconstruct them. Vector observations."""
    transition_kl: float = 0.8
    """--prediction: the coefficient of KL(N(μ, σ) ‖ N(0, I)) in the transition model's loss
    (the seed's transition_kl)."""

    # Flags that do nothing without their switch (agents.core.config.check_only_with).
    ONLY_WITH: ClassVar[dict[str, str]] = {
        **OffPolicyConfig.ONLY_WITH,
        "transition_kl": "prediction",
        "noisy_std": "noisy",
        "q_only_epsilon": "q_only",
        **dict.fromkeys(("alpha_lr", "target_entropy", "target_entropy_scale"), "autotune"),
        **dict.fromkeys(
            ("overwrite_mu", "vtrace_lambda", "vtrace_rho", "vtrace_c"), "target=vtrace"
        ),
        **dict.fromkeys(("lstm_size", "seq_len", "burn_in", "refresh_stored_state"), "recurrent"),
    }
    # Flags of one kind of env only (engine.preflight.check_env_only).
    ENV_ONLY: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("target_entropy_scale", "q_only", "q_only_epsilon"), "discrete"),
        **dict.fromkeys(("log_std_min", "log_std_max"), "continuous"),
    }

    def __post_init__(self):
        # The sequence layout first: the replay window the base checks depend on.
        check_positive_int(self, "trace_len", "lstm_size", "seq_len")
        if self.recurrent:
            check_sequence_window(self)
        super().__post_init__()
        check(self.alpha_lr > 0, "alpha_lr", self.alpha_lr, "> 0")
        check(self.init_alpha > 0, "init_alpha", self.init_alpha, "> 0")
        check(
            0.0 < self.target_entropy_scale <= 1.0,
            "target_entropy_scale",
            self.target_entropy_scale,
            "in (0, 1]",
        )
        default_scale = type(self).__dataclass_fields__["target_entropy_scale"].default
        if self.target_entropy is not None and self.target_entropy_scale != default_scale:
            raise ConfigError(
                "--target-entropy-scale does nothing with --target-entropy (which sets H̄ "
                "itself): give one of them"
            )
        check(
            self.log_std_min < self.log_std_max,
            "log_std_min",
            self.log_std_min,
            f"< --log-std-max {self.log_std_max}",
        )
        check(self.num_critics >= 1, "num_critics", self.num_critics, "an integer >= 1")
        check(
            1 <= self.critic_subset <= self.num_critics,
            "critic_subset",
            self.critic_subset,
            f"in [1, --num-critics {self.num_critics}]",
        )
        check(self.transition_kl >= 0, "transition_kl", self.transition_kl, ">= 0")
        check(self.noisy_std > 0, "noisy_std", self.noisy_std, "> 0")
        check(self.actor_q in ("min", "mean"), "actor_q", self.actor_q, '"min" or "mean"')
        check(self.target in ("n-step", "vtrace"), "target", self.target, '"n-step" or "vtrace"')
        check(0.0 <= self.vtrace_lambda <= 1.0, "vtrace_lambda", self.vtrace_lambda, "in [0, 1]")
        for name in ("vtrace_rho", "vtrace_c"):  # ρ is clipped at 100 before (sac/learner.py)
            value = getattr(self, name)
            check(0.0 < value <= 100.0, name, value, "in (0, 100]")
        if self.recurrent and self.overwrite_mu:
            raise ConfigError("--overwrite-mu: not with --recurrent (its windows keep μ)")
        check(0.0 <= self.q_only_epsilon <= 1.0, "q_only_epsilon", self.q_only_epsilon, "in [0, 1]")
        if self.q_only:
            check(self.target == "n-step", "target", self.target, '"n-step" with --q-only')
            check(not self.recurrent, "recurrent", self.recurrent, "off with --q-only")
            defaults = field_defaults(self)
            for name in ACTOR_FIELDS:
                if getattr(self, name) != defaults[name]:
                    raise ConfigError(
                        f"--{name.replace('_', '-')} does nothing with --q-only (no actor and "
                        "no temperature are learnt)"
                    )

    # The replay window (agents.core.config.ReplayWindow): recurrent, a burn-in before the sampled
    # trace and the rest of the sequence after it; feed-forward, one trace.
    @property
    def learn_len(self) -> int:
        return self.seq_len if self.recurrent else self.trace_len

    @property
    def lookback(self) -> int:
        return self.burn_in if self.recurrent else 0


# What only the actor and the temperature read: each an error with --q-only when changed.
ACTOR_FIELDS = (
    "actor_lr", "alpha_lr", "autotune", "init_alpha", "target_entropy", "target_entropy_scale",
    "policy_delay", "actor_q",
)  # fmt: skip


PRESETS: dict[str, dict] = {
    # Pendulum-v1 (continuous) and CartPole-v1 (discrete SAC), sized for a 2-core CPU: the
    # SAC paper's networks and learning rates (CleanRL's sac_continuous_action: actor 3e-4,
    # critic and α 1e-3, τ = 0.005, batch 256, N = 2) with 1,000 random steps instead of
    # 5,000 (Pendulum episodes are 200 steps), 4 envs × 8 steps per iteration and one
    # update per env step, the 32 updates of an iteration scanned in one program.
    "sac-classic": {"env": "Pendulum-v1", "total_steps": 20_000},
    # Pendulum-P-v1 (Pendulum-v1 without its angular velocity, Meng et al. 2021 / Ni et al.
    # 2022), where a feed-forward policy cannot tell the swing's direction: recurrent SAC with
    # R2D2's stored state, burn-in and refreshed stored states (Kapturowski et al. 2019, ICLR).
    # Sized for a 2-core CPU (our choices): LSTM 64 and 64-64 MLPs (Ni et al. 2022 use LSTM
    # 128 and 256-256), 16 sequences of 16 steps after a burn-in of 8 (R2D2: 64 of 80 after
    # 40), sequences every 8 steps, one update per env step (256 transitions learnt per env
    # step, as feed-forward SAC's batch of 256), SAC's learning rates and τ, 1-step targets.
    "sac-pendulum-p": {
        "env": "Pendulum-P-v1",
        "total_steps": 20_000,
        "recurrent": True,
        "num_envs": 4,
        "trace_len": 8,
        "seq_len": 16,
        "burn_in": 8,
        "lstm_size": 64,
        "hidden": (64, 64),
        "batch_size": 16,
        "update_to_data": 1.0,
        "start_train_at": 1_000,
        "eval_episodes": 10,
    },
    # CleanRL sac_continuous_action.py / Haarnoja et al. 2018 (arXiv:1812.05905, Table 1):
    # batch 256, Adam 3e-4 (actor) / 1e-3 (critics, α), τ = 0.005, γ = 0.99, 256-256
    # networks, 5,000 random steps, one update per env step, buffer 1M. One env × 8 steps
    # per iteration: the update order of the 1-env original, with 8 updates per program.
    "sac-mujoco": {
        "env": "HalfCheetah-v4",
        "total_steps": 1_000_000,
        "num_envs": 1,
        "trace_len": 8,
        "batch_size": 256,
        "buffer_size": 1_000_000,
        "start_train_at": 5_000,
        "update_to_data": 1.0,
        "actor_lr": 3e-4,
        "critic_lr": 1e-3,
        "alpha_lr": 1e-3,
        "tau": 0.005,
        "hidden": (256, 256),
        "checkpoint_every": 100_000,
        "eval_episodes": 10,
    },
    # Discrete SAC on MinAtar (issue 63): CleanRL's sac_atari.py settings (Christodoulou 2019,
    # arXiv:1910.07207, as CleanRL runs it on Atari): batch 64, Adam 3e-4 for the actor, the
    # critics and α, one update per 4 env steps, the target critics copied every 8,000 env
    # steps (2,000 updates), 20,000 random steps first, γ = 0.99, 5M env steps; on the
    # MinAtar CNN the observation shape picks with 128 units and the MinAtar paper's replay of
    # 100,000 transitions (our choices, as acer-minatar's; CleanRL keeps 1M frames and its
    # Adam ε is 1e-4, optax's 1e-8 here). 4 envs × 8 steps per iteration: 8 updates per
    # iteration. The entropy target is 0.5·log|A|, not CleanRL's 0.89 (the default scale):
    # at 0.89 Breakout's policy stayed just under its target (0.970-0.977 nats against 0.978)
    # while α grew without bound (3.4e9 by 2.5M steps) until the critic's gradient was
    # infinite; at 0.5, α stayed at 0.015-0.032 with the entropy at its target on Breakout
    # (0.55M steps, return 11.9) and Asterix (0.31M steps, 10.3). 0.5 is the one lower value
    # tried, not the best of a sweep (docs/results/minatar-5m/README.md).
    "sac-minatar": {
        "env": "gymnax/Breakout-MinAtar",
        "total_steps": 5_000_000,
        "num_envs": 4,
        "trace_len": 8,
        "batch_size": 64,
        "buffer_size": 100_000,
        "start_train_at": 20_000,
        "update_to_data": 0.25,
        "target_update_period": 2_000,
        "actor_lr": 3e-4,
        "critic_lr": 3e-4,
        "alpha_lr": 3e-4,
        "target_entropy_scale": 0.5,
        "hidden": (128,),
        "checkpoint_every": 1_000_000,
        "eval_episodes": 100,
        "return_window": 100,
    },
    # REDQ (Chen et al. 2021, arXiv:2101.05982, Table 1 / their redq_sac.py): N = 10 critics,
    # min over M = 2 drawn per update, update-to-data ratio G = 20, the actor (and α) updated
    # once per env step, after the G critic updates (Algorithm 1; their policy_update_delay
    # 20), on the mean of all N, otherwise SAC's settings (lr 3e-4 for all, batch 256,
    # τ = 0.005, 5,000 random steps).
    "redq-mujoco": {
        "env": "HalfCheetah-v4",
        "total_steps": 300_000,
        "num_envs": 1,
        "trace_len": 8,
        "batch_size": 256,
        "buffer_size": 1_000_000,
        "start_train_at": 5_000,
        "update_to_data": 20.0,
        "policy_delay": 20,
        "num_critics": 10,
        "critic_subset": 2,
        "actor_q": "mean",
        "actor_lr": 3e-4,
        "critic_lr": 3e-4,
        "alpha_lr": 3e-4,
        "tau": 0.005,
        "hidden": (256, 256),
        "checkpoint_every": 50_000,
        "eval_episodes": 10,
    },
}
