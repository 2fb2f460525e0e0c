"""Suppression comments."""
from __future__ import annotations

from ascend_lint.engine.noqa import add_noqa_to_lines, file_codes, line_codes
from conftest import codes

BAD = "y = x.t().contiguous() @ w.npu()"


def test_line_codes_parsing():
    assert line_codes("x = 1") is None
    assert line_codes("x = 1  # noqa") == set()
    assert line_codes("x = 1  # NOQA:ASC101") == {"ASC101"}
    assert line_codes("x = 1  # noqa: ASC101,ASC202 because") == {"ASC101", "ASC202"}
    assert line_codes("x = 1  # noqa: ASC101 ASC202") == {"ASC101", "ASC202"}


def test_noqa_suppresses_matching_codes_only():
    assert codes(BAD, select=["ASC101"]) == ["ASC101"]
    assert codes(BAD + "  # noqa", select=["ASC101"]) == []
    assert codes(BAD + "  # noqa: ASC101", select=["ASC101"]) == []
    assert codes(BAD + "  # noqa: ASC1", select=["ASC101"]) == []
    assert codes(BAD + "  # noqa: E501", select=["ASC101"]) == ["ASC101"]


def test_noqa_on_first_line_of_multiline_finding():
    src = "y = (x.t()  # noqa: ASC101\n     .contiguous()) @ w.npu()\n"
    assert codes(src, select=["ASC101"]) == []


def test_file_level_noqa():
    assert file_codes("# ascend-lint: noqa\nx = 1\n") == set()
    assert file_codes("import os\n# ascend-lint: noqa: ASC101, ASC2\n") == {"ASC101", "ASC2"}
    assert codes("# ascend-lint: noqa\n" + BAD, select=["ASC101"]) == []
    assert codes("# ascend-lint: noqa: ASC2\n" + BAD, select=["ASC101"]) == ["ASC101"]


def test_add_noqa_lines():
    from ascend_lint.rule import Finding

    finding = Finding("f.py", 1, 1, 1, 2, "ASC101", "n", "m")
    assert add_noqa_to_lines(["y = 1\n"], [finding]) == {0: "y = 1  # noqa: ASC101\n"}
    assert add_noqa_to_lines(["y = 1  # noqa\n"], [finding]) == {}
    assert add_noqa_to_lines(["y = 1  # noqa: ASC2 why\n"], [finding]) == {0: "y = 1  # noqa: ASC101, ASC2 why\n"}
