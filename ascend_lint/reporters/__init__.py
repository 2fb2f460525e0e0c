"""Output formats. Each reporter renders a `Report` to a text stream.

Add a format by writing a module with `render(report, out)` and listing it in `FORMATS`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, TextIO, Type

from ..rule import Applicability, Finding, Rule
from ..sanitize import is_unsafe, sanitize

# format name -> "module:function" (imported only when used)
FORMATS: Dict[str, str] = {
    "full": "ascend_lint.reporters.text:render_full",
    "concise": "ascend_lint.reporters.text:render_concise",
    "json": "ascend_lint.reporters.json_format:render",
    "json-lines": "ascend_lint.reporters.json_lines:render",
    "github": "ascend_lint.reporters.github:render",
    "sarif": "ascend_lint.reporters.sarif:render",
    "gitlab": "ascend_lint.reporters.gitlab:render",
    "junit": "ascend_lint.reporters.junit:render",
}


def _no_text(path: str) -> Optional[str]:
    return None


@dataclass
class Report:
    findings: List[Finding]
    rules: Dict[str, Type[Rule]]  # every registered rule, by code
    sources: Dict[str, List[str]] = field(default_factory=dict)  # path -> lines, for snippets
    color: bool = False
    unsafe_fixes: bool = False
    fixed: int = 0
    unsafe_fixable: int = 0
    files: int = 0
    text_of: Callable[[str], Optional[str]] = _no_text  # a file's full text (for fix edits), None if unknown


def fix_applies(finding: Finding, unsafe_fixes: bool) -> bool:
    """Would `--fix` apply this finding's fix (its unsafe fixes only with `--unsafe-fixes`)? `[*]` marks it."""
    fix = finding.fix
    if fix is None:
        return False
    return fix.applicability is Applicability.SAFE or (fix.applicability is Applicability.UNSAFE and unsafe_fixes)


def get_reporter(name: str) -> Callable[[Report, TextIO], None]:
    try:
        target = FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown output format {name!r} (choose from {', '.join(FORMATS)})") from None
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def display_path(path: str) -> str:
    """A path as valid Unicode for serialised formats (undecodable bytes in file names become U+FFFD).
    For a terminal use `clean_text`, which also escapes control and bidi characters."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def clean_text(text: str) -> str:
    """Untrusted text (a path, a message, a warning) safe for a terminal: see `ascend_lint.sanitize`."""
    return sanitize(text)


def json_needs_ascii(value: object) -> bool:
    """Would `value`, dumped with ensure_ascii=False, put a character JSON does not escape but a terminal
    interprets (DEL, C1 controls, bidi and other format characters, line separators) on the output?
    Then the JSON formats dump it with ensure_ascii=True: the data stay exact, the output is safe."""
    if isinstance(value, str):
        return not value.isprintable() and any(ord(c) >= 0x20 and is_unsafe(c) for c in value if not c.isprintable())
    if isinstance(value, dict):
        return any(json_needs_ascii(k) or json_needs_ascii(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(json_needs_ascii(v) for v in value)
    return False
