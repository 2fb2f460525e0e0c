"""`--show-settings`: the resolved settings as `key = value  # origin` lines (TOML spelling)."""
from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import Any, Dict, List, Sequence, Type

from .config import KEYS, ConfigError, Settings, load_table
from .rule import Rule

ATTR_TO_KEY = {attr: key for key, (attr, _, _) in KEYS.items()}
ATTR_TO_KEY.update(rule_options="rules", ignore_noqa="ignore-noqa")
HIDDEN = ("project_root", "config_path")


def origins(settings: Settings, cli_keys: Sequence[str]) -> Dict[str, str]:
    """Settings attribute -> where its value came from: the command line, a config file, or the default."""
    from_file: List[str] = []
    if settings.config_path:
        try:
            table = load_table(settings.config_path)
        except ConfigError:
            table = {}
        from_file = [KEYS[k][0] if k in KEYS else "rule_options" for k in table if k in KEYS or k == "rules"]
    out = {}
    for attr in asdict(settings):
        if attr in cli_keys:
            out[attr] = "command line"
        elif attr in from_file:
            out[attr] = settings.config_path or ""
        else:
            out[attr] = "default"
    return out


def _value(value: Any) -> str:
    if value is None:
        return "(default)"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def settings_lines(settings: Settings, rules: Sequence[Type[Rule]], cli_keys: Sequence[str]) -> List[str]:
    where = origins(settings, cli_keys)
    config = settings.config_path
    lines = [f'Settings path: "{config}"' if config else "Settings path: none (defaults)",
             f'Project root: "{os.path.abspath(settings.project_root)}"', ""]
    for attr, value in asdict(settings).items():
        if attr in HIDDEN:
            continue
        lines.append(f"{ATTR_TO_KEY.get(attr, attr.replace('_', '-'))} = {_value(value)}  # {where[attr]}")
    lines.append("")
    lines.append(f"enabled rules = {json.dumps([r.code for r in rules])}")
    return lines
