"""PQN's config and presets: the command line of `--agent pqn` (Gallici et al. 2024,
"Simplifying Deep Temporal Difference Learning", arXiv:2407.04811; hyper-parameters from its
code, mttga/purejaxql@970ecce `purejaxql/config/alg/pqn_{cartpole,minatar}.yaml`)."""

from dataclasses import dataclass
from typing import ClassVar

from agents.core.config import Config, check, check_floats_finite, check_positive_int
from agents.core.hooks import check_hooks


@dataclass(frozen=True)
class PQNConfig(Config):
    """PQN (arXiv:2407.04811, Algorithm 1). The defaults are the pqn-cartpole preset."""

    num_envs: int = 32
    """Parallel environments (over all processes)."""
    trace_len: int = 64
    """Rollout length T: steps per env per iteration."""
    discount: float = 0.99
    """Discount factor γ."""
    td_lambda: float = 0.95
    """λ of the Q(λ) targets (agents.losses.q_lambda_targets); 0: one-step Q-learning."""
    lr: float = 1e-4
    """Learning rate of RAdam (Liu et al. 2020, arXiv:1908.03265), PQN's optimiser."""
    anneal_steps: int = 500_000
    """Decay the learning rate linearly to 0 over this many env steps; 0: constant."""
    max_grad_norm: float = 10.0
    """Clip each minibatch's gradient to this global L2 norm."""
    epochs: int = 4
    """Passes over each rollout."""
    num_minibatches: int = 16
    """Minibatches per epoch, over the rollout's T·B transitions shuffled."""
    eps_start: float = 1.0
    """ε of the ε-greedy actor at the start."""
    eps_end: float = 0.2
    """ε after --eps-decay-steps env steps (linear decay)."""
    eps_decay_steps: int = 100_000
    """Env steps over which ε decays."""
    eval_epsilon: float = 0.001
    """ε of a non-greedy evaluation (--no-eval-greedy)."""
    reward_scale: float = 0.1
    """Rewards are multiplied by this in the targets."""
    hidden: tuple[int, ...] = (256, 256)
    """MLP torso widths for vector or dict observations (images: the MinAtar or Nature CNN,
    of fixed widths; refused for them and with --network)."""
    layer_norm: bool = True
    """A LayerNorm before every ReLU: what lets PQN learn without a target network (§4)."""
    network: str | None = None
    """Hook `module:function`: function(obs_spec) -> a flax module mapping observations to
    features [B, F], the torso under the Q head (put PQN's LayerNorms in it). Checked before
    anything compiles; never imported from a run folder: --resume and evaluate need it again."""
    ONLY_WITH: ClassVar[dict[str, str]] = {}  # every flag acts (agents.core.config)
    HOOKS: ClassVar[dict[str, tuple[str, ...]]] = {"network": ("obs_spec",)}  # agents.core.hooks
    # Flags of one kind of env only, and the built-in torso's, refused beside --network
    # (engine.preflight: check_env_only, check_torso_fields).
    ENV_ONLY: ClassVar[dict[str, str]] = {"hidden": "mlp"}
    TORSO_FIELDS: ClassVar[tuple[str, ...]] = ("hidden", "layer_norm")

    def __post_init__(self):
        check_positive_int(
            self, "num_envs", "trace_len", "epochs", "num_minibatches", "eps_decay_steps"
        )
        check_floats_finite(self)
        check(0.0 < self.discount <= 1.0, "discount", self.discount, "in (0, 1]")
        for name in ("td_lambda", "eps_start", "eps_end", "eval_epsilon"):
            check(0.0 <= getattr(self, name) <= 1.0, name, getattr(self, name), "in [0, 1]")
        for name in ("lr", "max_grad_norm", "reward_scale"):
            check(getattr(self, name) > 0, name, getattr(self, name), "> 0")
        check(self.anneal_steps >= 0, "anneal_steps", self.anneal_steps, ">= 0")
        check(all(h >= 1 for h in self.hidden), "hidden", self.hidden, "widths >= 1")
        n, m = self.num_envs * self.trace_len, self.num_minibatches
        why = f"a divisor of the {n} transitions of a rollout (--num-envs x --trace-len)"
        check(n % m == 0, "num_minibatches", m, why)
        if self.network is not None:  # --network (agents.core.hooks)
            check_hooks(self)


PRESETS = {
    # The paper's CartPole (the defaults): 32 envs x 64 steps, 4 epochs x 16 minibatches, RAdam
    # 1e-4 decayed linearly, λ 0.95, ε 1 -> 0.2 over 20% of 500k steps, rewards x 0.1.
    "pqn-cartpole": {"env": "gymnax/CartPole-v1", "total_steps": 500_000},
    # The paper's MinAtar, at docs/results/minatar-5m's budget (5M env steps, the schedules
    # scaled to it; the paper runs 1e7): 128 envs x 32 steps, 2 epochs x 32 minibatches, RAdam
    # 5e-4 decayed, λ 0.65, ε 1 -> 0.05 over 10%. Other games: --env gymnax/<Game>-MinAtar.
    "pqn-minatar": {
        "env": "gymnax/Breakout-MinAtar", "total_steps": 5_000_000, "num_envs": 128,
        "trace_len": 32, "epochs": 2, "num_minibatches": 32, "lr": 5e-4, "td_lambda": 0.65,
        "anneal_steps": 5_000_000, "eps_end": 0.05, "eps_decay_steps": 500_000,
        "reward_scale": 1.0, "checkpoint_every": 1_000_000, "eval_episodes": 100,
        "return_window": 100,
    },
}  # fmt: skip
