"""Pack `profile`: what only a profile can show (ASC8xx), reported with `ascend-lint check --profile DIR`.

Each rule is the metadata of one profile-only pattern (`ascend_lint.profile.patterns`: code, name, message,
docs); the profile reader detects the pattern at a project line and the run pipeline turns that observation
into the rule's finding, where the rule is selected for the file. Without a profile they report nothing.
"""
from __future__ import annotations

from typing import List, Type

from ascend_lint.profile.patterns import PATTERNS, Pattern
from ascend_lint.rule import Rule


class ProfileRule(Rule):
    """A profile-only rule: never walked (`profile_only`), its findings come from the profile's observations."""

    profile_only = True
    training_code_only = False  # (the profile shows the line ran in the profiled steps)
    file_triggers = ()


def _rule(pattern: Pattern) -> Type[Rule]:
    class_name = "".join(part.capitalize() for part in pattern.name.replace("-", "_").split("_"))
    return type(class_name, (ProfileRule,), {
        "__module__": __name__, "__qualname__": class_name, "__doc__": pattern.docs.summary, "code": pattern.code, "name": pattern.name,
        "message": pattern.message, "docs": pattern.docs})


RULES: List[Type[Rule]] = [_rule(PATTERNS[code]) for code in sorted(PATTERNS)]
globals().update({rule.__name__: rule for rule in RULES})  # (importable by name: worker processes unpickle them)
