"""The README's code example runs as written."""

import re
from pathlib import Path

import jax.numpy as jnp


def test_readme_python_example_runs():
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README has no python example"
    scope: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    assert scope["q_ret"].shape == (20, 32)
    assert jnp.isfinite(scope["loss"])


def test_ci_runs_both_tiers_of_the_readme_test_command():
    """The README's test command runs `-m "not slow"` and CI then runs `-m slow` with the same
    workers: together every collected test runs, none twice."""
    root = Path(__file__).resolve().parents[1]
    commands = re.findall(r"```bash\n(.*?)```", (root / "README.md").read_text(), re.S)
    assert '-m "not slow"' in commands[1] and "pytest" in commands[1]
    ci = (root / ".ci" / "run").read_text()
    slow = re.search(r"^\.venv/bin/python -m pytest -q -n 2 --dist worksteal -m slow$", ci, re.M)
    assert slow and ci.index('bash -euo pipefail -c "$tests"') < slow.start()
