"""Configuration: `[tool.ascend-lint]` in pyproject.toml or `.ascend-lint.yaml`, validated into Settings."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

YAML_NAMES = (".ascend-lint.yaml", ".ascend-lint.yml")
TARGETS = ("auto", "npu")


class ConfigError(Exception):
    """Bad configuration: reported with exit code 2."""


@dataclass
class Settings:
    select: Optional[List[str]] = None  # None: the default set (every non-preview rule)
    ignore: List[str] = field(default_factory=list)
    extend_select: List[str] = field(default_factory=list)
    preview: bool = False
    target: str = "auto"
    exclude: Optional[List[str]] = None  # None: the built-in default excludes
    extend_exclude: List[str] = field(default_factory=list)
    per_file_ignores: Dict[str, List[str]] = field(default_factory=dict)
    rule_options: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    respect_gitignore: bool = True
    force_exclude: bool = False
    fix: bool = False
    unsafe_fixes: bool = False
    extend_safe_fixes: List[str] = field(default_factory=list)
    extend_unsafe_fixes: List[str] = field(default_factory=list)
    cache_dir: Optional[str] = None
    runtime_migration: Any = "auto"  # "auto" | True | False (project model: which modules run migrated)
    migrating_modules: List[str] = field(default_factory=list)  # more modules whose import applies migration
    output_format: str = "full"
    project_root: str = "."
    config_path: Optional[str] = None

    def override(self, **changes: Any) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _codes_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and _str_list(v) for k, v in value.items())


# config key -> (Settings attribute, validator, what is expected)
KEYS: Dict[str, Tuple[str, Any, str]] = {
    "select": ("select", _str_list, "a list of rule codes or prefixes"),
    "ignore": ("ignore", _str_list, "a list of rule codes or prefixes"),
    "extend-select": ("extend_select", _str_list, "a list of rule codes or prefixes"),
    "preview": ("preview", lambda v: isinstance(v, bool), "true or false"),
    "target": ("target", lambda v: v in TARGETS, "one of " + ", ".join(repr(t) for t in TARGETS)),
    "exclude": ("exclude", _str_list, "a list of glob patterns"),
    "extend-exclude": ("extend_exclude", _str_list, "a list of glob patterns"),
    "per-file-ignores": ("per_file_ignores", _codes_map, "a table of glob = [codes]"),
    "respect-gitignore": ("respect_gitignore", lambda v: isinstance(v, bool), "true or false"),
    "force-exclude": ("force_exclude", lambda v: isinstance(v, bool), "true or false"),
    "fix": ("fix", lambda v: isinstance(v, bool), "true or false"),
    "unsafe-fixes": ("unsafe_fixes", lambda v: isinstance(v, bool), "true or false"),
    "extend-safe-fixes": ("extend_safe_fixes", _str_list, "a list of rule codes or prefixes"),
    "extend-unsafe-fixes": ("extend_unsafe_fixes", _str_list, "a list of rule codes or prefixes"),
    "cache-dir": ("cache_dir", lambda v: isinstance(v, str), "a directory path"),
    "runtime-migration": ("runtime_migration", lambda v: v is True or v is False or v == "auto",
                          "\"auto\", true or false"),
    "migrating-modules": ("migrating_modules", _str_list, "a list of module names"),
    "output-format": ("output_format", lambda v: isinstance(v, str), "an output format name"),
}


def find_config(start: str) -> Optional[str]:
    """The nearest `.ascend-lint.yaml` or pyproject.toml with `[tool.ascend-lint]`, from `start` up."""
    directory = os.path.abspath(start)
    while True:
        for name in YAML_NAMES:
            candidate = os.path.join(directory, name)
            if os.path.isfile(candidate):
                return candidate
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate) and _has_tool_table(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _has_tool_table(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError:
        return False
    return b"ascend-lint" in raw and "ascend-lint" in _load_toml(path, raw).get("tool", {})


def _load_toml(path: str, raw: bytes) -> Dict[str, Any]:
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def load_table(path: str) -> Dict[str, Any]:
    """The raw ascend-lint table of a config file (never executes code: TOML, or YAML safe_load)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration file: {exc.strerror or exc}") from None
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            data = yaml.safe_load(raw.decode("utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: invalid YAML: {exc}") from None
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of settings at the top level")
        return data
    table = _load_toml(path, raw).get("tool", {}).get("ascend-lint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.ascend-lint] must be a table")
    return table


def settings_from_table(table: Dict[str, Any], path: str, base: Optional[Settings] = None) -> Settings:
    """Validate a raw table into Settings; unknown keys and wrong types raise ConfigError."""
    settings = replace(base) if base else Settings()
    settings.config_path = path
    settings.project_root = os.path.dirname(os.path.abspath(path))
    for key, value in table.items():
        if key == "rules":
            settings.rule_options = _rule_options(value, path)
            continue
        if key not in KEYS:
            known = ", ".join(sorted(list(KEYS) + ["rules"]))
            raise ConfigError(f"{path}: unknown key {key!r} (known keys: {known})")
        attr, valid, expected = KEYS[key]
        if not valid(value):
            raise ConfigError(f"{path}: {key!r} must be {expected}, got {value!r}")
        setattr(settings, attr, value)
    return settings


def _rule_options(value: Any, path: str) -> Dict[str, Dict[str, Any]]:
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ConfigError(f"{path}: 'rules' must be a table of rule code = {{option = value}}")
    return {str(code).upper(): dict(opts) for code, opts in value.items()}


def load_settings(config: Optional[str], isolated: bool, start: str = ".") -> Settings:
    """Settings from `--config`, else the nearest config file, else defaults."""
    if isolated:
        settings = Settings()
        settings.project_root = os.path.abspath(start)
        return settings
    path = config or find_config(start)
    if path is None:
        settings = Settings()
        settings.project_root = os.path.abspath(start)
        return settings
    if config and not os.path.isfile(config):
        raise ConfigError(f"{config}: configuration file not found")
    return settings_from_table(load_table(path), path)
