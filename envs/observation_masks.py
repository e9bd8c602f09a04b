"""Observation masks for partially observed variants of the classic-control tasks, as
`preprocess_obs` hooks of the on-policy agents (agents/core/hooks.py): e.g.
`--preprocess-obs envs.observation_masks:cartpole_no_velocity`. Jittable."""


def cartpole_no_velocity(obs):
    """CartPole-v1 without its velocities: (cart position, pole angle) of
    (x, ẋ, θ, θ̇). A memory task: a feed-forward policy cannot infer the velocities from
    one observation, a recurrent one can from two."""
    return obs[..., 0::2]
