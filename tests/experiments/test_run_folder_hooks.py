"""A run folder is data, never code: the hook names a config.json holds (`reshape_reward`,
`preprocess_obs` of PPO and A2C) are never imported when the folder is evaluated, resumed or
loaded; hooks come from the command line only. And no hook is called before it is checked:
a name that is not a plain function of the module named, or whose signature cannot take the
arguments the agent passes, is refused when the config is built.

The planted run folder is a real tiny PPO run with a `hook.py` whose import and whose
function both write a marker file, placed where Python would import it from (a package on
sys.path, under the working directory); each test shows at its end that the module does
import and write the marker, so that the absence of the marker before proves something."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from agents.core.config import ConfigError, flag
from agents.ppo.config import PPOConfig
from engine.common import load_run, trained_hooks
from experiments import evaluate, train
from tests.experiments import marker_hooks

TINY_PPO = [
    "--agent", "ppo", "--num-envs", "2", "--trace-len", "8", "--epochs", "1",
    "--num-minibatches", "1", "--hidden", "8", "--eval-episodes", "0", "--no-progress",
    "--num-devices", "1", "--checkpoint-every", "16",
]  # fmt: skip
HOOK_PY = """\
import pathlib
MARKER = pathlib.Path({marker!r})
with MARKER.open("a") as f:
    f.write("imported\\n")


def fn(obs, action=None, reward=None, done=None):
    with MARKER.open("a") as f:
        f.write("called\\n")
    return obs if reward is None else reward
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A tiny PPO CartPole run (2 iterations, checkpoints at 16 and 32 env steps)."""
    run_dir = tmp_path_factory.mktemp("hooks") / "ppo"
    train.main([*TINY_PPO, "--run-dir", str(run_dir), "--total-steps", "32"])
    return run_dir


class Planted:
    """A copy of the trained run at <cwd>/<package>/evil with a hostile hook.py, the cwd on
    sys.path: `module` imports it (and writes `marker`)."""

    def __init__(self, root: Path, trained: Path):
        self.package = f"plant_{uuid.uuid4().hex[:12]}"
        self.run_dir = root / self.package / "evil"
        shutil.copytree(trained, self.run_dir)
        self.marker = root / "marker.txt"
        (self.run_dir / "hook.py").write_text(HOOK_PY.format(marker=str(self.marker)))
        self.module = f"{self.package}.evil.hook"
        self.hook = f"{self.module}:fn"

    def name_hook(self, field: str, value: str | None = None, *, legacy: bool = False):
        """Write `field: value` (default: the hostile hook) into config.json's agent_config;
        `legacy`: in the flat layout of earlier versions ({"args": ..., "agent_config"})."""
        path = self.run_dir / "config.json"
        data = json.loads(path.read_text())
        data["agent_config"][field] = self.hook if value is None else value
        if legacy:
            data["args"] = data.pop("run")
        path.write_text(json.dumps(data))

    def assert_untouched(self):
        assert not self.marker.exists(), self.marker.read_text()
        assert self.module not in sys.modules

    def assert_importable(self):
        """The control: the module the config names does import (and marks) from here."""
        self.assert_untouched()
        try:
            importlib.import_module(self.module)
            assert self.marker.read_text() == "imported\n"
        finally:
            for name in [m for m in sys.modules if m.startswith(self.package)]:
                del sys.modules[name]


@pytest.fixture
def planted(trained, tmp_path, monkeypatch) -> Planted:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HOOK_MARKER", str(tmp_path / "user_hooks.txt"))
    return Planted(tmp_path, trained)


def _user_marks(tmp_path: Path) -> list[str]:
    path = tmp_path / "user_hooks.txt"
    return path.read_text().split() if path.exists() else []


def _one_line(err) -> str:
    message = str(err.value)
    assert message.startswith("error: ") and "\n" not in message, message
    return message


# --------------------------------------------------------------------------- loading


@pytest.mark.parametrize("legacy", [False, True], ids=["layout", "legacy-layout"])
def test_loading_a_run_folder_imports_no_hook(planted, legacy):
    """load_run (train --resume, evaluate, population members) leaves hooks out; the names
    stay readable, as data."""
    planted.name_hook("reshape_reward")
    planted.name_hook("preprocess_obs", legacy=legacy)
    args = load_run(planted.run_dir)
    planted.assert_untouched()
    assert args.config.reshape_reward is None and args.config.preprocess_obs is None
    assert trained_hooks(planted.run_dir) == {
        "reshape_reward": planted.hook,
        "preprocess_obs": planted.hook,
    }
    planted.assert_importable()


def test_a_saved_hook_that_is_not_a_name_is_a_one_line_error(planted):
    planted.name_hook("reshape_reward", ["os:system"])
    with pytest.raises(ValueError, match=r"config.json.*reshape_reward.*not a string"):
        load_run(planted.run_dir)


# --------------------------------------------------------------------------- evaluate


def test_evaluate_acts_without_a_saved_reshape_reward(planted, capsys):
    planted.name_hook("reshape_reward")
    result = evaluate.main([planted.package + "/evil", "--episodes", "1", "--num-envs", "1"])
    planted.assert_untouched()
    assert result["episodes"] == 1 and result["checkpoint_step"] == 32
    notes = [line for line in capsys.readouterr().err.splitlines() if "--reshape-reward" in line]
    assert len(notes) == 1 and repr(planted.hook) in notes[0], notes
    planted.assert_importable()


def test_evaluate_needs_a_saved_preprocess_obs_given_again(planted, tmp_path):
    planted.name_hook("preprocess_obs")
    run = planted.package + "/evil"
    with pytest.raises(SystemExit) as err:
        evaluate.main([run, "--episodes", "1", "--num-envs", "1"])
    planted.assert_untouched()
    message = _one_line(err)
    assert "--preprocess-obs" in message and repr(planted.hook) in message
    planted.assert_untouched()
    # Given on the command line, the user's hook is imported and used in its place.
    user = "tests.experiments.marker_hooks:identity"
    result = evaluate.main([run, "--episodes", "1", "--num-envs", "1", "--preprocess-obs", user])
    assert result["episodes"] == 1 and "identity" in _user_marks(tmp_path)
    planted.assert_importable()


def test_evaluate_refusal_is_the_only_stderr_line_when_both_hooks_are_saved(planted, capsys):
    """The note about a saved --reshape-reward comes only with an evaluation that goes on:
    a refusal (here --preprocess-obs not given again) is the one line on stderr."""
    planted.name_hook("reshape_reward")
    planted.name_hook("preprocess_obs")
    with pytest.raises(SystemExit) as err:
        evaluate.main([planted.package + "/evil", "--episodes", "1", "--num-envs", "1"])
    assert "--preprocess-obs" in _one_line(err)
    assert capsys.readouterr().err == ""
    planted.assert_untouched()


def test_evaluate_refuses_a_preprocess_obs_the_run_was_trained_without(trained, tmp_path):
    with pytest.raises(SystemExit) as err:
        evaluate.main([str(trained), "--preprocess-obs", "tests.experiments.marker_hooks:identity"])
    assert "trained without --preprocess-obs" in _one_line(err)


# --------------------------------------------------------------------------- resume


@pytest.mark.parametrize("field", ["reshape_reward", "preprocess_obs"])
def test_resume_refuses_a_saved_hook_not_given_again(planted, field):
    planted.name_hook(field)
    before = {p: p.stat().st_mtime_ns for p in planted.run_dir.rglob("*") if p.is_file()}
    with pytest.raises(SystemExit) as err:
        train.main(["--resume", planted.package + "/evil", "--total-steps", "48"])
    planted.assert_untouched()
    message = _one_line(err)
    assert flag(field) in message and repr(planted.hook) in message
    after = {p: p.stat().st_mtime_ns for p in planted.run_dir.rglob("*") if p.is_file()}
    assert after == before  # nothing written: refused before the run folder is touched
    planted.assert_importable()


def test_resume_with_the_hook_given_again_uses_the_users(planted, tmp_path):
    planted.name_hook("reshape_reward")
    user = "tests.experiments.marker_hooks:bonus"
    summary = train.main([
        "--resume", planted.package + "/evil", "--total-steps", "48", "--reshape-reward", user,
        "--no-progress", "--num-devices", "1",
    ])  # fmt: skip
    planted.assert_untouched()
    assert summary["env_steps"] == 48 and "bonus" in _user_marks(tmp_path)
    saved = json.loads((planted.run_dir / "config.json").read_text())["agent_config"]
    assert saved["reshape_reward"] == user
    planted.assert_importable()


def test_resume_refuses_a_hook_the_run_was_trained_without(trained, tmp_path):
    with pytest.raises(SystemExit) as err:
        train.main([
            "--resume", str(trained), "--reshape-reward", "tests.experiments.marker_hooks:bonus",
        ])  # fmt: skip
    assert "trained without --reshape-reward" in _one_line(err)
    assert _user_marks(tmp_path) == []


# --------------------------------------------------------------------------- checked first

HERE = "tests.experiments.marker_hooks"


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("reshape_reward", "os:system", "not a Python function"),
        ("preprocess_obs", "builtins:print", "not a Python function"),
        ("reshape_reward", f"{HERE}:Shaper", "not a Python function"),
        ("reshape_reward", f"{HERE}:two_args", "cannot take"),
        ("preprocess_obs", f"{HERE}:bonus", "cannot take"),
        ("preprocess_obs", f"{HERE}:keyword_only", "cannot take"),
        ("reshape_reward", f"{HERE}:shaped", "defined in tests.agents.ppo_hooks"),
        ("preprocess_obs", "os.path:join", "defined in posixpath"),
        ("reshape_reward", f"{HERE}:_nothing", "has no function"),
        ("reshape_reward", f"{HERE}.x:y:z", "module:function"),
    ],
)
def test_a_hook_is_refused_when_the_config_is_built_without_being_called(
    field, value, needle, tmp_path, monkeypatch
):
    monkeypatch.setenv("HOOK_MARKER", str(tmp_path / "user_hooks.txt"))
    with pytest.raises(ConfigError) as err:
        PPOConfig(**{field: value})
    message = str(err.value)
    assert message.startswith(flag(field) + " ") and needle in message, message
    assert "\n" not in message
    with pytest.raises(SystemExit) as exit_info:  # the CLI: before a run folder is made
        train.main([*TINY_PPO, "--run-dir", str(tmp_path / "run"), f"{flag(field)}={value}"])
    assert needle in _one_line(exit_info)
    assert not (tmp_path / "run").exists()
    assert _user_marks(tmp_path) == []


@pytest.mark.parametrize(
    ("field", "fn"),
    [("reshape_reward", marker_hooks.two_args), ("preprocess_obs", marker_hooks.Shaper)],
)
def test_a_python_callable_with_the_wrong_signature_is_refused_uncalled(
    field, fn, tmp_path, monkeypatch
):
    monkeypatch.setenv("HOOK_MARKER", str(tmp_path / "user_hooks.txt"))
    with pytest.raises(ConfigError, match=f"{flag(field)} .*cannot take"):
        PPOConfig(**{field: fn})
    assert _user_marks(tmp_path) == []


def test_a_sweep_gives_a_resumed_run_its_hooks_again(tmp_path):
    from experiments.sweep import Run, train_argv

    hook = "tests.experiments.marker_hooks:bonus"
    run = Run("r", "ppo", "CartPole-v1", 0, flags=(("reshape_reward", hook), ("lr", 0.01)))
    argv = train_argv(run, tmp_path / "r", resuming=True)
    assert argv[argv.index("--reshape-reward") + 1] == hook and "--lr" not in argv
