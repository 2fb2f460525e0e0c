"""Configuration: `[tool.ascend-lint]` in pyproject.toml or `.ascend-lint.yaml`, validated into Settings."""
from __future__ import annotations

import os
import re
import reprlib
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

from .fileio import DEFAULT_MAX_FILE_SIZE, FileTooLarge, SourceError, read_bytes
from .sanitize import sanitize

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

YAML_NAMES = (".ascend-lint.yaml", ".ascend-lint.yml")
TARGETS = ("auto", "npu")
# Bounds on what a configuration file may hold: no real configuration comes near them, and a hostile
# one (an alias bomb, a table nested thousands of levels deep) gets a one-line error instead of a hang.
MAX_CONFIG_BYTES = 1024 * 1024
MAX_DEPTH = 16  # nesting of tables/lists inside [tool.ascend-lint]
MAX_VALUES = 10_000  # keys, items and scalars inside [tool.ascend-lint]


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
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    ignore_noqa: bool = False  # --ignore-noqa: no comment suppresses anything
    project_root: str = "."
    config_path: Optional[str] = None

    def override(self, **changes: Any) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _codes_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and _str_list(v) for k, v in value.items())


SIZE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(B|KB|KIB|MB|MIB|GB|GIB)?\s*", re.IGNORECASE)
SIZE_UNITS = {"B": 1, "KB": 1024, "KIB": 1024, "MB": 1024 ** 2, "MIB": 1024 ** 2, "GB": 1024 ** 3, "GIB": 1024 ** 3}


def parse_size(value: Any) -> Optional[int]:
    """`max-file-size`: bytes as an integer, or a string with a unit ("10 MB"; units count in 1024s)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and len(value) < 40:
        match = SIZE_RE.fullmatch(value)
        if match:
            size = int(float(match.group(1)) * SIZE_UNITS[(match.group(2) or "B").upper()])
            return size if size > 0 else None
    return None


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6


def describe(value: Any) -> str:
    """A bounded, printable repr of a configuration value for an error message (never the whole value:
    a shared YAML structure or a megabyte string must not be expanded to be shown)."""
    return sanitize(_REPR.repr(value))


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
    "max-file-size": ("max_file_size", lambda v: parse_size(v) is not None,
                      "a positive size: bytes, or a string such as \"10 MB\""),
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
    raw = _read_config(path)  # an unreadable or oversized pyproject.toml is an error, not skipped silently
    return b"ascend-lint" in raw and "ascend-lint" in _load_toml(path, raw).get("tool", {})


def _read_config(path: str) -> bytes:
    try:
        raw, _ = read_bytes(path, MAX_CONFIG_BYTES)
    except FileTooLarge as exc:
        raise ConfigError(f"{path}: the configuration file is larger than {exc.limit:,} bytes") from None
    except SourceError as exc:
        raise ConfigError(f"{path}: cannot read the configuration file: {exc.reason}") from None
    return raw


def _load_toml(path: str, raw: bytes) -> Dict[str, Any]:
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except (RecursionError, MemoryError):
        raise ConfigError(f"{path}: invalid TOML: nested too deeply to read") from None


def _yaml_loader() -> Any:
    """yaml.SafeLoader (no tags, no code) that also refuses aliases and deep nesting while composing."""
    import yaml

    class BoundedSafeLoader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(
                    None, None, "YAML aliases (*name) are not allowed in ascend-lint configuration", mark)
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH + 4:
                    raise yaml.composer.ComposerError(
                        None, None, f"nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedSafeLoader


def load_table(path: str) -> Dict[str, Any]:
    """The raw ascend-lint table of a config file (never executes code: TOML, or YAML through a SafeLoader
    without aliases), checked for size and nesting before anything else looks at it."""
    raw = _read_config(path)
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            data = yaml.load(raw.decode("utf-8"), Loader=_yaml_loader())  # noqa: S506 (a SafeLoader)
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: invalid YAML: {exc}") from None
        except (RecursionError, MemoryError):
            raise ConfigError(f"{path}: invalid YAML: nested too deeply to read") from None
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of settings at the top level")
        _check_shape(data, path)
        return data
    table = _load_toml(path, raw).get("tool", {}).get("ascend-lint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.ascend-lint] must be a table")
    _check_shape(table, path)
    return table


def _check_shape(table: Dict[str, Any], path: str) -> None:
    """Refuse tables nested deeper than MAX_DEPTH or holding more than MAX_VALUES values (iteratively:
    the check itself must not recurse)."""
    stack: List[Tuple[Any, int]] = [(table, 0)]
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise ConfigError(f"{path}: the ascend-lint settings hold more than {MAX_VALUES:,} values")
        if isinstance(value, dict):
            children = list(value.values())
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth >= MAX_DEPTH and children:
            raise ConfigError(f"{path}: the ascend-lint settings are nested more than {MAX_DEPTH} levels deep")
        stack.extend((child, depth + 1) for child in children)


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
            raise ConfigError(f"{path}: unknown key {describe(key)} (known keys: {known})")
        attr, valid, expected = KEYS[key]
        if not valid(value):
            raise ConfigError(f"{path}: {key!r} must be {expected}, got {describe(value)}")
        setattr(settings, attr, parse_size(value) if key == "max-file-size" else value)
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
