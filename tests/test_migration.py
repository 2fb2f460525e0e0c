"""Pack `migration` (ASC601-ASC604): every flagged form, the near-misses, fix data and the twin table."""
from __future__ import annotations

import ast
import re
import textwrap

import pytest

from ascend_lint.rule import Applicability
from ascend_lint_plugins.migration.twins import TWINS, lookup
from conftest import codes, lint


def found(src, code, **kwargs):
    return [f for f in lint(src, select=[code], **kwargs) if f.code == code]


def apply(src, finding):
    """Apply a finding's `replace` edits to the source (a stand-in for the libcst fixer)."""
    lines = textwrap.dedent(src).splitlines(keepends=True)
    for edit in sorted(finding.fix.edits, key=lambda e: (e.span.line, e.span.col), reverse=True):
        assert edit.op == "replace"
        s = edit.span
        assert s.line == s.end_line, "single-line edits only in these tests"
        line = lines[s.line - 1]
        lines[s.line - 1] = line[: s.col] + edit.text + line[s.end_col:]
    out = "".join(lines)
    ast.parse(out)
    return out


# --------------------------------------------------------------------------- a realistic port
PORT = """
    import os

    import torch
    import torch.distributed as dist
    import torch_npu
    from torch.cuda.amp import GradScaler, autocast


    def setup(rank, world_size):
        torch.cuda.set_device(rank)                                     # ASC603
        dist.init_process_group("nccl", rank=rank, world_size=world_size)  # ASC602
        return torch.device(f"cuda:{rank}")                             # ASC601


    def train(model, loader, optimizer, rank):
        torch.backends.cuda.matmul.allow_tf32 = True                    # ASC604
        model = model.cuda(rank)                                        # ASC601
        scaler = GradScaler()
        for images, target in loader:
            images = images.to("cuda", non_blocking=True)               # ASC601
            with autocast():
                loss = model(images, target.cuda())                     # ASC601
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        if torch.cuda.is_available():                                   # ASC603
            torch.cuda.empty_cache()                                    # ASC603
"""


def expected_lines(src, prefix):
    out = []
    for i, line in enumerate(textwrap.dedent(src).splitlines(), 1):
        m = re.search(r"#\s*(ASC\d+)", line)
        if m and m.group(1).startswith(prefix):
            out.append((i, m.group(1)))
    return sorted(out)


def test_realistic_port_reports_each_leftover_once():
    findings = lint(PORT, select=["ASC6"])
    got = sorted((f.line, f.code) for f in findings)
    imports = [(7, "ASC603"), (7, "ASC603")]  # GradScaler and autocast, reported at the import
    assert got == sorted(expected_lines(PORT, "ASC6") + imports)
    fixable_lines = {f.line for f in findings if f.fix is not None}
    assert fixable_lines == {line for line, _ in got}  # the import's fix rides on its first name
    for f in (f for f in findings if f.fix is not None):  # safe only where the original could not run on Ascend
        quiet = f.code == "ASC604" or any(n in f.message for n in ("is_available", "empty_cache", "amp."))
        quiet = quiet or f.line == 13  # a returned device goes where the linter cannot follow (an autocast?)
        assert f.fix.applicability == (Applicability.UNSAFE if quiet else Applicability.SAFE), f


def test_transfer_to_npu_silences_the_whole_pack():
    src = PORT.replace("import torch_npu\n", "import torch_npu\n    from torch_npu.contrib import transfer_to_npu\n")
    assert lint(src, select=["ASC6"]) == []


def test_mindspeed_llm_import_counts_as_runtime_migration():
    src = "import torch\nfrom mindspeed_llm.training import utils\ntorch.cuda.synchronize()\nx = y.cuda()\n"
    assert lint(src, select=["ASC6"]) == []


def test_no_npu_context_no_findings():
    assert lint(PORT.replace("import torch_npu\n", ""), select=["ASC6"]) == []


def test_target_npu_forces_the_pack_on():
    src = "import torch\ntorch.cuda.synchronize()\n"
    assert lint(src, select=["ASC603"]) == []
    assert [f.code for f in lint(src, select=["ASC603"], target="npu")] == ["ASC603"]


# --------------------------------------------------------------------------- ASC601
# (line, fixed, safe): safe only where the CUDA device reaches code that raises on an Ascend host
@pytest.mark.parametrize("line, fixed, safe", [
    ("m = model.cuda()", "m = model.npu()", True),
    ("x = batch['x'].cuda(non_blocking=True)", "x = batch['x'].npu(non_blocking=True)", True),
    ("x = (a + b).cuda(0)", "x = (a + b).npu(0)", True),
    ("x = x.to('cuda:0')", "x = x.to('npu:0')", True),
    ("x = x.to(torch.device('cuda:{}'.format(rank)))", "x = x.to(torch.device('npu:{}'.format(rank)))", True),
    ("z = torch.zeros(3, device='cuda')", "z = torch.zeros(3, device='npu')", True),
    ("z = x.new_zeros(3, device='cuda')", "z = x.new_zeros(3, device='npu')", True),
    ("sd = torch.load(p, map_location='cuda:0')", "sd = torch.load(p, map_location='npu:0')", True),
    # a module-level name: another module may import it and use it anywhere
    ("d = torch.device('cuda')", "d = torch.device('npu')", False),
    ('d = torch.device("cuda:1")', 'd = torch.device("npu:1")', False),
    ("d = torch.device('cuda', rank)", "d = torch.device('npu', rank)", False),
    ("d = torch.device('cuda:{}'.format(rank))", "d = torch.device('npu:{}'.format(rank))", False),
    ("d = torch.device(f'cuda:{rank}')", "d = torch.device(f'npu:{rank}')", False),
    ("d = torch.device(F'cuda:{args.local_rank}')", "d = torch.device(F'npu:{args.local_rank}')", False),
    ("device = 'cuda'", "device = 'npu'", False),
    ("self_device = r'cuda:0'", "self_device = r'npu:0'", False),
    # autocast and GradScaler disable themselves without CUDA: the original ran in fp32, unscaled
    ("ctx = torch.autocast('cuda', dtype=torch.bfloat16)", "ctx = torch.autocast('npu', dtype=torch.bfloat16)",
     False),
    ("ctx = torch.autocast(device_type='cuda')", "ctx = torch.autocast(device_type='npu')", False),
    ("ctx = torch.amp.autocast('cuda')", "ctx = torch.amp.autocast('npu')", False),
    ("scaler = torch.amp.GradScaler('cuda')", "scaler = torch.amp.GradScaler('npu')", False),
    ("scaler = torch.amp.GradScaler(device='cuda')", "scaler = torch.amp.GradScaler(device='npu')", False),
])
def test_asc601_forms_and_fix(line, fixed, safe):
    src = f"import torch\nimport torch_npu\n{line}\n"
    (f,) = found(src, "ASC601")
    assert f.fix.applicability == (Applicability.SAFE if safe else Applicability.UNSAFE)
    assert f.fix.imports == ("torch_npu",)  # already imported
    assert apply(src, f).splitlines()[-1] == fixed


@pytest.mark.parametrize("body, safe", [
    # a local device every read of which raises without CUDA
    ("device = torch.device('cuda')\n    return x.to(device)", True),
    ("device = 'cuda:0'\n    y = x.to(device)\n    return torch.zeros(2, device=device) + y", True),
    ("device = 'cuda' if a else 'cuda:1'\n    return x.to(device=device)", True),
    ("try:\n        x = x.to('cuda')\n    except RuntimeError:\n        log()\n        raise\n    return x", True),
    # ... and every way it reaches something that goes on quietly
    ("device = 'cuda'\n    with torch.autocast(device):\n        return x.to(device)", False),
    ("device = torch.device('cuda')\n    run(x, device)", False),  # another function: not followed
    ("device = 'cuda'\n    return device", False),
    ("device = 'cuda'\n    if device == 'cuda':\n        x = x.half()\n    return x.to(device)", False),
    ("device = torch.device('cuda')\n    scaler = torch.amp.GradScaler(device.type)\n    return x.to(device)", False),
    ("global DEVICE\n    DEVICE = 'cuda'\n    return x.to(DEVICE)", False),
    # the original's failure is caught: it went on in the handler
    ("try:\n        x = x.to('cuda')\n    except RuntimeError:\n        pass\n    return x", False),
    ("try:\n        x = x.cuda()\n    except Exception:\n        x = x.cpu()\n    return x", False),
    ("with contextlib.suppress(RuntimeError):\n        x = x.cuda()\n    return x", False),
])
def test_asc601_fix_is_safe_only_where_the_device_reaches_code_that_fails(body, safe):
    src = f"import contextlib\nimport torch\nimport torch_npu\ndef f(x, a):\n    {body}\n"
    fixes = [f.fix for f in found(src, "ASC601")]
    assert fixes and all(fix is not None for fix in fixes), src
    assert {fix.applicability for fix in fixes} == {Applicability.SAFE if safe else Applicability.UNSAFE}, src


def test_asc601_without_torch_npu_import_is_unsafe_and_adds_it():
    src = "import torch\ndevice = 'npu'\nmodel = model.cuda()\n"
    (f,) = found(src, "ASC601")
    assert f.fix.applicability == Applicability.UNSAFE and f.fix.imports == ("torch_npu",)


@pytest.mark.parametrize("line", [
    "ok = device == 'cuda'",
    "name = 'cuda'",
    "print('cuda:0')",
    "msg = f'cuda:{rank} is busy'",
    "fmt = 'cuda:{} {}'.format(a, b)",
    "x = torch.cuda.current_device()",
    "x = x.npu()",
    "x = x.to('npu:0')",
    "x = x.to(device)",
])
def test_asc601_near_misses(line):
    assert found(f"import torch\nimport torch_npu\n{line}\n", "ASC601") == []


def test_asc601_backend_switches_are_deliberate():
    src = """
        import torch
        import torch_npu

        def place(model, args):
            if args.device_type == "npu":
                model = model.npu()
            elif torch.cuda.is_available():
                model = model.cuda()
            dev = torch.device("npu" if is_npu_available() else "cuda")
            return model.to(dev)
    """
    assert found(src, "ASC601") == []


def test_asc601_cuda_guard_alone_is_not_a_switch():
    src = """
        import torch
        import torch_npu

        device = "cuda" if torch.cuda.is_available() else "cpu"
    """
    assert [f.line for f in found(src, "ASC601")] == [5]


# --------------------------------------------------------------------------- ASC602
@pytest.mark.parametrize("line", [
    "dist.init_process_group(backend='nccl')",
    "dist.init_process_group('nccl', init_method='env://')",
    "torch.distributed.init_process_group(backend=\"nccl\", world_size=2, rank=0)",
    "g = dist.new_group([0, 1], backend='nccl')",
])
def test_asc602_forms_and_fix(line):
    src = f"import torch\nimport torch.distributed as dist\nimport torch_npu\n{line}\n"
    (f,) = found(src, "ASC602")
    assert f.fix.applicability == Applicability.SAFE
    out = apply(src, f).splitlines()[-1]
    assert "hccl" in out and "nccl" not in out


def test_asc602_bound_backend_is_fixed_where_bound_unsafely():
    src = """
        import torch.distributed as dist
        import torch_npu

        def init(rank):
            backend = "nccl"
            dist.init_process_group(backend=backend, rank=rank)
    """
    (f,) = found(src, "ASC602")
    assert f.line == 7 and f.fix.applicability == Applicability.UNSAFE  # other reads of `backend` change too
    (edit,) = f.fix.edits
    assert edit.span.line == 6 and edit.text == '"hccl"'


def test_asc602_option_default_is_fixed_and_choices_are_left():
    src = """
        import argparse
        import torch
        import torch_npu

        parser = argparse.ArgumentParser()
        parser.add_argument("--dist-backend", default="nccl", choices=["nccl", "gloo"])
        torch.distributed.init_process_group(backend=parser.parse_args().dist_backend)
    """
    (f,) = found(src, "ASC602", target="npu")
    assert f.line == 7 and "default 'nccl' of the backend option `dist_backend`" in f.message
    assert '"hccl", choices=["nccl", "gloo"]' in apply(src, f)


def test_asc602_rebinding_is_followed():
    src = """
        import torch.distributed as dist
        import torch_npu

        def init(rank):
            backend = "nccl"
            backend = "hccl"
            dist.init_process_group(backend=backend, rank=rank)
    """
    assert found(src, "ASC602") == []


@pytest.mark.parametrize("line", [
    "dist.init_process_group(backend='hccl')",
    "dist.init_process_group(backend='gloo')",
    "dist.init_process_group(backend=args.dist_backend)",
    "dist.init_process_group(backend='hccl' if is_npu else 'nccl')",
    "same = dist.get_backend() == 'nccl'",
    "other.init(backend='nccl')",
])
def test_asc602_near_misses(line):
    assert found(f"import torch.distributed as dist\nimport torch_npu\n{line}\n", "ASC602") == []


# --------------------------------------------------------------------------- ASC603
@pytest.mark.parametrize("line, fixed, safe", [
    ("torch.cuda.synchronize()", "torch.npu.synchronize()", True),
    ("torch.cuda.set_device(local_rank)", "torch.npu.set_device(local_rank)", True),
    ("n = torch.cuda.device_count()", "n = torch.npu.device_count()", False),
    ("torch.cuda.manual_seed_all(seed)", "torch.npu.manual_seed_all(seed)", False),
    ("mb = torch.cuda.max_memory_allocated() / 2**20", "mb = torch.npu.max_memory_allocated() / 2**20", False),
    ("s = torch.cuda.Stream()", "s = torch.npu.Stream()", True),
    ("e = torch.cuda.Event(enable_timing=True)", "e = torch.npu.Event(enable_timing=True)", True),
    ("scaler = torch.cuda.amp.GradScaler(init_scale=2.**16)", "scaler = torch.npu.amp.GradScaler(init_scale=2.**16)",
     False),
    ("ctx = torch.cuda.amp.autocast(enabled=True)", "ctx = torch.npu.amp.autocast(enabled=True)", False),
    ("torch.cuda.current_stream().synchronize()", "torch.npu.current_stream().synchronize()", True),
    ("p = torch.cuda.get_device_properties(0).total_memory", "p = torch.npu.get_device_properties(0).total_memory",
     True),
    ("torch.cuda.memory._record_memory_history()", "torch.npu.memory._record_memory_history()", False),
])
def test_asc603_one_to_one_twins_get_the_rename(line, fixed, safe):
    """Safe only where the CUDA API fails on an Ascend host; where it answers quietly (False, 0, a no-op,
    a disabled autocast) the rename changes what the program computes."""
    src = f"import torch\nimport torch_npu\n{line}\n"
    (f,) = found(src, "ASC603")
    assert f.fix.applicability == (Applicability.SAFE if safe else Applicability.UNSAFE)
    assert apply(src, f).splitlines()[-1] == fixed


def test_asc603_keeps_the_torch_alias():
    src = "import torch as th\nimport torch_npu\nth.cuda.synchronize()\n"
    (f,) = found(src, "ASC603")
    assert apply(src, f).splitlines()[-1] == "th.npu.synchronize()"


def test_asc603_decorator_form():
    src = "import torch\nimport torch_npu\n@torch.cuda.amp.autocast()\ndef forward(x):\n    return x\n"
    (f,) = found(src, "ASC603")
    assert f.line == 3 and f.fix is not None


def test_asc603_from_import_is_reported_at_the_import_and_fixed_there():
    src = ("import torch_npu\nfrom torch.cuda.amp import autocast, GradScaler as Scaler\n"
           "scaler = Scaler()\nwith autocast():\n    pass\n")
    fs = found(src, "ASC603")
    assert [f.line for f in fs] == [2, 2]
    fixes = [f.fix for f in fs if f.fix is not None]
    assert len(fixes) == 1 and fixes[0].applicability == Applicability.UNSAFE  # autocast/GradScaler answer quietly
    assert apply(src, fs[0]).splitlines()[1] == "from torch_npu.npu.amp import autocast, GradScaler as Scaler"


def test_asc603_from_import_with_a_non_twin_has_no_fix():
    src = "import torch_npu\nfrom torch.cuda import synchronize, nvtx\n"
    fs = found(src, "ASC603")
    assert len(fs) == 2 and all(f.fix is None for f in fs)


def test_asc603_spelling_that_cannot_be_kept_gets_no_fix():
    src = "import torch_npu\nfrom torch import cuda\ncuda.synchronize()\n"
    (f,) = found(src, "ASC603")
    assert f.fix is None and "torch.npu.synchronize" in f.message


def test_asc603_unsafe_without_torch_npu_import():
    src = "import torch\nx = y.to('npu')\ntorch.cuda.synchronize()\n"
    (f,) = found(src, "ASC603")
    assert f.fix.applicability == Applicability.UNSAFE and f.fix.imports == ("torch_npu",)


@pytest.mark.parametrize("line, words", [
    ("g = torch.cuda.CUDAGraph()", ["torch.npu.NPUGraph", "not a drop-in"]),
    ("t = torch.cuda.DoubleTensor(3)", ["float64"]),
    ("torch.cuda.nvtx.range_push('fwd')", ["no torch.npu twin", "mstx"]),
    ("a = torch.cuda.get_arch_list()", ["no torch.npu twin"]),
    ("major, minor = torch.cuda.get_device_capability()", ["no torch.npu twin", "compatibility"]),
])
def test_asc603_differing_or_missing_twins_have_a_note_and_no_fix(line, words):
    (f,) = found(f"import torch\nimport torch_npu\n{line}\n", "ASC603")
    assert f.fix is None
    for word in words:
        assert word in f.message


@pytest.mark.parametrize("line", [
    "m = torch.cuda",
    "torch.npu.synchronize()",
    "err = torch.cuda.OutOfMemoryError",
    "x = torch.cuda.some_future_api()",
    "n = torch.npu.device_count() if on_npu else torch.cuda.device_count()",
])
def test_asc603_near_misses(line):
    assert found(f"import torch\nimport torch_npu\n{line}\n", "ASC603") == []


@pytest.mark.parametrize("table", [
    "SYNC = {'cuda': torch.cuda.synchronize, 'npu': torch.npu.synchronize}",
    "SYNC = dict(cuda=torch.cuda.synchronize, npu=torch.npu.synchronize)",
    "SYNC = dict(gpu=torch.cuda.synchronize)",
    "SYNC = [('cuda', torch.cuda.synchronize), ('npu', torch.npu.synchronize)]",
    "SYNC = (('cuda', torch.cuda.synchronize), ('npu', torch.npu.synchronize))",
    "SYNC = OrderedDict([('cuda', torch.cuda.synchronize), ('npu', torch.npu.synchronize)])",
    "SYNC = dict([('cuda', torch.cuda.device_count), ('npu', torch.npu.device_count)])",
])
def test_asc603_backend_tables_in_every_spelling_are_deliberate(table):
    """The entry under the `cuda` key is the CUDA backend's: a port must not rewrite it."""
    src = f"import torch\nimport torch_npu\nfrom collections import OrderedDict\n{table}\n"
    assert found(src, "ASC603") == []


@pytest.mark.parametrize("line", [
    "FNS = dict(fn=torch.cuda.synchronize)",  # a keyword that names no backend
    "FNS = [torch.cuda.synchronize, torch.npu.synchronize]",  # a list, not pairs
    "FNS = [('sync', torch.cuda.synchronize)]",
])
def test_asc603_lists_and_dicts_that_are_no_backend_table_are_reported(line):
    assert len(found(f"import torch\nimport torch_npu\n{line}\n", "ASC603")) == 1


def test_asc603_rename_is_unsafe_where_an_except_catches_the_failure():
    src = ("import torch\nimport torch_npu\ndef sync():\n    try:\n        torch.cuda.synchronize()\n"
           "    except RuntimeError:\n        pass\n")
    (f,) = found(src, "ASC603")
    assert f.fix.applicability == Applicability.UNSAFE
    (f,) = found(src.replace("pass", "raise"), "ASC603")
    assert f.fix.applicability == Applicability.SAFE


@pytest.mark.parametrize("src, safe", [
    ("import torch\nimport torch_npu\ntorch.cuda.synchronize()\n", True),
    ("import torch\nimport torch_npu\nsync = torch.cuda.synchronize\n", False),  # a reference raises nothing
    ("import torch_npu\nfrom torch.cuda import synchronize\nsynchronize()\n", True),
    ("import torch_npu\nfrom torch.cuda import synchronize\nhooks = [synchronize]\n", False),
    ("import torch_npu\nfrom torch.cuda import synchronize\ntry:\n    synchronize()\nexcept RuntimeError:\n"
     "    pass\n", False),
    ("import torch_npu\nfrom torch.cuda import Stream, synchronize\ns = Stream()\nsynchronize()\n", True),
])
def test_asc603_rename_is_safe_only_where_the_cuda_api_is_called_and_raises(src, safe):
    fixes = [f.fix for f in found(src, "ASC603") if f.fix is not None]
    assert len(fixes) == 1 and fixes[0].applicability == (Applicability.SAFE if safe else Applicability.UNSAFE)


def test_asc603_elif_after_an_npu_branch_is_deliberate():
    src = """
        import torch
        import torch_npu

        def sync():
            if hasattr(torch, "npu") and torch.npu.is_available():
                torch.npu.synchronize()
            elif torch.cuda.is_available():
                torch.cuda.synchronize()
    """
    assert found(src, "ASC603") == []


def test_twin_table_entries_are_well_formed():
    for name, twin in TWINS.items():
        if twin.exact:
            assert twin.npu == f"torch.npu.{name}", name
        else:
            assert twin.note, f"{name}: a twin that differs (or is missing) needs a note"
        assert twin.npu is None or twin.npu.startswith("torch.npu.")
    assert lookup("amp.autocast").exact and lookup("nvtx.range_push").npu is None
    assert lookup("amp") is None and lookup("not_there") is None


# --------------------------------------------------------------------------- ASC604
@pytest.mark.parametrize("line, fixed", [
    ("torch.backends.cuda.matmul.allow_tf32 = True", "torch.npu.matmul.allow_hf32 = True"),
    ("torch.backends.cudnn.allow_tf32 = False", "torch.npu.conv.allow_hf32 = False"),
])
def test_asc604_forms_and_fix(line, fixed):
    src = f"import torch\nimport torch_npu\n{line}\n"
    (f,) = found(src, "ASC604")
    assert f.fix.applicability == Applicability.UNSAFE  # HF32 changes the NPU's numbers
    assert apply(src, f).splitlines()[-1] == fixed


def test_asc604_alias_and_from_import():
    src = "import torch as th\nimport torch_npu\nfrom torch.backends import cudnn\ncudnn.allow_tf32 = True\n"
    (f,) = found(src, "ASC604")
    assert apply(src, f).splitlines()[-1] == "th.npu.conv.allow_hf32 = True"
    src = "import torch_npu\nfrom torch.backends import cudnn\ncudnn.allow_tf32 = True\n"
    (f,) = found(src, "ASC604")
    assert f.fix is None and "torch.npu.conv.allow_hf32" in f.message


@pytest.mark.parametrize("line", [
    "torch.npu.matmul.allow_hf32 = True",
    "flag = torch.backends.cuda.matmul.allow_tf32",
    "torch.backends.cudnn.benchmark = True",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False",
])
def test_asc604_near_misses(line):
    assert found(f"import torch\nimport torch_npu\n{line}\n", "ASC604") == []


# --------------------------------------------------------------------------- regressions from the corpus
@pytest.mark.parametrize("path", [
    "repo/mindspeed_llm/core/parallel_state.py",  # mindspeed_llm/__init__ applies transfer_to_npu
    "repo/mindspeed/core/transformer/attention.py",  # Megatron patches entered through megatron_adaptor
    "src/mindtorch/nn/modules/module.py",  # the torch emulation implements the CUDA names
])
def test_modules_of_runtime_migrated_packages_are_skipped(path):
    src = "import torch\nimport torch_npu\ntorch.cuda.synchronize()\nx = y.cuda()\n"
    assert lint(src, select=["ASC6"], path=path) == []
    assert len(lint(src, select=["ASC6"], path="repo/train/x.py")) == 2


@pytest.mark.parametrize("imp", ["import mindnlp", "import mindtorch as torch", "from mindspeed_llm import x"])
def test_runtime_migrating_imports(imp):
    assert lint(f"{imp}\nimport torch_npu\nx = y.cuda()\n", select=["ASC6"]) == []


def test_npu_is_matched_as_a_word_not_inside_input():
    src = """
        import torch
        import torch_npu

        def load(model, input):
            if input is not None:
                model = model.cuda()
            return model
    """
    assert len(found(src, "ASC601")) == 1


def test_if_elif_chain_naming_the_npu_is_a_switch():
    src = """
        import torch
        import torch_npu

        def mem(device):
            if "cuda" in device:
                return torch.cuda.memory_allocated()
            elif "npu" in device:
                return torch_npu.npu.memory_allocated()
    """
    assert found(src, "ASC603") == []


def test_function_that_probes_for_an_npu_is_a_switch():
    src = """
        import torch

        def pick_device():
            device = None
            try:
                import torch_npu
                if torch.npu.is_available():
                    device = "npu:0"
            except ImportError:
                pass
            if device is None:
                device = "cuda" if torch.cuda.is_available() else "cpu"
            return device
    """
    assert lint(src, select=["ASC6"]) == []


@pytest.mark.parametrize("cond", ["losses.device.type == 'cuda'", "x.is_cuda", "'cuda' in str(x.device)"])
def test_runtime_device_dispatch_is_a_switch(cond):
    src = f"import torch\nimport torch_npu\nctx = torch.cuda.stream(torch.cuda.Stream()) if {cond} else None\n"
    assert found(src, "ASC603") == []


def test_explicit_gpu_vendor_guard_is_a_switch():
    src = ("import torch\nimport torch_npu\n"
           "is_hopper = is_nvidia and torch.cuda.get_device_capability()[0] >= 9\n"
           "if device_target == 'GPU':\n    d = torch.device('cuda', 0)\n")
    assert lint(src, select=["ASC6"]) == []


def test_cuda_availability_guard_is_not_a_switch():
    src = "import torch\nimport torch_npu\nif torch.cuda.is_available():\n    torch.cuda.manual_seed_all(0)\n"
    assert [f.line for f in found(src, "ASC603")] == [3, 4]


def test_cuda_only_library_probe_is_a_switch():
    src = """
        import torch
        import torch_npu

        def enable_xformers(use_xformers):
            if not is_xformers_available():
                raise ModuleNotFoundError("xformers")
            elif not torch.cuda.is_available():
                raise ValueError("xformers needs a GPU")
            else:
                q = torch.randn((1, 2, 40), device="cuda")
    """
    assert lint(src, select=["ASC6"]) == []


def test_gpu_capability_probe_is_a_switch():
    src = ("import torch\nimport torch_npu\n"
           "if bf16 and torch.cuda.is_available() and not is_torch_bf16_gpu_available():\n"
           "    raise ValueError('this GPU has no bf16')\n")
    assert found(src, "ASC603") == []


def test_cuda_code_inside_an_npu_branch_is_a_leftover():
    src = """
        import torch
        import torch_npu

        def setup(device, local_rank):
            if torch.npu.is_available():
                device = torch.device("npu:0")
            else:
                torch.distributed.init_process_group(backend="nccl")
            if device.type == "npu":
                torch.cuda.set_device(device)
            if not use_npu:
                model = model.cuda()
            x = x.cuda() if use_npu else x
    """
    got = sorted((f.line, f.code) for f in lint(src, select=["ASC6"]))
    assert got == [(11, "ASC603"), (14, "ASC601")]


def test_function_probing_the_npu_still_reports_unguarded_leftovers():
    src = """
        import torch
        import torch_npu

        def setup_devices(self):
            if self.local_rank == -1:
                device = torch.device("npu:0" if torch.npu.is_available() else "cpu")
            else:
                if not torch.distributed.is_initialized():
                    torch.distributed.init_process_group(backend="nccl")
                device = torch.device("npu", self.local_rank)
            return device
    """
    assert [(f.line, f.code) for f in lint(src, select=["ASC6"])] == [(10, "ASC602")]


@pytest.mark.parametrize("test, flagged", [
    ("args.npu is not None", False),  # the cuda line is in the else branch: an NPU is set in the `if`
    ("args.npu is None", True),
    ("device != 'npu'", True),
    ("device == 'npu'", False),
])
def test_polarity_of_npu_tests(test, flagged):
    src = f"import torch\nimport torch_npu\nif {test}:\n    pass\nelse:\n    loc = 'cuda:{{}}'.format(gpu)\n"
    assert bool(found(src, "ASC601")) is flagged


@pytest.mark.parametrize("source,code", [
    ("import torch_npu\nimport torch.distributed as dist\n"
     "parser.add_argument('--dist-backend', default='nccl', type=str)\n"
     "dist.init_process_group(backend=args.dist_backend)", "ASC602"),
    ("import torch_npu\nimport torch.distributed as dist\ndef main(args):\n"
     "    dist.init_process_group(backend=args.backend)\n"
     "def parse():\n    parser.add_argument('-b', '--backend', default='nccl')", "ASC602"),
    ("import torch_npu\nparser.add_argument('--device', default='cuda', help='cuda or cpu')", "ASC601"),
])
def test_option_defaults_are_reported_when_porting_only(source, code):
    """A 'cuda' / 'nccl' option default is a leftover once every file is declared NPU code (--target npu);
    elsewhere launch scripts often pass the NPU value, so it is not reported."""
    assert code in codes(source, select=[code], target="npu")
    assert code not in codes(source, select=[code])
