"""The core's own checks, registered as pack `core` next to the installed packs.

They are not walked like pack rules: the engine reports ASC000 when a file cannot be linted and
ASC001 after the walk, from the findings and the file's `# noqa` comments. They are Rule classes
so that `ascend-lint rules`, docs/rules.md, selection and SARIF treat them like every other code.
"""
from __future__ import annotations

from typing import List, Type

from .rule import Applicability, Case, Docs, Rule, Severity

CORE_PACK = "core"
PARSE_ERROR_CODE = "ASC000"
UNUSED_NOQA_CODE = "ASC001"


class UnreadableFile(Rule):
    code = PARSE_ERROR_CODE
    name = "unreadable-file"
    message = "{reason}"
    severity = Severity.ERROR
    triggers = ("",)  # any file
    docs = Docs(
        summary="A file that could not be read, decoded or parsed, so nothing in it was checked.",
        what="Reports a file that could not be read, decoded or parsed, so nothing in it was checked: a "
             "missing path, a directory or a broken link, bytes that are not valid in the file's encoding, "
             "a syntax error (Python 2 code is named as such), or code nested too deeply for the parser.",
        why="A file that is not checked can hide every anti-pattern in it. Saying so keeps a passing run "
            "meaningful, and the run goes on with the other files.",
        known_problems="Only files that the enabled rules could apply to are parsed (a file that mentions "
                       "none of the names they look for is skipped unparsed), so ascend-lint is not a "
                       "syntax checker. ASC000 is always on: selection, `per-file-ignores` and `# noqa` do "
                       "not hide it. Exclude the file (`extend-exclude`) to stop linting it.",
        example="print 'hello'    # Python 2: ASC000 syntax error",
        use_instead="print('hello')",
        source="ruff reports syntax errors the same way: https://docs.astral.sh/ruff/linter/#error-suppression",
    )
    cases = (
        Case("""
            import torch, torch_npu
            y = torch.transpose(x, 1, 2).contiguous(
            """, line=2, message_contains="syntax error"),
    )
    flagged = ("import torch, torch_npu\ny = torch.transpose(x, 1, 2).contiguous(\n",)
    clean = ("import torch\ny = torch.transpose(x, 1, 2).contiguous()\n",)


class UnusedNoqa(Rule):
    code = UNUSED_NOQA_CODE
    name = "unused-noqa"
    message = "Unused `noqa` directive ({details})"
    preview = True
    fix_applicability = Applicability.SAFE
    triggers = ("noqa",)
    file_triggers = ("noqa",)
    docs = Docs(
        summary="A `# noqa` code that suppressed no finding.",
        what="Flags ascend-lint codes in a `# noqa: ...` comment that suppressed nothing: the rule ran on the "
             "file and reported nothing on that line, or no installed rule has the code (a typo such as "
             "`ASC10`, or a rule that was removed).",
        why="A suppression outlives the code it was written for. Left behind after the slow pattern was "
            "fixed, it hides the pattern when it comes back on that line (a `.contiguous()` re-added after a "
            "`transpose`, a `synchronize()` put back into `forward`), and a typo never suppressed anything.",
        known_problems="Only codes whose rule ran on the file are judged. The noqa of a rule that is not "
                       "selected, a preview rule without `--preview`, a rule turned off by "
                       "`per-file-ignores`, an NPU-context rule in a file without NPU context, or a "
                       "`migration` rule in a file migrated by `transfer_to_npu` is left alone: the rule "
                       "may report there under other settings. A bare `# noqa`, codes of other tools "
                       "(`F401`, `E501`) and the file-level `# ascend-lint: noqa` are never judged.\n\n"
                       "It is a preview rule, as ruff's RUF100 is not on by default: it says nothing "
                       "about performance, and a new ascend-lint release with a more precise rule would "
                       "otherwise turn a passing CI run red over a comment. Turn it on with "
                       "`--preview --extend-select ASC001`, and use `--fix` to clean up.",
        example="y = x.view(2, -1)  # noqa: ASC101, F401",
        use_instead="y = x.view(2, -1)  # noqa: F401",
        fix_safety="Safe: it removes the unused codes, or the whole directive when no code is left; text after "
                   "the directive stays a comment.",
        source="ruff's unused-noqa (RUF100): https://docs.astral.sh/ruff/rules/unused-noqa/",
    )
    cases = (
        Case("""
            import torch
            y = torch.ones(2)  # noqa: ASC990
            """, line=2, message_contains="Unused `noqa` directive (unknown",
             fixed="""
            import torch
            y = torch.ones(2)
            """),
    )
    flagged = ("import torch\ny = torch.ones(2)  # noqa: ASC990\n",)
    clean = ("import torch\ny = torch.ones(2)  # noqa: F401\n", "import torch\ny = torch.ones(2)  # noqa\n")


CORE_RULES: List[Type[Rule]] = [UnreadableFile, UnusedNoqa]
