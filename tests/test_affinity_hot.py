"""Hot-path rules ASC101, ASC201-ASC204 on realistic multi-line code, their fix data, and the
semantic-model queries they rely on (step loops called from a loop, one-step guards, test code)."""
from __future__ import annotations

import ast
import textwrap
from typing import List

import pytest
from conftest import REGISTRY, lint

from ascend_lint.docs import rule_text
from ascend_lint.rule import Applicability, Finding


def found(source: str, code: str, **kwargs) -> List[Finding]:
    return [f for f in lint(source, select=[code], **kwargs) if f.code == code]


def lines(source: str, code: str, **kwargs) -> List[int]:
    return [f.line for f in found(source, code, **kwargs)]


def marked(source: str, code: str) -> List[int]:
    """Lines carrying a trailing `# <code>` marker."""
    return [n for n, text in enumerate(textwrap.dedent(source).splitlines(), 1) if text.rstrip().endswith("# " + code)]


def apply_edits(source: str, finding: Finding) -> str:
    """A minimal text applier for the edit ops these rules emit (the real fixer uses libcst)."""
    text = textwrap.dedent(source)
    rows = text.splitlines(keepends=True)
    tree = ast.parse(text)
    inserts, replaces = [], []
    for edit in finding.fix.edits:
        if edit.op == "replace":
            replaces.append(edit)
        elif edit.op == "insert_body_end":
            node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.lineno == edit.span.line)
            indent = " " * node.body[0].col_offset
            inserts.append((node.end_lineno, indent + edit.text + "\n"))
        elif edit.op == "remove_statement":
            replaces.append(edit)
    for edit in sorted(replaces, key=lambda e: (e.span.line, e.span.col), reverse=True):
        row = rows[edit.span.line - 1]
        assert edit.span.line == edit.span.end_line
        new = edit.text if edit.op == "replace" else "pass"
        rows[edit.span.line - 1] = row[:edit.span.col] + new + row[edit.span.end_col:]
    for after, line in sorted(inserts, reverse=True):
        rows.insert(after, line)
    return "".join(rows)


# --------------------------------------------------------------------------- ShuffleNetV2
SHUFFLENET = """
import torch
import torch.nn as nn
import torch_npu

GROUPS = 2


def channel_shuffle(x, groups):
    batch, channels, height, width = x.size()
    x = x.view(batch, groups, channels // groups, height, width)
    x = torch.transpose(x, 1, 2).contiguous()  # ASC101
    return x.view(batch, -1, height, width)


class InvertedResidual(nn.Module):
    def __init__(self, channels):
        super().__init__()
        half = channels // 2
        self.branch = nn.Sequential(nn.Conv2d(half, half, 1), nn.BatchNorm2d(half), nn.ReLU(inplace=True))
        self.order = [i // 2 + (i % 2) * half for i in range(channels)]

    def forward(self, x):
        x1, x2 = x.chunk(2, dim=1)
        out = torch.cat((x1, self.branch(x2)), dim=1)
        index = torch.tensor(self.order).to('npu')  # ASC201
        return out.index_select(1, index)


class ShuffledHead(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.channels = channels

    def forward(self, x):
        perm = torch.arange(self.channels, device=x.device)  # allocated on the device: fine
        mean = x.mean((2, 3), keepdim=True).to(x.device)  # not host data
        scale = torch.tensor([1.0, 2.0]).to(torch.float16)  # a dtype cast on the host: fine
        return x.index_select(1, perm) - mean
"""


def test_shufflenet_channel_shuffle_and_index_to_npu():
    assert lines(SHUFFLENET, "ASC101") == marked(SHUFFLENET, "ASC101")
    assert lines(SHUFFLENET, "ASC201") == marked(SHUFFLENET, "ASC201")
    (finding,) = found(SHUFFLENET, "ASC201")
    assert "register_buffer" in finding.message and "`forward`" in finding.message


def test_shufflenet_index_fix_registers_a_buffer():
    (finding,) = found(SHUFFLENET, "ASC201")
    fix = finding.fix
    assert fix is not None and fix.applicability is Applicability.UNSAFE
    insert, replace = fix.edits
    assert insert.op == "insert_body_end" and replace.op == "replace"
    assert insert.text == "self.register_buffer('_index_buf', torch.tensor(self.order), persistent=False)"
    assert replace.text == "self._index_buf"
    init_line = textwrap.dedent(SHUFFLENET).splitlines().index("    def __init__(self, channels):") + 1
    assert insert.span.line == init_line
    fixed = apply_edits(SHUFFLENET, finding)
    assert "        index = self._index_buf  # ASC201\n" in fixed
    assert "        self.register_buffer('_index_buf', torch.tensor(self.order), persistent=False)\n" in fixed
    ast.parse(fixed)
    assert not found(fixed, "ASC201")  # idempotent: nothing left to fix


def test_buffer_name_does_not_clash():
    src = """
    import torch
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self._index_buf = None
            self.order = [1, 0]
        def forward(self, x):
            index = torch.tensor(self.order).npu()
            other = torch.tensor([3, 4]).npu()
            again = torch.tensor([5, 6]).npu()
            return x[index] + x[other] + x[again]
    """
    texts = [f.fix.edits[0].text for f in found(src, "ASC201")]
    names = [t.split("'")[1] for t in texts]
    assert names == ["_index_buf2", "_other_buf", "_again_buf"]


def test_fix_strips_the_device_keyword_and_keeps_module_constants():
    src = """
    import torch
    SCALE = [0.5, 2.0]
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
        def forward(self, x):
            return x * torch.tensor(SCALE, dtype=torch.float16, device=x.device)
    """
    (finding,) = found(src, "ASC201")
    insert, replace = finding.fix.edits
    assert insert.text == ("self.register_buffer('_scale_buf', torch.tensor(SCALE, dtype=torch.float16), "
                           "persistent=False)")
    fixed = apply_edits(src, finding)
    assert "return x * self._scale_buf" in fixed and not found(fixed, "ASC201")


def test_no_fix_when_the_expression_is_not_constant_only():
    no_init = """
    import torch
    class M(torch.nn.Module):
        def forward(self, x):
            return x * torch.tensor([0.5, 2.0]).npu()
    """
    local_data = """
    import torch
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
        def forward(self, x):
            order = [1, 0]
            return x[:, torch.tensor(order).npu()]
    """
    attr_set_elsewhere = """
    import torch
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.order = [1, 0]
        def reorder(self, order):
            self.order = order
        def forward(self, x):
            return x[:, torch.tensor(self.order).npu()]
    """
    unknown_function = """
    import torch
    def make_order():
        return [1, 0]
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
        def forward(self, x):
            return x[:, torch.tensor(make_order()).npu()]
    """
    via_name = """
    import torch
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
        def forward(self, x):
            w = torch.tensor([1.0, 2.0])
            return x * w.npu()
    """
    for src in (no_init, local_data, attr_set_elsewhere, unknown_function, via_name):
        (finding,) = found(src, "ASC201")
        assert finding.fix is None, src


BUFFER_USES = """
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def reset(t):
    t.zero_()


def scale(t, x):
    return x * t


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU(inplace=True)

    def _reset(self, t):
        t.fill_(0)

    def _scale(self, t, x):
        return x * t

    def forward(self, x):
        h = torch.tensor([0.5, 2.0]).npu()
        {use}
        return x * h
"""


@pytest.mark.parametrize("use", [
    # in place on the value or on an alias or view of it: a buffer would drift on every call
    "torch.exp_(h)", "torch.clamp_(h, 0, 1)", "F.relu(h, inplace=True)", "F.dropout(h, 0.1, True, True)",
    "nn.init.uniform_(h)", "torch.nn.init.normal_(h)", "h.data *= 2", "h[0] += 1", "h[0] = 1",
    "h[:1].mul_(2)", "torch.add(x, 1, out=h)", "g = h.view(-1)\n        g.add_(1)",
    "v = torch.reshape(h, (-1,))\n        torch.exp_(v)", "dist.all_reduce(h)", "h.set_(x)",
    # passed to a local function that changes its parameter, or to code not known to leave it alone
    "reset(h)", "self._reset(h)", "self.act(h)", "process(h)", "nn.Parameter(h)", "rows = list(h)",
    "x.set_(h)", "cache.append(h)", "kw = dict(t=h)", "scale(*[h, x])",
])
def test_asc201_no_buffer_fix_where_the_tensor_may_be_changed_or_kept(use):
    src = BUFFER_USES.replace("{use}", use)
    (finding,) = found(src, "ASC201")  # the finding stays: the per-call copy is real
    assert finding.fix is None, use


@pytest.mark.parametrize("use", [
    "y = x.index_select(1, h.long())", "y = torch.cat([x, h])", "y = scale(h, x)", "y = self._scale(h, x)",
    "n = len(h)", "print(h.shape)", "y = x.masked_fill(h > 1, 0)", "y = F.linear(x, h.view(1, 2))",
    "y = x.clone()\n        y.add_(h)",
])
def test_asc201_buffer_fix_where_the_tensor_is_only_read(use):
    (finding,) = found(BUFFER_USES.replace("{use}", use), "ASC201")
    assert finding.fix is not None and finding.fix.applicability is Applicability.UNSAFE, use


@pytest.mark.parametrize("change", ["self.order.reverse()", "self.order.sort()", "self.order.pop()",
                                    "random.shuffle(self.order)", "np.random.shuffle(self.order)"])
def test_asc201_no_buffer_fix_for_an_attribute_reordered_after_init(change):
    src = ("import random\nimport numpy as np\nimport torch\nclass M(torch.nn.Module):\n"
           "    def __init__(self):\n        super().__init__()\n        self.order = [1, 0, 2]\n"
           f"    def reshuffle(self):\n        {change}\n"
           "    def forward(self, x):\n        return x[:, torch.tensor(self.order).npu()]\n")
    (finding,) = found(src, "ASC201")
    assert finding.fix is None
    (finding,) = found(src.replace(change, "pass"), "ASC201")
    assert finding.fix is not None


# --------------------------------------------------------------------------- autograd.Function
AUTOGRAD = """
import torch
import torch_npu


class ScaledGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, index):
        ctx.save_for_backward(index)
        torch.npu.synchronize()  # ASC202
        weight = torch.tensor([0.25, 0.75], device='npu')  # ASC201
        return x.index_select(0, index) * weight

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        stream = torch.npu.current_stream()
        stream.synchronize()  # ASC202
        scale = torch.tensor(2.0).npu()  # ASC201
        return grad * scale, None


def helper(x):
    torch.npu.synchronize()  # not a hot scope
    return torch.tensor([1, 2]).npu()  # not a hot scope
"""


def test_autograd_function_forward_and_backward_are_hot():
    assert lines(AUTOGRAD, "ASC202") == marked(AUTOGRAD, "ASC202")
    assert lines(AUTOGRAD, "ASC201") == marked(AUTOGRAD, "ASC201")
    h2d = found(AUTOGRAD, "ASC201")
    assert all(f.fix is None for f in h2d), "no register_buffer fix for a Function"
    assert "build it once outside the Function" in h2d[0].message
    assert "scalar needs no copy" in h2d[1].message and "torch.full" in h2d[1].message
    syncs = found(AUTOGRAD, "ASC202")
    assert "`forward`" in syncs[0].message and "`backward`" in syncs[1].message
    assert "stream.synchronize()" in syncs[1].message


# --------------------------------------------------------------------------- MobileNet + apex
MOBILENET = """
import time

import torch
import torch_npu
from apex import amp


def train(model, loader, criterion, optimizer, epochs, print_freq=100):
    model, optimizer = amp.initialize(model, optimizer, opt_level='O2', combine_grad=True)
    for epoch in range(epochs):
        model.train()
        end = time.time()
        running = torch.zeros((), device='npu')
        for i, (images, target) in enumerate(loader):
            labels_host = target.numpy()  # host data from the loader: fine
            images = images.to('npu', non_blocking=True)
            target = target.to('npu', non_blocking=True)
            output = model(images)
            loss = criterion(output, target)
            optimizer.zero_grad()
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()
            torch.npu.synchronize()  # ASC202
            batch_time = time.time() - end
            top1 = float(torch.mean((output.argmax(1) == target).float()))  # ASC203
            running += loss.detach()
            print(f'loss {loss}')  # ASC203
            if i % print_freq == 0:
                torch.npu.synchronize()
                print('epoch', epoch, 'step', i, 'loss', loss.item(), 'time', batch_time)
            if i == len(loader) - 1:
                last = loss.item()
            end = time.time()
        # once per epoch, around the step loop: not hot
        torch.npu.synchronize()
        print('epoch loss', running.item() / len(loader))
        preds = output.argmax(1).cpu().numpy()
"""


def test_mobilenet_apex_loop_only_the_innermost_step_loop_is_hot():
    assert lines(MOBILENET, "ASC202") == marked(MOBILENET, "ASC202")
    assert lines(MOBILENET, "ASC203") == marked(MOBILENET, "ASC203")
    (sync,) = found(MOBILENET, "ASC202")
    assert "training step loop" in sync.message


def test_mobilenet_item_in_step_loop():
    src = MOBILENET.replace("            running += loss.detach()\n",
                            "            running += loss.item()  # ASC203\n")
    assert lines(src, "ASC203") == marked(src, "ASC203")
    messages = [f.message for f in found(src, "ASC203")]
    assert any(m.startswith("`loss.item()` copies a device tensor to the host") for m in messages)


def test_host_sync_is_preview_only():
    assert not found(MOBILENET, "ASC203", preview=False)
    assert found(MOBILENET, "ASC202", preview=True)


def test_synchronize_fix_removes_the_statement():
    (finding,) = found(MOBILENET, "ASC202")
    (edit,) = finding.fix.edits
    assert finding.fix.applicability is Applicability.UNSAFE
    assert edit.op == "remove_statement"
    row = textwrap.dedent(MOBILENET).splitlines()[edit.span.line - 1]
    assert row[edit.span.col:edit.span.end_col] == "torch.npu.synchronize()"


def test_synchronize_that_is_not_a_whole_statement_has_no_fix():
    src = """
    import torch
    class M(torch.nn.Module):
        def forward(self, x):
            done = torch.npu.synchronize() or x
            return done
    """
    (finding,) = found(src, "ASC202")
    assert finding.fix is None


def test_per_step_function_called_from_the_loop():
    src = """
    import torch
    class Trainer:
        def train_step(self, batch):
            loss = self.model(batch)
            loss.backward()
            self.optimizer.step()
            torch.npu.synchronize()  # ASC202
            return loss.item()  # ASC203

        def fit(self, loader):
            for batch in loader:
                self.train_step(batch)

    def benchmark_backward(x):
        out = x.sum()
        out.backward()
        torch.npu.synchronize()
        return out.item()
    """
    assert lines(src, "ASC202") == marked(src, "ASC202")
    assert lines(src, "ASC203") == marked(src, "ASC203")


def test_test_code_is_not_training_code():
    src = """
    import torch
    def check(model, loader, optimizer):
        for x in loader:
            loss = model(x)
            loss.backward()
            optimizer.step()
            torch.npu.synchronize()
            print(loss.item())
    """
    assert found(src, "ASC202") and found(src, "ASC203")
    assert not found(src, "ASC202", path="tests/test_training.py")
    assert not found(src, "ASC203", path="tests/test_training.py")


def test_view_copies_and_h2d_in_test_files_are_not_reported():
    src = "import torch_npu\ndef test_transpose():\n    y = x.transpose(0, 1).contiguous()\n"
    assert not found(src, "ASC102")
    assert found(src.replace("def test_transpose", "def make"), "ASC102")
    assert not found(SHUFFLENET, "ASC101", path="tests/test_shuffle.py")
    assert not found(SHUFFLENET, "ASC201", path="tests/test_shuffle.py")


def test_noqa_keeps_an_intended_synchronize():
    src = MOBILENET.replace("torch.npu.synchronize()  # ASC202", "torch.npu.synchronize()  # noqa: ASC202")
    assert not found(src, "ASC202")


# --------------------------------------------------------------------------- MindSpore
MINDSPORE = """
import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

MEAN = [0.485, 0.456, 0.406]


class Normalize(nn.Cell):
    def __init__(self):
        super().__init__()
        self.std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
        self.shift = Tensor(np.zeros((1, 3, 1, 1), np.float32))  # once, in __init__: fine

    def construct(self, x):
        mean = Tensor(np.array(MEAN, np.float32).reshape(1, 3, 1, 1))  # ASC201
        std = Tensor(self.std)  # ASC201
        eps = ms.Tensor(1e-6, ms.float32)  # ASC201
        y = Tensor(x, ms.float32)  # a cast of the input: fine
        return (y - mean) / (std + eps) + self.shift


class TrainStep(nn.Cell):
    def __init__(self, network, optimizer):
        super().__init__()
        self.network, self.optimizer = network, optimizer

    def construct(self, data, label):
        ms.hal.synchronize()  # ASC202
        return self.network(data, label)


def train(net, dataset, optimizer, grad_fn):
    for step, (data, label) in enumerate(dataset.create_tuple_iterator()):
        loss, grads = grad_fn(data, label)
        optimizer(grads)
        value = loss.asnumpy()  # ASC203
        host_labels = label.asnumpy()  # host data from the iterator: fine
"""


def test_mindspore_construct_tensor_from_numpy():
    assert lines(MINDSPORE, "ASC201") == marked(MINDSPORE, "ASC201")
    first = found(MINDSPORE, "ASC201")[0]
    assert first.message.startswith("`Tensor(...)` in `construct`") and first.fix is None
    assert lines(MINDSPORE, "ASC202") == marked(MINDSPORE, "ASC202")
    assert lines(MINDSPORE, "ASC203") == marked(MINDSPORE, "ASC203")


# --------------------------------------------------------------------------- ASC204
def test_launch_blocking_forms_and_fix():
    src = """
    import os
    import torch_npu

    os.environ["ASCEND_LAUNCH_BLOCKING"] = "1"  # ASC204
    os.environ.setdefault("ASCEND_LAUNCH_BLOCKING", "1")  # ASC204
    os.putenv("ASCEND_LAUNCH_BLOCKING", "1")  # ASC204
    os.environ["ASCEND_LAUNCH_BLOCKING"] = "0"
    value = os.environ.setdefault("ASCEND_LAUNCH_BLOCKING", "1")  # ASC204


    def debug_mode():
        if True:
            os.environ['ASCEND_LAUNCH_BLOCKING'] = '1'  # ASC204
    """
    assert lines(src, "ASC204") == marked(src, "ASC204")
    findings = found(src, "ASC204")
    assert all(f.fix is None for f in findings if f.line == 9), "a call inside an assignment is not a statement"
    for f in findings:
        if f.line != 9:
            (edit,) = f.fix.edits
            assert edit.op == "remove_statement" and f.fix.applicability is Applicability.UNSAFE
    fixed = apply_edits(src, findings[-1])
    assert "    if True:\n        pass  # ASC204" in fixed


def test_launch_blocking_needs_npu_context():
    src = "import os\nos.environ['ASCEND_LAUNCH_BLOCKING'] = '1'\n"
    assert not found(src, "ASC204")
    assert found(src, "ASC204", target="npu")


# --------------------------------------------------------------------------- metadata and docs
def test_metadata_matches_the_catalogue():
    rules = {code: REGISTRY.rules[code] for code in ("ASC101", "ASC201", "ASC202", "ASC203", "ASC204")}
    # ASC202/ASC203: preview; ASC201 in the default set since the held-out measurement of 2026-11-28
    assert [r.preview for r in rules.values()] == [False, False, True, True, False]
    assert [r.npu_context for r in rules.values()] == [True, False, False, False, True]
    assert rules["ASC101"].fix_applicability is None and rules["ASC203"].fix_applicability is None
    for code in ("ASC201", "ASC202", "ASC204"):
        rule = rules[code]
        assert rule.fix_applicability is Applicability.UNSAFE
        assert rule.docs.fix_safety.startswith("Unsafe")
        text = rule_text(rule)
        for section in ("## What it does", "## Why is this bad on Ascend?", "## Example", "## Use instead",
                        "## Fix safety", "## References"):
            assert section in text, (code, section)
    assert rules["ASC203"].docs.fix_safety.startswith("No fix")


# --------------------------------------------------------------------------- semantic model
def test_step_function_counts_only_when_a_step_loop_calls_it():
    from ascend_lint.analysis.semantic import FileContext

    src = textwrap.dedent("""
    def step(batch):
        model(batch).backward()

    def bench(x):
        x.sum().backward()

    for batch in loader:
        step(batch)
    """)
    ctx = FileContext("s.py", src, ast.parse(src))
    assert ctx.step_loop_callees() == {"step", "model"}


def test_one_step_guard_and_test_code():
    src = """
    for i, x in enumerate(loader):
        model(x).backward()
        optimizer.step()
        if i == 0:
            torch.npu.synchronize()
        if self.global_step == max_steps:
            torch.npu.synchronize()
        if epoch == 3 or x:
            torch.npu.synchronize()  # ASC202
    """
    assert lines("import torch\n" + textwrap.dedent(src), "ASC202") == [
        n + 1 for n in marked(src, "ASC202")]


def test_synchronize_advice_depends_on_where_it_runs():
    forward = lint("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                   "        torch.npu.synchronize()\n        return x\n", select=["ASC202"])
    (f,) = forward
    assert "every N steps" not in f.message and "wait_event" in f.message
    loop = lint("import torch\nfor x in loader:\n    model(x).sum().backward()\n    opt.step()\n"
                "    torch.npu.synchronize()\n", select=["ASC202"])
    (f,) = loop
    assert "every N steps" in f.message


def test_synchronize_message_names_a_long_receiver_without_cutting_it():
    src = ("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
           "        self.pipeline_parallel_state.communication_stream_for_layer.synchronize()\n        return x\n")
    (f,) = lint(src, select=["ASC202"])
    assert "`<...>.communication_stream_for_layer.synchronize()`" in f.message


def test_h2d_batch_sized_fill_advice_names_the_device():
    src = ("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
           "        return torch.tensor([1] * x.size(0)).to(x.device)\n")
    (f,) = lint(src, select=["ASC201"])
    assert "`torch.full((x.size(0),), 1, device=x.device)`" in f.message and f.fix is None


def test_mindspore_tensor_message_says_pynative():
    src = ("import mindspore as ms\nclass Net(ms.nn.Cell):\n    def construct(self, x):\n"
           "        return x * ms.Tensor([2.0], ms.float32)\n")
    (f,) = lint(src, select=["ASC201"])
    assert "PyNative" in f.message
    assert not lint(src.replace("class Net", "ms.set_context(mode=0)\nclass Net"), select=["ASC201"])
