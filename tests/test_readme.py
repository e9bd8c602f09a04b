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
