"""TD3 / DDPG configuration and presets: the command line of `--agent td3`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agents.core.config import check
from agents.core.offpolicy import OffPolicyConfig


@dataclass(frozen=True)
class TD3Config(OffPolicyConfig):
    """TD3 (Fujimoto et al. 2018, arXiv:1802.09477): a deterministic actor, clipped double Q,
    target policy smoothing and delayed actor updates. DDPG (Lillicrap et al. 2016,
    arXiv:1509.02971) is the same learner with the three switched off: --num-critics 1
    --policy-delay 1 --target-noise 0 (the ddpg-mujoco preset). --normalize-obs and
    curiosity (RND's --rnd-coef or ICM's --icm-coef) come from the shared off-policy seam. The
    defaults are the td3-classic preset (Pendulum-v1)."""

    num_critics: int = 2
    """Critics; the target takes the min over all of them (2: clipped double Q; 1: DDPG)."""
    exploration_noise: float = 0.1
    """σ of the Gaussian noise added to the actor's action in [−1, 1] while acting."""
    target_noise: float = 0.2
    """σ of the target policy smoothing noise (0: none, as DDPG)."""
    noise_clip: float = 0.5
    """Clip of the target smoothing noise c."""
    policy_delay: int = 2
    """Update the actor and the targets every this many critic updates (TD3: 2)."""

    # Flags that do nothing without their switch (agents.core.config.check_only_with).
    ONLY_WITH: ClassVar[dict[str, str]] = {
        **OffPolicyConfig.ONLY_WITH,
        "noise_clip": "target_noise>0",
    }

    def __post_init__(self):
        super().__post_init__()
        check(self.num_critics >= 1, "num_critics", self.num_critics, "an integer >= 1")
        for name in ("exploration_noise", "target_noise", "noise_clip"):
            check(getattr(self, name) >= 0, name, getattr(self, name), ">= 0")
        period, delay = self.target_update_period, self.policy_delay
        check(
            period % delay == 0, "target_update_period", period,
            f"a multiple of --policy-delay {delay} (the targets move on the actor's updates)",
        )  # fmt: skip


# CleanRL's MuJoCo settings, shared by TD3 and DDPG below: 256-256 networks, Adam 3e-4 for
# both, batch 256, τ = 0.005, one update per env step after 25,000 random steps, Gaussian
# exploration σ = 0.1.
_MUJOCO = {
    "env": "HalfCheetah-v4",
    "total_steps": 1_000_000,
    "num_envs": 1,
    "trace_len": 8,
    "batch_size": 256,
    "buffer_size": 1_000_000,
    "start_train_at": 25_000,
    "update_to_data": 1.0,
    "actor_lr": 3e-4,
    "critic_lr": 3e-4,
    "tau": 0.005,
    "hidden": (256, 256),
    "exploration_noise": 0.1,
    "checkpoint_every": 100_000,
    "eval_episodes": 10,
}

PRESETS: dict[str, dict] = {
    # Pendulum-v1 on a 2-core CPU: TD3's settings (below) with 1,000 random steps, 4 envs ×
    # 8 steps per iteration, one update per env step.
    "td3-classic": {"env": "Pendulum-v1", "total_steps": 20_000},
    # Fujimoto et al. 2018 (arXiv:1802.09477, Table 3) as in CleanRL's td3_continuous_action:
    # the settings above, γ = 0.99, smoothing σ = 0.2 clipped at 0.5, policy delay 2.
    "td3-mujoco": {**_MUJOCO, "target_noise": 0.2, "noise_clip": 0.5, "policy_delay": 2},
    # DDPG as in CleanRL's ddpg_continuous_action (Lillicrap et al. 2016 with TD3's
    # "our DDPG" changes: 256-256 networks, Adam 3e-4, no batch norm, Gaussian exploration
    # σ = 0.1 instead of Ornstein-Uhlenbeck): one critic, no smoothing, no delay.
    "ddpg-mujoco": {**_MUJOCO, "num_critics": 1, "target_noise": 0.0, "policy_delay": 1},
}
