"""`--show-settings`: the resolved settings as `key = value  # origin` lines (TOML spelling)."""
from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import Any, List, Sequence, Type

from .config import KEYS, ORIGIN_FIELDS, PER_PROJECT, RUN_WIDE, Settings
from .pipeline.root import find_project_root
from .rule import Rule

ATTR_TO_KEY = {attr: key for key, (attr, _, _) in KEYS.items()}
ATTR_TO_KEY.update(rule_options="rules", ignore_noqa="ignore-noqa")
HIDDEN = ("project_root", "config_path") + ORIGIN_FIELDS


def origin(settings: Settings, attr: str) -> str:
    """Where a setting's value came from: `file:key` (several joined by ` + ` when they add up), the
    command line, or the default."""
    return settings.origins.get(attr) or "default"


def scope(attr: str) -> str:
    if attr in RUN_WIDE:
        return "  (run-wide)"
    if attr in PER_PROJECT:
        return "  (per project)"
    return ""


def _value(value: Any) -> str:
    if value is None:
        return "(default)"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def settings_lines(settings: Settings, rules: Sequence[Type[Rule]], path: str) -> List[str]:
    config = settings.config_path
    lines = [f'Settings path: "{config}"' if config else "Settings path: none (defaults)"]
    lines += [f'  extends: "{extended}"' for extended in settings.extends]
    lines += [f'Relative paths from: "{os.path.abspath(settings.project_root)}"',
              f'Project root: "{find_project_root([path], settings.root_config)}"', ""]
    for attr, value in asdict(settings).items():
        if attr in HIDDEN:
            continue
        key = ATTR_TO_KEY.get(attr, attr.replace("_", "-"))
        lines.append(f"{key} = {_value(value)}  # {origin(settings, attr)}{scope(attr)}")
    lines.append("")
    lines.append(f"enabled rules = {json.dumps([r.code for r in rules])}")
    return lines
