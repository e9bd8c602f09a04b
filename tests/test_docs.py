"""The documentation (mkdocs.yml, docs/): the README stays a front page that shares its
commands with the site, every agent has a page with its generated reference, and, in the slow
tier, the site builds with warnings as errors, lists every public name of `agents.losses`,
`networks` and `replay`, and the agent tutorial runs as written and learns."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import networks
import replay
from agents import losses
from agents.core.registry import agent_names

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def nav_files(nav) -> list[str]:
    out = []
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            out += nav_files(value) if isinstance(value, list) else [value]
    return out


def mkdocs_config() -> dict:
    class Loader(yaml.SafeLoader):  # mkdocs.yml may hold !tags; none are read here
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)


def test_readme_is_a_front_page():
    assert len(README.splitlines()) <= 300


def test_getting_started_includes_the_readmes_commands():
    """The site's first commands are the README's own lines (a snippet), not a copy: the
    README marks them and the page includes them."""
    page = (ROOT / "docs" / "getting-started.md").read_text()
    for section in ("commands", "next"):
        assert f"<!-- --8<-- [start:{section}] -->" in README
        assert f"<!-- --8<-- [end:{section}] -->" in README
        assert f'--8<-- "README.md:{section}"' in page
    start = README.index("[start:commands]")
    assert README.index("```bash") > start  # both command blocks are inside the snippet
    assert README.index("```bash", README.index("```bash") + 1) < README.index("[end:commands]")


def test_every_nav_page_exists_and_every_agent_has_its_reference():
    files = nav_files(mkdocs_config()["nav"])
    for name in files:
        assert (ROOT / "docs" / name).is_file(), name
    pages = "\n".join((ROOT / "docs" / f).read_text() for f in files if f.startswith("agents/"))
    for name in agent_names():
        assert f"<!-- agent-reference: {name} -->" in pages, name


# ------------------------------------------------------------------ slow: build and run


@pytest.mark.slow
def test_site_builds_strict_and_lists_every_public_name(tmp_path):
    site = tmp_path / "site"
    # not `-q`: it hides the warnings from --strict too (a quiet build never fails on them)
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", site],
        cwd=ROOT, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    for page, module in (("losses", losses), ("networks", networks), ("replay", replay)):
        html = (site / "api" / page / "index.html").read_text()
        prefix = re.escape(module.__name__)
        ids = set(re.findall(rf'id="{prefix}\.(\w+)"', html))
        assert set(module.__all__) <= ids, (page, sorted(set(module.__all__) - ids))
    flags = (site / "agents" / "pqn" / "index.html").read_text()
    assert "--td-lambda" in flags and "pqn-minatar" in flags  # the generated reference


@pytest.mark.slow
def test_the_agent_tutorial_runs_as_written_and_learns(tmp_path):
    """docs/write-an-agent.md's python blocks, concatenated, are the whole script: run in a
    fresh process from a folder outside the clone, it trains its agent and evaluates it."""
    page = (ROOT / "docs" / "write-an-agent.md").read_text()
    script = tmp_path / "my_vtrace.py"
    script.write_text("\n".join(re.findall(r"```python\n(.*?)```", page, re.S)))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "runs" / "my-vtrace" / "summary.json").read_text())
    assert summary["env_steps"] >= 500_000
    assert summary["eval_return_mean"] >= 300.0, summary["eval_return_mean"]  # 403.3 measured
