"""Configuration: `[tool.ascend-lint]` in pyproject.toml or `.ascend-lint.yaml`, validated into Settings.

Hierarchical, as ruff's: each file gets the configuration closest to it (`ConfigResolver`), with the
files it `extend`s; the keys in `RUN_WIDE` come from the run's own configuration (the one the current
directory finds, or `--config`), and the command line overrides every file.
"""
from __future__ import annotations

import os
import re
import reprlib
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Tuple

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
MAX_EXTENDS = 32  # configuration files in one `extend` chain
CONFIG_NAMES = YAML_NAMES + ("pyproject.toml",)

DEFAULT_CACHE_DIR = ".ascend_lint_cache"  # the result cache's directory, relative to the project root


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
    project_root: str = "."  # the directory the settings' relative paths are resolved against
    config_path: Optional[str] = None  # the configuration file closest to the file (None: defaults)
    # Where the settings came from (not settings themselves; never in the cache key):
    extends: Tuple[str, ...] = ()  # the files `config_path` extends, nearest first
    root_config: Optional[str] = None  # the file whose directory is the project root (see project/root.py)
    origins: Dict[str, str] = field(default_factory=dict, compare=False)  # attribute -> "file:key" / "command line"

    def override(self, **changes: Any) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


# How a key of the configuration applies (README "Configuration": which keys are per file):
# - per file (the closest configuration): every key not listed below;
# - run-wide (the run's own configuration, see module docstring): what to do with the findings and where
#   the cache lives, and how explicit paths and .gitignore files are treated;
# - per project (the configuration at the project root): the keys that shape the project model.
RUN_WIDE = ("fix", "unsafe_fixes", "output_format", "cache_dir", "respect_gitignore", "force_exclude",
            "ignore_noqa")
PER_PROJECT = ("runtime_migration", "migrating_modules")
ORIGIN_FIELDS = ("extends", "root_config", "origins")
# With `extend`, a key of the extending file replaces the extended file's, except these lists, which add
# to it, and these tables, which are merged (per pattern, per rule; the extending file wins).
ACCUMULATED = ("extend_select", "extend_exclude", "extend_safe_fixes", "extend_unsafe_fixes")
MERGED = ("per_file_ignores", "rule_options")


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


def _yaml_problem(exc: Exception) -> str:
    """A YAML error on one line: the problem, where it is, and what the parser was reading."""
    problem = getattr(exc, "problem", None)
    if not problem:
        return " ".join(str(exc).split())
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    context = getattr(exc, "context", None)
    return f"{problem}{where}" + (f" ({context})" if context else "")


def load_table(path: str) -> Dict[str, Any]:
    """The raw ascend-lint table of a config file (never executes code: TOML, or YAML through a SafeLoader
    without aliases), checked for size and nesting before anything else looks at it."""
    raw = _read_config(path)
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            data = yaml.load(raw.decode("utf-8"), Loader=_yaml_loader())  # noqa: S506 (a SafeLoader)
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: invalid YAML: {_yaml_problem(exc)}") from None
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
    """Validate a raw table into Settings on top of `base` (the settings it extends, if any); unknown keys
    and wrong types raise ConfigError."""
    directory = os.path.dirname(os.path.abspath(path))
    settings = rebased(base, directory) if base else Settings()
    settings.origins = dict(settings.origins)
    settings.config_path = path
    settings.project_root = directory
    _apply_table(settings, table, path, lambda key: f"{path}:{key}", base is not None)
    return settings


def _apply_table(settings: Settings, table: Dict[str, Any], where: str, origin: Callable[[str], str],
                 adds: bool) -> None:
    """Set `table`'s keys on `settings` (validated; with `adds`, ACCUMULATED lists add to what `settings`
    has and MERGED tables merge into it); `origin(key)` says where a value came from (`where`: for errors)."""
    for key, value in table.items():
        if key == "extend":
            continue  # resolved by load_config
        if key == "rules":
            options = _rule_options(value, where)
            settings.origins["rule_options"] = _origin(settings.origins.get("rule_options"), origin(key), adds)
            settings.rule_options = {**settings.rule_options, **options} if adds else options
            continue
        if key not in KEYS:
            known = ", ".join(sorted(list(KEYS) + ["extend", "rules"]))
            raise ConfigError(f"{where}: unknown key {describe(key)} (known keys: {known})")
        attr, valid, expected = KEYS[key]
        if not valid(value):
            raise ConfigError(f"{where}: {key!r} must be {expected}, got {describe(value)}")
        value = parse_size(value) if key == "max-file-size" else value
        inherited = adds and attr in ACCUMULATED + MERGED
        if inherited and attr in ACCUMULATED:
            value = list(getattr(settings, attr)) + list(value)
        elif inherited:
            value = {**getattr(settings, attr), **value}
        settings.origins[attr] = _origin(settings.origins.get(attr), origin(key), inherited)
        setattr(settings, attr, value)


def _origin(previous: Optional[str], here: str, adds: bool) -> str:
    return f"{previous} + {here}" if adds and previous else here


OVERRIDE_ORIGIN = "command line (--config)"


def parse_override(text: str) -> Optional[Dict[str, Any]]:
    """A `--config` value read as TOML `KEY = VALUE` pairs (ruff's inline overrides), or None when it is
    not TOML holding at least one key (then it names a configuration file); a ConfigError when it has an
    `=` but is not TOML."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        if "=" in text:
            raise ConfigError(f"--config {describe(text)}: invalid TOML `KEY = VALUE` pair: {exc}") from None
        return None
    except (RecursionError, MemoryError):
        raise ConfigError(f"--config {describe(text)}: nested too deeply to read") from None
    return table or None


def with_override(settings: Settings, table: Dict[str, Any], cwd: str) -> Settings:
    """`settings` with one `--config KEY = VALUE` table over them: keys as in `[tool.ascend-lint]`, lists
    that extend (`extend-select`, ...) add and tables (`per-file-ignores`, `rules`) merge, as a file that
    `extend`s does; paths and globs in it are relative to `cwd`, like every path on the command line."""
    where = "--config"
    if "extend" in table:
        raise ConfigError(f"{where}: 'extend' names a configuration file; give that file as --config FILE")
    _check_shape(table, where)
    root = os.path.abspath(settings.project_root)

    def here(patterns: Any, anchor: bool = False) -> Any:
        return [rebase_pattern(p, cwd, root, anchor) for p in patterns] if _str_list(patterns) else patterns

    moved = dict(table)
    for key in ("exclude", "extend-exclude"):
        if key in moved:
            moved[key] = here(moved[key])
    if _codes_map(moved.get("per-file-ignores")):
        moved["per-file-ignores"] = {rebase_pattern(p, cwd, root): c for p, c in moved["per-file-ignores"].items()}
    if isinstance(moved.get("cache-dir"), str):
        moved["cache-dir"] = os.path.join(cwd, os.path.expanduser(moved["cache-dir"]))
    changed = replace(settings, origins=dict(settings.origins))
    _apply_table(changed, moved, where, lambda key: OVERRIDE_ORIGIN, True)
    return changed


def rebased(settings: Settings, directory: str) -> Settings:
    """`settings` with its path patterns (excludes, per-file-ignores) made relative to `directory` (they were
    relative to `settings.project_root`): what an extended file says keeps meaning what it said there."""
    old = os.path.abspath(settings.project_root)
    if old == directory:
        return replace(settings)
    return replace(
        settings,
        exclude=None if settings.exclude is None else
        [rebase_pattern(p, old, directory, anchor=True) for p in settings.exclude],
        extend_exclude=[rebase_pattern(p, old, directory, anchor=True) for p in settings.extend_exclude],
        per_file_ignores={rebase_pattern(p, old, directory): codes for p, codes in settings.per_file_ignores.items()},
    )


def rebase_pattern(pattern: str, old: str, new: str, anchor: bool = False) -> str:
    """A glob relative to directory `old` as one relative to `new` (a leading `../` climbs). A pattern with
    no slash but a trailing one matches a name at any depth and stays as it is. `anchor` (gitignore-style
    excludes): a pattern that was anchored stays anchored (`/name/`) when it loses its inner slash."""
    negated = pattern.startswith("!")
    body = pattern[1:] if negated else pattern
    if "/" not in body.strip("/") and not body.startswith("/"):
        return pattern
    trailing = "/" if body.endswith("/") else ""
    absolute = os.path.join(old, *body.strip("/").split("/"))
    try:
        moved = os.path.relpath(absolute, new).replace(os.sep, "/")
    except ValueError:  # another drive: the pattern cannot name a file under `new`
        moved = absolute.replace(os.sep, "/")
    if anchor and "/" not in moved:
        moved = "/" + moved
    return ("!" if negated else "") + moved + trailing


def split_up(pattern: str) -> Tuple[int, str]:
    """(how many leading `../` a rebased pattern has, the rest)."""
    levels = 0
    while pattern.startswith("../"):
        pattern = pattern[3:]
        levels += 1
    return levels, pattern


def ancestor(directory: str, levels: int) -> str:
    for _ in range(levels):
        directory = os.path.dirname(directory)
    return directory


def _rule_options(value: Any, path: str) -> Dict[str, Dict[str, Any]]:
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ConfigError(f"{path}: 'rules' must be a table of rule code = {{option = value}}")
    return {str(code).upper(): dict(opts) for code, opts in value.items()}


def load_config(path: str, chain: Tuple[str, ...] = ()) -> Settings:
    """The settings of one configuration file, with the files it `extend`s (relative to the file that
    says it; a cycle, a missing file or a chain longer than MAX_EXTENDS is a ConfigError)."""
    absolute = os.path.abspath(path)
    if absolute in chain:
        cycle = " -> ".join(list(chain[chain.index(absolute):]) + [absolute])
        raise ConfigError(f"{path}: 'extend' makes a cycle: {cycle}")
    if len(chain) >= MAX_EXTENDS:
        raise ConfigError(f"{path}: more than {MAX_EXTENDS} configuration files extend one another")
    table = load_table(path)
    base = None
    extend = table.get("extend")
    if extend is not None:
        if not isinstance(extend, str) or not extend.strip():
            raise ConfigError(f"{path}: 'extend' must be the path of a configuration file, got {describe(extend)}")
        target = os.path.normpath(os.path.join(os.path.dirname(absolute), os.path.expanduser(extend)))
        if not os.path.isfile(target):
            raise ConfigError(f"{path}: 'extend' names {extend!r}, which is not a file ({target})")
        if not target.endswith((".yaml", ".yml")) and not _has_tool_table(target):
            raise ConfigError(f"{path}: 'extend' names {extend!r}, which has no [tool.ascend-lint] table")
        base = load_config(target, chain + (absolute,))
    settings = settings_from_table(table, path, base)
    settings.extends = ((base.config_path,) + base.extends) if base and base.config_path else ()
    settings.root_config = _root_config(path, base)
    return settings


def _root_config(path: str, base: Optional[Settings]) -> str:
    """A configuration that extends one in its own directory or above belongs to that one's project."""
    if base is not None and base.root_config:
        outer = os.path.dirname(os.path.abspath(base.root_config))
        here = os.path.dirname(os.path.abspath(path))
        if here == outer or here.startswith(outer.rstrip(os.sep) + os.sep):
            return base.root_config
    return path


def defaults(root: str) -> Settings:
    settings = Settings()
    settings.project_root = os.path.abspath(root)
    return settings


def load_settings(config: Optional[str], isolated: bool, start: str = ".") -> Settings:
    """Settings from `--config`, else the configuration closest to `start`, else defaults."""
    if isolated:
        return defaults(start)
    if config and not os.path.isfile(config):
        raise ConfigError(f"{config}: configuration file not found")
    path = config or find_config(start)
    if path is None:
        return defaults(start)
    return load_config(path)


class ConfigResolver:
    """The settings of every file: the configuration closest to it (with what it extends), the run-wide
    keys of the run's settings, then the command line (`cli`, applied to every configuration).

    `run` is the run's own settings (from `--config`, or the configuration the current directory finds),
    with the command line applied. With `hierarchical` False (`--config`, `--isolated`) every file gets
    `run`. Each configuration file is read once; files sharing it share one Settings object.
    """

    def __init__(self, run: Settings, cli: Callable[[Settings], Settings] = lambda s: s,
                 hierarchical: bool = True) -> None:
        self.run = _absolute_cache_dir(run)
        self.cli = cli
        self.hierarchical = hierarchical
        self._closest: Dict[str, Optional[str]] = {}  # directory -> its closest configuration file
        self._own: Dict[str, Optional[str]] = {}  # directory -> the configuration file in it, if any
        self._settings: Dict[Optional[str], Settings] = {}  # configuration file -> resolved settings
        self.nested_projects: set = set()  # directories a project listing left out: projects of their own
        self._broken: Dict[Optional[str], ConfigError] = {}  # configuration file -> why it cannot be used
        if run.config_path and hierarchical:
            self._settings[run.config_path] = self.run

    # ----------------------------------------------------------------- which file
    def own_config(self, directory: str, names: Optional[Any] = None) -> Optional[str]:
        """The configuration file in `directory` itself (`names`: its listing, when the caller has it)."""
        if directory in self._own:
            return self._own[directory]
        found = None
        for name in CONFIG_NAMES:
            if names is not None and name not in names:
                continue
            candidate = os.path.join(directory, name)
            if name == "pyproject.toml":
                if os.path.isfile(candidate) and _has_tool_table(candidate):
                    found = candidate
            elif os.path.isfile(candidate):
                found = candidate
            if found:
                break
        self._own[directory] = found
        return found

    def closest_config(self, directory: str) -> Optional[str]:
        directory = os.path.abspath(directory)
        if directory in self._closest:
            return self._closest[directory]
        walked = []
        found = None
        while True:
            if directory in self._closest:
                found = self._closest[directory]
                break
            walked.append(directory)
            found = self.own_config(directory)
            if found is not None:
                break
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        for each in walked:
            self._closest[each] = found
        return found

    # ----------------------------------------------------------------- settings
    def for_config(self, config: Optional[str]) -> Settings:
        if not self.hierarchical:
            return self.run
        settings = self._settings.get(config)
        if settings is None and config in self._broken:
            raise self._broken[config]  # (read once: the same error for each file it governs)
        if settings is None:
            try:
                base = load_config(config) if config else defaults(self.run.project_root if not self.run.config_path
                                                                  else os.getcwd())
            except ConfigError as exc:
                self._broken[config] = exc
                raise
            settings = self.cli(base)
            origins = {attr: where for attr, where in settings.origins.items() if attr not in RUN_WIDE}
            origins.update({attr: self.run.origins[attr] for attr in RUN_WIDE if attr in self.run.origins})
            settings = replace(settings, origins=origins, **{attr: getattr(self.run, attr) for attr in RUN_WIDE})
            self._settings[config] = settings
        return settings

    def for_dir(self, directory: str) -> Settings:
        return self.for_config(self.closest_config(directory) if self.hierarchical else None)

    def for_file(self, path: str) -> Settings:
        return self.for_dir(os.path.dirname(os.path.abspath(path)))

    def for_path(self, path: str) -> Settings:
        """The settings of a file (or of a directory named as a path: those of its own configuration)."""
        absolute = os.path.abspath(path)
        return self.for_dir(absolute if os.path.isdir(absolute) else os.path.dirname(absolute))

    def starts_config(self, directory: str, names: Optional[Any] = None) -> Optional[Settings]:
        """The settings of the configuration in `directory` itself, when it has one (discovery switches to
        them for the files below it)."""
        if not self.hierarchical:
            return None
        config = self.own_config(directory, names)
        if config is None:
            return None
        self._closest[directory] = config
        return self.for_config(config)


def _absolute_cache_dir(settings: Settings) -> Settings:
    """The run's cache directory as an absolute path, so that it stays one place for every configuration."""

    where = os.path.join(os.path.abspath(settings.project_root), settings.cache_dir or DEFAULT_CACHE_DIR)
    return replace(settings, cache_dir=where)
