"""Rule packs from the `ascend_lint.plugins` entry point group, and rule selection by code/prefix."""
from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple, Type

from . import __version__
from .config import ConfigError, Settings, describe
from .core_rules import CORE_PACK, CORE_RULES, PARSE_ERROR_CODE
from .sanitize import sanitize
from .rule import Rule

ENTRY_POINT_GROUP = "ascend_lint.plugins"
CODE_RE = re.compile(r"^[A-Z]{1,3}[0-9]{3}$")


class RegistryError(Exception):
    """A broken plugin set (duplicate codes, malformed rules): exit code 2."""


@dataclass
class Registry:
    rules: Dict[str, Type[Rule]] = field(default_factory=dict)  # code -> class
    packs: Dict[str, str] = field(default_factory=dict)  # pack name -> version
    warnings: List[str] = field(default_factory=list)

    def add_pack(self, pack: str, rules: Iterable[Type[Rule]], version: str = "") -> None:
        self.packs[pack] = version
        for rule in rules:
            if not (isinstance(rule, type) and issubclass(rule, Rule)):
                raise RegistryError(f"pack {pack!r}: {rule!r} is not a Rule subclass")
            if not CODE_RE.match(rule.code or ""):
                raise RegistryError(f"pack {pack!r}: rule {rule.__name__} has an invalid code {rule.code!r}")
            if rule.code in self.rules:
                other = self.rules[rule.code]
                raise RegistryError(
                    f"rule code {rule.code} is defined twice: by {other.__name__} in pack "
                    f"{other.pack!r} and by {rule.__name__} in pack {pack!r}"
                )
            rule.pack = pack
            self.rules[rule.code] = rule

    def sorted_rules(self) -> List[Type[Rule]]:
        return [self.rules[c] for c in sorted(self.rules)]

    def get(self, code: str) -> Optional[Type[Rule]]:
        code = code.upper()
        if code in self.rules:
            return self.rules[code]
        for rule in self.rules.values():
            if rule.name == code.lower():
                return rule
        return None

    def fingerprint(self) -> str:
        return ";".join(f"{p}={v}" for p, v in sorted(self.packs.items()))


def _entry_points() -> List[Any]:
    found = _entry_points_from_files()
    if found is not None:
        return found
    from importlib import metadata

    eps = metadata.entry_points()
    if hasattr(eps, "select"):
        return list(eps.select(group=ENTRY_POINT_GROUP))
    return list(eps.get(ENTRY_POINT_GROUP, []))  # pragma: no cover (Python < 3.10)


class _Dist:
    """The two facts the registry reads from a distribution, without importlib.metadata (which
    imports email, csv and zipfile: ~30 ms of every start)."""

    def __init__(self, info_dir: str) -> None:
        self.metadata: Dict[str, str] = {}
        for name in ("METADATA", "PKG-INFO"):
            try:
                with open(os.path.join(info_dir, name), encoding="utf-8", errors="replace") as handle:
                    for line in handle:
                        if not line.strip():
                            break  # the headers end at the first blank line
                        key, sep, value = line.partition(":")
                        if sep and key in ("Name", "Version"):
                            self.metadata.setdefault(key, value.strip())
                break
            except OSError:
                continue
        self.version = self.metadata.get("Version", "")


class _EntryPoint:
    def __init__(self, name: str, value: str, dist: _Dist) -> None:
        self.name, self.value, self.dist = name, value, dist

    def load(self) -> Any:
        import importlib

        module, _, attr = self.value.partition(":")
        obj = importlib.import_module(module.strip())
        for part in attr.strip().split(".") if attr.strip() else ():
            obj = getattr(obj, part)
        return obj


def _entry_points_from_files() -> Optional[List[Any]]:
    """The group's entry points read from the `entry_points.txt` of every distribution on sys.path
    (first one of a name wins, as importlib.metadata does); None where that is not enough (a zip
    on sys.path, an unreadable listing): then importlib.metadata answers."""
    found: List[Any] = []
    seen_dists = set()
    for base in sys.path:
        base = base or "."
        if not os.path.isdir(base):
            if os.path.exists(base):
                return None  # a zip or egg file
            continue
        try:
            names = sorted(os.listdir(base))
        except OSError:
            return None
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            stem = name[:-len(".dist-info")] if name.endswith(".dist-info") else name[:-len(".egg-info")]
            dist_name = re.sub(r"[-_.]+", "_", stem.split("-")[0]).lower()
            if dist_name in seen_dists:
                continue
            seen_dists.add(dist_name)
            info = os.path.join(base, name)
            group = _read_group(os.path.join(info, "entry_points.txt"))
            if group:
                dist = _Dist(info)
                found.extend(_EntryPoint(n, v, dist) for n, v in group)
    return found


def _read_group(path: str) -> List[Tuple[str, str]]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return []
    out: List[Tuple[str, str]] = []
    in_group = False
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            in_group = line.strip("[]").strip() == ENTRY_POINT_GROUP
        elif in_group and "=" in line:
            key, _, value = line.partition("=")
            out.append((key.strip(), value.strip()))
    return out


def load_registry() -> Registry:
    """The core checks and every installed pack; a pack that fails to import is skipped with a warning."""
    registry = Registry()
    registry.add_pack(CORE_PACK, CORE_RULES, f"ascend-lint {__version__}")
    seen = set()
    for ep in sorted(_entry_points(), key=lambda e: e.name):
        if (ep.name, ep.value) in seen:
            continue
        seen.add((ep.name, ep.value))
        try:
            loaded = ep.load()
            rules = list(loaded() if callable(loaded) and not isinstance(loaded, type) else loaded)
        except Exception as exc:  # a broken third-party pack must not stop the run
            registry.warnings.append(f"rule pack {ep.name!r} ({ep.value}) failed to load and was skipped: {exc!r}")
            continue
        version = ""
        dist = getattr(ep, "dist", None)
        if dist is not None:
            version = f"{dist.metadata['Name']} {dist.version}"
        registry.add_pack(ep.name, rules, version)
    return registry


@functools.lru_cache(maxsize=1)
def registered_codes() -> FrozenSet[str]:
    """Every code of the core and the installed packs (loaded once per process)."""
    return frozenset(load_registry().rules)


def _matches(code: str, selector: str) -> int:
    """Specificity of `selector` for `code` (0: no match)."""
    return len(selector) if code.startswith(selector) else 0


def _validate_selectors(selectors: Sequence[str], registry: Registry, what: str) -> List[str]:
    out = []
    for raw in selectors:
        sel = raw.strip().upper()
        if not sel:
            raise ConfigError(f"empty rule selector {raw!r} in {what}")
        if sel == "ALL":
            sel = ""
        elif not any(code.startswith(sel) for code in registry.rules) and sel != PARSE_ERROR_CODE:
            raise ConfigError(f"unknown rule selector {describe(raw)} in {what}")
        out.append(sel)
    return out


def select_rules(registry: Registry, settings: Settings) -> Tuple[List[Type[Rule]], List[str]]:
    """The enabled rules (ruff's semantics: the most specific selector wins, ties go to ignore)."""
    select = _validate_selectors(settings.select if settings.select is not None else ["ALL"], registry, "select")
    select += _validate_selectors(settings.extend_select, registry, "extend-select")
    ignore = _validate_selectors(settings.ignore, registry, "ignore")
    warnings: List[str] = []
    enabled = []
    for rule in registry.sorted_rules():
        sel = max((_matches(rule.code, s) for s in select if rule.code.startswith(s)), default=-1)
        ign = max((_matches(rule.code, s) for s in ignore if rule.code.startswith(s)), default=-1)
        if sel < 0 or ign >= sel:
            continue
        if rule.preview and not settings.preview:
            if sel == len(rule.code):
                warnings.append(f"{rule.code} is a preview rule: it runs only with --preview")
            continue
        enabled.append(rule)
    validate_rule_options(registry, settings)
    validate_per_file_ignores(registry, settings)
    return enabled, warnings


def validate_per_file_ignores(registry: Registry, settings: Settings) -> None:
    """Every code under `per-file-ignores` names a rule or a prefix of one (ruff stops on a typo too)."""
    where = settings.config_path or "configuration"
    for pattern, codes in settings.per_file_ignores.items():
        _validate_selectors(codes, registry, f"per-file-ignores {pattern!r} of {where}")


def validate_rule_options(registry: Registry, settings: Settings) -> None:
    where = settings.config_path or "configuration"
    for code, opts in settings.rule_options.items():
        rule = registry.rules.get(code)
        if rule is None:
            raise ConfigError(f"{where}: unknown rule code {describe(code)} under 'rules'")
        for key, value in opts.items():
            if key not in rule.options:
                known = ", ".join(sorted(rule.options)) or "none"
                raise ConfigError(f"{where}: rule {code} has no option {describe(key)} (options: {known})")
            default = rule.options[key]
            if type(value) is not type(default) and not (isinstance(default, float) and type(value) is int):
                raise ConfigError(
                    f"{where}: option {key!r} of {code} must be {type(default).__name__}, got {describe(value)}"
                )


def code_matches(code: str, selectors: Iterable[str]) -> bool:
    return any(code.startswith(s.strip().upper()) for s in selectors if s.strip())


def print_warnings(messages: Iterable[str]) -> None:
    for msg in messages:
        print(f"warning: {sanitize(msg)}", file=sys.stderr)
