"""Issue 67: a SAC population's first replay updates compute NaN under the tests' XLA:CPU flags
(LLVM -O0) when the update keeps a member's old critic output bias where it is masked off.

Run from the repository root: `python docs/results/sac-o0-nan/repro.py`. Each cell is a
subprocess (XLA_FLAGS are read once per process) training 3 SAC seeds on Pendulum-v1 for
32 steps with the population's masked updates forced on (`_in_lock_step` -> False) and the
member update's keep-select `where(on, new, old)` applied to one learner leaf (or none).
"""

import os
import subprocess
import sys
import tempfile

O0 = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
FLAGS = {"tests' -O0": O0, "default": ""}
LEAF = "['critic']['params']['members']['Dense_1']['bias']"
CELLS = {"keep critic Dense_1 bias": LEAF, "keep no leaf": "<none>"}
ARGV = (
    "--agent sac --env Pendulum-v1 --num-envs 2 --trace-len 4 --batch-size 8 --buffer-size 400"
    " --hidden 8 --start-train-at 16 --total-steps 32 --num-seeds 3 --no-progress"
    " --eval-episodes 0 --num-devices 1"
).split()


def child(leaf: str, run_dir: str) -> None:
    import jax
    import jax.numpy as jnp

    from engine.population import Population
    from experiments import train

    def member_update(self, learner, hparams, replay, on, masked=True):
        new, replay, m = self.members[0].replay_update(learner, replay, None, hparams)

        def keep(path, n, o):
            return jnp.where(on, n, o) if jax.tree_util.keystr(path).endswith(leaf) else n

        return jax.tree_util.tree_map_with_path(keep, new, learner), replay, (m, on)

    Population._in_lock_step = lambda self: False  # masked updates, as before 4dda3d9
    Population._member_update = member_update
    train.main([*ARGV, "--run-dir", run_dir])


def main() -> None:
    import jax

    print(f"jax {jax.__version__}")
    for name, flags in FLAGS.items():
        for cell, leaf in CELLS.items():
            env = {**os.environ, "PYTHONPATH": os.getcwd(), "JAX_PLATFORMS": "cpu"}
            env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count=1 {flags}".strip()
            with tempfile.TemporaryDirectory() as tmp:
                cmd = [sys.executable, __file__, "child", leaf, f"{tmp}/run"]
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            last = (proc.stderr if proc.returncode else proc.stdout).strip().splitlines()[-1]
            print(f"{name:>10} | {cell:<24} | {'NaN' if 'non-finite' in last else 'ok '} | {last}")


if __name__ == "__main__":
    child(*sys.argv[2:]) if sys.argv[1:2] == ["child"] else main()
