"""Evolving a population of learners (engine/population.py): per-member hyper-parameters,
population-based training and the cross-entropy method over weights.

Hyper-parameters. An agent names the scalar config fields a population may vary, with the
range they must stay in (`PartsAgent.tunable`, e.g. ACER's `lr`, `entropy_weight`,
`discount`). `draw_hparams` turns specs such as `lr=1e-4,3e-4,1e-3`,
`lr=loguniform:1e-5:1e-2` or `entropy_weight=normal:0.01:0.005:0:0.1` into one value per
member (the Advanced-SAC seed's `random_params`: a choice `in`, or a truncated normal).

Selection, on the host, from each member's score (the mean of its recent training returns):

- `pbt_plan` (Jaderberg et al. 2017, arXiv:1711.09846, §3 and appendix A.1 "truncation
  selection"): rank the members; each of the bottom `fraction` copies a member drawn
  uniformly from the top `fraction` (weights, optimiser state, hyper-parameters), then
  `perturb` multiplies each of its hyper-parameters by 0.8 or 1.2 at random (their
  "perturb" explore step), clipped to the field's range.
- `cem_plan` + `cem_resample` (the seed's evolver, `evolver_cem_best`: the cross-entropy
  method of Rubinstein 1999 over weights): the top `fraction` are the elites; every weight
  gets the Gaussian of its values over the elites, its standard deviation clipped to at
  most `std_max` (the issue's "std ≤ 1"), and the replaced members (all of them, or only
  the `replace` worst: the seed's `evolver_remove_worst`) draw new weights from it. Their
  hyper-parameters are those of an elite drawn uniformly, perturbed as in PBT.

The device side (`exploit`, `cem_resample`) is pure and jittable; the plans are NumPy with
an RNG drawn from (seed, generation), so a resumed run makes the same choices.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.core.config import ConfigError

PERTURB_FACTORS = (0.8, 1.2)  # Jaderberg et al. 2017, appendix A.1 ("perturb")
# Fields that are one minus a rate, whose scale is the horizon 1/(1 − x): they are perturbed
# through 1 − x (γ 0.99 → 0.992 or 0.988), where x itself times 1.2 would leave the range
# (0.99 → 1.0, clipped) and times 0.8 would cut the horizon from 100 steps to 5 (0.99 → 0.79).
HORIZON_FIELDS = frozenset({"discount", "gae_lambda"})


def _float(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{what}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ConfigError(f"{what}: {text!r} is not a finite number")
    return value


def draw_hparams(
    specs: dict[str, str], size: int, bounds: dict[str, tuple[float, float]], seed: int
) -> dict[str, np.ndarray]:
    """One value per member for each field in `specs` (`field -> spec`):

    - `v1,v2,...`: the values in turn (member i gets value i mod their number);
    - `loguniform:LOW:HIGH`: log-uniform in [LOW, HIGH];
    - `uniform:LOW:HIGH`: uniform;
    - `normal:MEAN:STD[:LOW:HIGH]`: normal truncated to [LOW, HIGH] (default: the field's
      range), redrawn until inside (the seed's `truncated` + `std`).

    Every value must lie in the field's range `bounds[field]`; a field not in `bounds`
    cannot vary. Errors are one-line `ConfigError`s naming the field."""
    rng = np.random.default_rng([seed, 0x5EED])
    out = {}
    for name, spec in specs.items():
        if name not in bounds:
            allowed = ", ".join(sorted(bounds)) or "none"
            raise ConfigError(f"--vary {name}: this agent cannot vary {name!r} (it can: {allowed})")
        low, high = bounds[name]
        what = f"--vary {name}={spec}"
        kind, _, rest = spec.partition(":")
        if kind in ("loguniform", "uniform", "normal"):
            args = [_float(a, what) for a in rest.split(":")] if rest else []
            if kind == "normal":
                if len(args) not in (2, 4):
                    raise ConfigError(f"{what}: expected normal:MEAN:STD[:LOW:HIGH]")
                mean, std = args[:2]
                lo, hi = args[2:] if len(args) == 4 else (low, high)
                if std <= 0 or lo >= hi:
                    raise ConfigError(f"{what}: needs STD > 0 and LOW < HIGH")
                values = np.empty(size)
                for i in range(size):
                    for _ in range(10_000):
                        values[i] = rng.normal(mean, std)
                        if lo <= values[i] <= hi:
                            break
                    else:
                        raise ConfigError(f"{what}: [{lo}, {hi}] is too far out in the tails")
            else:
                if len(args) != 2 or not args[0] < args[1]:
                    raise ConfigError(f"{what}: expected {kind}:LOW:HIGH with LOW < HIGH")
                lo, hi = args
                if kind == "loguniform":
                    if lo <= 0:
                        raise ConfigError(f"{what}: loguniform needs LOW > 0")
                    values = np.exp(rng.uniform(np.log(lo), np.log(hi), size))
                else:
                    values = rng.uniform(lo, hi, size)
        else:
            listed = [_float(v, what) for v in spec.split(",") if v.strip()]
            if not listed:
                raise ConfigError(f"{what}: no values")
            values = np.array([listed[i % len(listed)] for i in range(size)])
        bad = values[(values < low) | (values > high)]
        if bad.size:
            raise ConfigError(f"{what}: {bad[0]:g} is outside {name}'s range [{low:g}, {high:g}]")
        out[name] = values.astype(np.float32)
    return out


class Plan(NamedTuple):
    """One generation's decisions. `parent[i]`: whose weights member i continues from
    (itself when kept); `resampled[i]`: member i draws new weights (CEM); `elites`: the
    members the CEM Gaussian is fitted to (empty for PBT)."""

    parent: np.ndarray  # [P] int
    resampled: np.ndarray  # [P] bool
    elites: np.ndarray  # [E] int


def rank(scores: np.ndarray) -> np.ndarray:
    """Members from best to worst (ties: the lower index first); NaN scores rank last."""
    scores = np.where(np.isnan(scores), -np.inf, np.asarray(scores, np.float64))
    return np.argsort(-scores, kind="stable")


def _count(fraction: float, size: int) -> int:
    return max(1, min(size // 2, round(fraction * size)))


def pbt_plan(scores: np.ndarray, fraction: float, rng: np.random.Generator) -> Plan:
    """Truncation selection: the bottom `fraction` (at least 1, at most half) each copy a
    member drawn uniformly from the top `fraction`."""
    size = len(scores)
    order, k = rank(scores), _count(fraction, size)
    parent = np.arange(size)
    top, bottom = order[:k], order[size - k :]
    parent[bottom] = rng.choice(top, size=k)
    return Plan(parent, np.zeros(size, bool), np.zeros(0, np.int64))


def cem_plan(scores: np.ndarray, fraction: float, replace: int, rng: np.random.Generator) -> Plan:
    """The top `fraction` (at least 2, or all of a population smaller than 2) are the
    elites: one elite's Gaussian has no spread, and its resampled members would be its
    clones. The `replace` worst members (0: all) are resampled and take the
    hyper-parameters of an elite drawn uniformly."""
    size = len(scores)
    order = rank(scores)
    elites = np.sort(order[: min(size, max(2, round(fraction * size)))])
    replaced = order if replace == 0 else order[size - replace :]
    parent = np.arange(size)
    parent[replaced] = rng.choice(elites, size=len(replaced))
    resampled = np.zeros(size, bool)
    resampled[replaced] = True
    return Plan(parent, resampled, elites)


def perturb(
    hparams: dict[str, np.ndarray],
    plan: Plan,
    bounds: dict[str, tuple[float, float]],
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """The hyper-parameters after `plan`: every member that took a parent's (copied or
    resampled) gets the parent's values times 0.8 or 1.2 (each field drawn on its own; a
    horizon field, `HORIZON_FIELDS`, 1 − (1 − x) times that), clipped to the field's range;
    the others keep theirs."""
    changed = (plan.parent != np.arange(len(plan.parent))) | plan.resampled
    out = {}
    for name, values in hparams.items():
        new = np.asarray(values, np.float64)[plan.parent]
        factors = rng.choice(PERTURB_FACTORS, size=len(new))
        moved = 1.0 - (1.0 - new) * factors if name in HORIZON_FIELDS else new * factors
        new = np.where(changed, np.clip(moved, *bounds[name]), values)
        out[name] = new.astype(np.float32)
    return out


def exploit(tree, parent):
    """Member i's rows of the stacked pytree `tree` become `parent[i]`'s (a gather along the
    population axis; a kept member gathers its own row). Pure."""
    return jax.tree.map(lambda x: jnp.take(x, parent, axis=0), tree)


def cem_resample(params, elites, resampled, noise, std_max: float):
    """Resample the weights of the members marked in `resampled` from the per-weight Gaussian
    of the elites: w_i = mean_e(w) + min(std_e(w), std_max)·noise_i (std over the elites,
    the population standard deviation, ddof 0). `params`: stacked `[P, ...]` leaves;
    `elites`: `[E]` member indices; `resampled`: `[P]` bool; `noise`: like `params`,
    standard normal. Pure."""

    def leaf(w, z):
        e = jnp.take(w, elites, axis=0)
        mean, std = jnp.mean(e, axis=0), jnp.minimum(jnp.std(e, axis=0), std_max)
        mask = resampled.reshape((-1,) + (1,) * (w.ndim - 1))
        return jnp.where(mask, mean[None] + std[None] * z, w).astype(w.dtype)

    return jax.tree.map(leaf, params, noise)


def normal_like(key, tree):
    """Standard normal noise shaped like `tree` (one key per leaf)."""
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(key, len(leaves))
    noise = [jax.random.normal(k, x.shape, jnp.float32) for k, x in zip(keys, leaves, strict=True)]
    return jax.tree.unflatten(treedef, noise)


class Evolver:
    """The host side of `--evolve` (module docstring): when a generation is due and what it
    does. Generation g happens at the first iteration end with env steps (per member) ≥
    g·`every` at which every member has a score; its choices are drawn from (seed, g), so
    a resumed run repeats them. `step` returns the new state and one lineage record per
    member."""

    def __init__(
        self,
        mode: str,
        every: int,
        fraction: float,
        seed: int,
        bounds: dict[str, tuple[float, float]],
        *,
        replace: int = 0,
        std_max: float = 1.0,
        generation: int = 0,
    ):
        if mode not in ("pbt", "cem"):
            raise ValueError(f"unknown evolution mode {mode!r} (pbt or cem)")
        self.mode, self.every, self.fraction, self.seed = mode, every, fraction, seed
        self.bounds, self.replace, self.std_max = bounds, replace, std_max
        self.generation = generation  # the last generation done

    def due(self, env_steps: int) -> bool:
        return env_steps // self.every > self.generation

    @property
    def next_due(self) -> int:
        """The env step (per member) at which the next generation is due."""
        return (self.generation + 1) * self.every

    def step(self, pop, state, scores, env_steps: int):
        """(state, records); records is None when postponed (a member has no score yet)."""
        scores = np.asarray(scores, np.float64)
        if np.isnan(scores).any():
            return state, None
        g = env_steps // self.every
        rng = np.random.default_rng([self.seed, g, 0xE701])
        if self.mode == "pbt":
            plan = pbt_plan(scores, self.fraction, rng)
        else:
            plan = cem_plan(scores, self.fraction, self.replace, rng)
        hparams = perturb(pop.hparams, plan, self.bounds, rng)
        key = jax.random.fold_in(jax.random.PRNGKey(self.seed), g)
        state = pop.evolve(state, plan, hparams, key, self.std_max)
        self.generation = g
        elites = set(plan.elites.tolist())
        records = [
            {
                "env_steps": env_steps,
                "generation": g,
                "member": i,
                "parent": int(plan.parent[i]),
                "resampled": int(plan.resampled[i]),
                "elite": int(i in elites),
                "score": float(scores[i]),
                **{f"hp_{k}": float(f"{v[i]:.7g}") for k, v in hparams.items()},
            }
            for i in range(len(scores))
        ]
        return state, records
