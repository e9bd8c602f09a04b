"""mkdocs hook (mkdocs.yml `hooks:`): generated sections of the documentation pages.

* `<!-- agent-reference: NAME -->` becomes the agent's flags (from its config dataclass: each
  field, its default and its docstring, the text of `--help`) and its presets (the flags each
  one sets), so the pages cannot drift from the code.
* `<!-- agent-table -->` becomes the table of registered agents.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import sys
import textwrap
from pathlib import Path

MARK = re.compile(r"<!-- agent-reference: ([a-z0-9-]+) -->")
TABLE = "<!-- agent-table -->"


def field_docs(cls) -> dict[str, str]:
    """`field -> docstring` of a dataclass: the string literal after each annotated field,
    over the class and its bases (what tyro shows as `--help`)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        if not isinstance(body, ast.ClassDef):
            continue
        for node, nxt in zip(body.body, body.body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def value_text(value) -> str:
    if isinstance(value, tuple):
        return " ".join(str(v) for v in value) or "(none)"
    return str(value)


def agent_reference(name: str) -> str:
    from agents.core.config import flag
    from agents.core.registry import get_agent

    spec = get_agent(name)
    docs = field_docs(spec.config_cls)
    lines = [
        f"### Flags of `--agent {name}`",
        "",
        f"The fields of `{spec.config_cls.__module__}.{spec.config_cls.__name__}`, with the "
        "run options shared by every agent (`python -m experiments.train --help`) not repeated "
        "here. The default is the config's; a preset overrides it.",
        "",
        "| flag | default | meaning |",
        "|---|---|---|",
    ]
    for f in dataclasses.fields(spec.config_cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        lines.append(
            f"| `{flag(f.name)}` | `{cell(value_text(default))}` | {cell(docs.get(f.name, ''))} |"
        )
    lines += ["", f"### Presets of `--agent {name}`", ""]
    default = spec.default_preset
    lines.append(f"Without `--preset`, the agent trains with `{default}`." if default else "")
    lines += ["", "| preset | sets |", "|---|---|"]
    for preset, values in spec.presets.items():
        sets = ", ".join(f"`{flag(k)} {cell(value_text(v))}`" for k, v in values.items())
        lines.append(f"| `{preset}` | {sets or '(the defaults)'} |")
    return "\n".join(lines) + "\n"


def agent_table() -> str:
    from agents.core.registry import all_specs

    lines = ["| `--agent` | what it is | default preset | presets |", "|---|---|---|---|"]
    for spec in all_specs():
        presets = ", ".join(f"`{p}`" for p in spec.presets)
        lines.append(
            f"| `{spec.name}` | {cell(spec.description)} | `{spec.default_preset}` | {presets} |"
        )
    return "\n".join(lines) + "\n"


def on_config(config):
    """The repository root on the import path, so that the hooks read the agents' configs."""
    root = str(Path(config.config_file_path).resolve().parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    return config


def on_page_markdown(markdown: str, page, config, files) -> str:
    markdown = MARK.sub(lambda m: agent_reference(m.group(1)), markdown)
    if TABLE in markdown:
        markdown = markdown.replace(TABLE, agent_table())
    return markdown
