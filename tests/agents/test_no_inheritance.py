"""Agents are data plus pure functions (issue 66): no class in agents/ derives from another class
defined in agents/, but for the configs (frozen dataclasses, whose fields a config of a family
shares: `Config`, `ReplayWindow`, `OffPolicyConfig`, `OnPolicyConfig`). A learner that needs
another's pieces holds it or calls its functions (agents/r2d1/learner.py, agents/acer/
continuous.py, agents/sac/recurrent.py); a base class with override points does not come back.
Read from the source, nothing imported."""

from __future__ import annotations

import ast
from pathlib import Path

AGENTS = Path(__file__).resolve().parents[2] / "agents"


def _classes():
    """(file, class name, base names) of every class in agents/."""
    for path in sorted(AGENTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
                yield path.relative_to(AGENTS.parent), node.name, bases


def _config_classes(classes) -> set[str]:
    """`Config` and every class of agents/ that derives from it, transitively."""
    configs, grew = {"Config"}, True
    while grew:
        new = {name for _, name, bases in classes if set(bases) & configs} - configs
        configs |= new
        grew = bool(new)
    return configs


def _derived(classes) -> list[str]:
    """The classes (`_classes`) that derive from a class of the same tree, but the configs."""
    own = {name for _, name, _ in classes}
    configs = _config_classes(classes)
    return [
        f"{path}: {name}({', '.join(bases)})"
        for path, name, bases in classes
        if name not in configs and set(bases) & own
    ]


def test_no_class_of_agents_derives_from_another_but_the_configs():
    classes = list(_classes())
    assert not _derived(classes), _derived(classes)
    # The check reads what it should: the learners and the configs are found.
    own = {name for _, name, _ in classes}
    assert {"DQNLearner", "SACLearner", "ACERGaussianLearner", "ReactorLearner"} <= own
    configs = _config_classes(classes)
    assert {"SACConfig", "PPOConfig", "A2CConfig", "R2D1Config", "ReplayWindow"} <= configs


def test_the_check_catches_a_learner_deriving_from_another(tmp_path, monkeypatch):
    """The check fails on the shape it forbids (a subclass of a learner of agents/)."""
    (tmp_path / "a.py").write_text("class Base:\n    pass\n\nclass Child(Base):\n    pass\n")
    monkeypatch.setattr(f"{__name__}.AGENTS", tmp_path)
    assert _derived(list(_classes())) == [f"{tmp_path.name}/a.py: Child(Base)"]


def _engine_imports():
    """`file: module` for every import of the engine (or of experiments/, benchmarks/) in
    agents/, at any depth of the file."""
    outside = ("engine", "experiments", "benchmarks")
    for path in sorted(AGENTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] in outside:
                    yield f"{path.relative_to(AGENTS.parent)}: {name}"


def test_agents_never_import_the_engine():
    """An agent is its config, presets and `make`, registered as data (`AgentSpec`); the
    engine gives it the training protocol (`engine.driver.agent_class`). Nothing in agents/
    imports the engine, the scripts or the benchmarks, so the agents and their losses can be
    imported, and read, without them."""
    assert list(_engine_imports()) == []


def test_the_engine_import_check_sees_an_import(tmp_path, monkeypatch):
    """The check above can fail: a file of agents/ that imports the engine, even inside a
    function, is named."""
    (tmp_path / "agents" / "x").mkdir(parents=True)
    (tmp_path / "agents" / "x" / "__init__.py").write_text(
        "def f():\n    from engine.driver import agent_class\n"
    )
    monkeypatch.setitem(globals(), "AGENTS", tmp_path / "agents")
    assert list(_engine_imports()) == ["agents/x/__init__.py: engine.driver"]
