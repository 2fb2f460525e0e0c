"""Issue #30's long import chain as a generated fixture: 12 packages x 100 modules, each importing the next
(1,213 files), used to end in `internal error` (RecursionError) with no findings at all: the walk that asks
whether importing a module applies the migration (`transfer_to_npu`, here at the far end) recursed per module."""
from __future__ import annotations

from pathlib import Path

import pytest

from ascend_lint.cli import main

TRAIN = ("import torch\nfrom pkg0.m0 import f\nmodel = Net().cuda()\ny = torch.zeros(3).cuda()\n\n"
         "if __name__ == '__main__':\n    f()\n")  # an entry script: the model asks what importing pkg0.m0 does


def chain(root: Path, packages: int = 12, modules: int = 100, migrated: bool = True) -> None:
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'chain'\n")
    for p in range(packages):
        package = root / f"pkg{p}"
        package.mkdir()
        (package / "__init__.py").write_text("")
        for m in range(modules):
            if m + 1 < modules:
                body = f"from pkg{p}.m{m + 1} import f\n"
            elif p + 1 < packages:
                body = f"from pkg{p + 1}.m0 import f\n"
            else:
                migration = "from torch_npu.contrib import transfer_to_npu\n" if migrated else ""
                body = "def f():\n    return 1\n" + migration
            (package / f"m{m}.py").write_text("import torch\n" + body)
    (root / "train.py").write_text(TRAIN)



def _check(root: Path, monkeypatch, capsys) -> tuple:
    monkeypatch.chdir(root)
    code = main(["check", "--no-cache", "-j", "1", "--preview", "--target", "npu", "--select", "ASC601",
                 "--output-format", "concise", "train.py"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("migrated", [True, False], ids=["migration-at-the-end", "no-migration"])
def test_a_1213_file_import_chain_answers_as_a_short_chain_does(tmp_path, monkeypatch, capsys, migrated):
    """The model walks the chain (iteratively: 1,200 modules deep is past Python's recursion limit) and
    answers for train.py what it answers when the chain is two modules long."""
    chain(tmp_path / "long", migrated=migrated)
    chain(tmp_path / "short", packages=1, modules=2, migrated=migrated)
    code, out, err = _check(tmp_path / "long", monkeypatch, capsys)
    assert "internal error" not in err and "Traceback" not in err and "RecursionError" not in err
    assert (code, out, err) == _check(tmp_path / "short", monkeypatch, capsys)
    if migrated:  # `.cuda()` runs migrated to the NPU: nothing to report
        assert code == 0 and "ASC601" not in out
    else:
        assert code == 1 and out.count("ASC601") == 2
