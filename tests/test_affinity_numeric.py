"""ASC401-ASC404, ASC501, ASC502: realistic scripts, messages, positions, options and fixes."""
from __future__ import annotations

import textwrap

from conftest import REGISTRY, lint

from ascend_lint.docs import rule_text
from ascend_lint.rule import Applicability

NUMERIC = ["ASC401", "ASC402", "ASC403", "ASC404", "ASC501", "ASC502"]


def found(src, select=NUMERIC, **kw):
    """(line, code) pairs, sorted."""
    return sorted((f.line, f.code) for f in lint(src, select=select, **kw))


def expected(src, codes=NUMERIC):
    """(line, code) pairs from trailing `# expect: CODE[, CODE]` comments."""
    out = []
    for no, line in enumerate(textwrap.dedent(src).splitlines(), 1):
        if "# expect:" in line:
            for code in line.split("# expect:")[1].split(","):
                code = code.strip().split()[0]
                if code in codes:
                    out.append((no, code))
    return sorted(out)


MINDSPORE_TRAIN = '''
    import mindspore as ms
    import mindspore.dataset as ds
    import mindspore.dataset.vision as vision
    from mindspore import nn, ops
    from mindspore import dtype as mstype
    from mindspore.train import CheckpointConfig, LossMonitor, Model, ModelCheckpoint

    NUM_CLASSES = 1000


    def create_dataset(path, batch_size=256):
        data = ds.ImageFolderDataset(path, shuffle=True, num_parallel_workers=8)
        data = data.map([vision.Decode(), vision.Resize(224), vision.HWC2CHW()], input_columns="image")
        return data.batch(batch_size, drop_remainder=True)


    class Classifier(nn.Cell):
        def __init__(self, in_channels=2048, num_classes=NUM_CLASSES):
            super().__init__()
            self.stem = nn.Conv2d(3, 64, 7, stride=2)
            self.proj = nn.Conv2d(64, in_channels, 1)
            self.pool = ops.ReduceMean(keep_dims=False)
            self.fc = nn.Dense(in_channels, num_classes)  # expect: ASC401
            self.similarity = ops.MatMul(transpose_b=True)  # expect: ASC402

        def construct(self, x, prototypes):
            feats = self.pool(self.proj(self.stem(x)), (2, 3))
            return self.fc(feats) + self.similarity(feats, prototypes)


    def main(data_dir, epochs=90):
        dataset = create_dataset(data_dir)
        steps = dataset.get_dataset_size()
        net = Classifier()
        loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
        model = Model(net, loss, opt, metrics={"acc"})
        config = CheckpointConfig(save_checkpoint_steps=steps,  # expect: ASC501
                                  keep_checkpoint_max=10)
        ckpt = ModelCheckpoint(prefix="cls", directory="./ckpt", config=config)
        model.train(epochs, dataset, callbacks=[ckpt, LossMonitor()], dataset_sink_mode=True)  # expect: ASC502
        for epoch in range(3):
            model.train(1, dataset, dataset_sink_mode=False)
            ms.save_checkpoint(net, f"extra_{epoch}.ckpt")  # once per epoch: not reported
        ms.save_checkpoint(net, "final.ckpt")
'''

TORCH_NPU_CLASSIFIER = '''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch_npu


    class Classifier(nn.Module):
        def __init__(self, num_classes=1000):
            super().__init__()
            self.stem = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.body = nn.Conv2d(64, 2048, 3, padding=1)
            self.fc = nn.Linear(2048, 1000)  # expect: ASC401
            self.aux = nn.Linear(2048, num_classes)  # expect: ASC401
            self.embed = nn.Embedding(num_classes, 300)  # expect: ASC401

        def forward(self, x, target, ignore_index=-1):
            x = self.body(self.stem(x)).mean([2, 3])
            logits = self.fc(x)
            wide = x.float()
            aux = wide @ self.aux.weight.t()  # expect: ASC402
            with torch.npu.amp.autocast(enabled=False):
                sim = torch.mm(x.float(), x.t())
            loss = F.cross_entropy(logits, target.clamp(min=0), reduction="none")
            loss[target == ignore_index] = 0.0  # expect: ASC404
            valid = target != ignore_index
            count = valid.sum()
            picked = logits[valid]  # expect: ASC404
            return loss.sum() / count, aux, sim, picked


    def accuracy(logits, target):
        return logits.argmax(1).eq(target).double().mean()  # expect: ASC403


    def train(model, loader, optimizer):
        for epoch in range(10):
            for step, (images, target) in enumerate(loader):
                loss = model(images.npu(), target.npu())[0]
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                torch.save(model.state_dict(), "latest.pt")  # expect: ASC501
                if step % 500 == 0:
                    torch.save(model.state_dict(), f"step{step}.pt")
            torch.save(model.state_dict(), f"epoch{epoch}.pt")
'''


def test_mindspore_model_train_script():
    assert found(MINDSPORE_TRAIN) == expected(MINDSPORE_TRAIN)


def test_torch_npu_classifier():
    assert found(TORCH_NPU_CLASSIFIER) == expected(TORCH_NPU_CLASSIFIER)


# ----------------------------------------------------------------------------------------- ASC401
def test_asc401_message_names_the_next_multiple_and_points_at_the_argument():
    src = "import torch_npu\nfrom torch import nn\nfc = nn.Linear(2048, 1000)\n"
    (f,) = lint(src, select=["ASC401"])
    assert "1000" in f.message and "not a multiple of 16: consider 1008" in f.message
    assert (f.line, f.col, f.end_col) == (3, 22, 26)


def test_asc401_resolves_aliases_constants_and_defaults():
    src = """
        import torch_npu
        from torch import nn as tnn
        HIDDEN = 1000

        class Block(tnn.Module):
            def __init__(self, width=100):
                super().__init__()
                self.a = tnn.Linear(HIDDEN, 1024)
                self.b = tnn.Linear(1024, width)
                inner = 72
                self.c = tnn.Conv2d(inner, inner, 3)
    """
    msgs = [f.message for f in lint(src, select=["ASC401"])]
    assert len(msgs) == 4
    assert "from `HIDDEN`" in msgs[0] and "the default of `width`" in msgs[1] and "consider 80" in msgs[2]


def test_asc401_is_npu_context_and_can_be_forced():
    src = "import torch.nn as nn\nfc = nn.Linear(2048, 1000)\n"
    assert not lint(src, select=["ASC401"])
    assert len(lint(src, select=["ASC401"], target="npu")) == 1


def test_asc401_options_min_dim_and_alignment():
    src = "import torch_npu\nimport torch.nn as nn\nfc = nn.Linear(12, 8)\nfc2 = nn.Linear(24, 40)\n"
    assert len(lint(src, select=["ASC401"])) == 2  # 24 and 40; 12 and 8 are below min-dim
    opts = {"ASC401": {"min-dim": 8}}
    assert len(lint(src, select=["ASC401"], rule_options=opts)) == 4
    opts = {"ASC401": {"alignment": 8}}
    assert not lint(src, select=["ASC401"], rule_options=opts)


def test_asc401_local_layer_class_is_not_torch():
    src = """
        import torch_npu
        class Linear:
            def __init__(self, a, b):
                pass
        fc = Linear(2048, 1000)
    """
    assert not lint(src, select=["ASC401"])


# ----------------------------------------------------------------------------------------- ASC402
def test_asc402_cell_cast_in_another_statement_counts():
    src = """
        from mindspore import nn, ops, Model
        from mindspore import dtype as mstype

        class Head(nn.Cell):
            def __init__(self):
                super().__init__()
                self.matmul = ops.MatMul()

        def build():
            net = Head()
            return net

        def run():
            net = build()
            net.to_float(mstype.float16)
            return Model(net, loss_fn, opt)
    """
    assert not lint(src, select=["ASC402"])


def test_asc402_self_primitive_with_fp32_cast_operand():
    src = """
        from mindspore import nn, ops
        from mindspore.ops import operations as P
        import mindspore.common.dtype as mstype

        class Attention(nn.Cell):
            def __init__(self):
                super().__init__()
                self.bmm = P.BatchMatMul(transpose_b=True)
                self.cast = P.Cast()

            def construct(self, q, k):
                return self.bmm(self.cast(q, mstype.float32), k)
    """
    (f,) = lint(src, select=["ASC402"])
    assert f.line == 13 and "`ops.BatchMatMul`" in f.message and "float32" in f.message


def test_asc402_apex_register_float_function():
    src = """
        import torch
        from apex import amp as apex_amp
        apex_amp.register_float_function(torch, 'matmul')
        apex_amp.register_float_function(torch.nn.functional, 'softmax')
    """
    (f,) = lint(src, select=["ASC402"])
    assert f.line == 4 and "register_half_function" in f.message


# ----------------------------------------------------------------------------------------- ASC403
def test_asc403_is_preview_and_npu_context():
    src = "import torch_npu\nacc = correct.double().mean()\n"
    assert lint(src, select=["ASC403"], preview=True)
    assert not lint(src, select=["ASC403"], preview=False)
    assert not lint("import torch\nacc = correct.double().mean()\n", select=["ASC403"])


# ----------------------------------------------------------------------------------------- ASC404
def test_asc404_mindspore_construct_and_message():
    src = """
        from mindspore import nn, ops

        class Loss(nn.Cell):
            def construct(self, logits, labels):
                keep = ops.ne(labels, -1)
                logits[~keep] = 0
                return ops.nonzero(keep)
    """
    findings = lint(src, select=["ASC404"])
    assert [f.line for f in findings] == [7, 8]
    assert "`construct`" in findings[0].message and "ops.masked_fill" in findings[0].message
    assert "ops.select" in findings[1].message


def test_asc404_store_advice_depends_on_the_value():
    """`x *= ~mask` only writes zeros: other values get masked_fill / torch.where advice."""
    def message(stmt):
        src = f"import torch\nclass M(torch.nn.Module):\n    def forward(self, x, v):\n        {stmt}\n        return x\n"
        (f,) = lint(src, select=["ASC404"])
        return f.message
    assert "`x *= ~mask`" in message("x[x < 0] = 0")
    for stmt in ("x[x < 0] = -1.0", "x[x.isnan()] = float('-inf')"):
        assert "`x *= ~mask`" not in message(stmt) and "masked_fill_(mask, v)" in message(stmt)
    assert "`x *= ~mask`" not in message("x[x < 0] = v") and "torch.where(mask, values, x)" in message("x[x < 0] = v")
    assert "`x += v * mask`" in message("x[x < 0] += 1")


def test_asc404_only_in_hot_methods():
    src = """
        import torch

        class Sampler(torch.nn.Module):
            def __init__(self, labels):
                super().__init__()
                self.pos = torch.nonzero(labels > 0)

            def sample(self, x):
                return x[x > 0]
    """
    assert not lint(src, select=["ASC404"])


# ----------------------------------------------------------------------------------------- ASC501
def test_asc501_fix_adds_the_keyword():
    src = "from mindspore.train import CheckpointConfig\ncfg = CheckpointConfig(save_checkpoint_steps=10)\n"
    (f,) = lint(src, select=["ASC501"])
    assert f.fix is not None and f.fix.applicability is Applicability.UNSAFE  # the file may be read half-written
    (edit,) = f.fix.edits
    assert (edit.op, edit.name, edit.text) == ("set_keyword", "async_save", "True")
    assert (edit.span.line, edit.span.col, edit.span.end_col) == (2, 6, 48)


def test_asc501_fix_replaces_a_false_value():
    src = "import mindspore as ms\nwhile True:\n    train_step()\n    ms.save_checkpoint(net, 'a.ckpt', async_save=False)\n"
    (f,) = lint(src, select=["ASC501"])
    (edit,) = f.fix.edits
    assert (edit.op, edit.name, edit.text) == ("set_keyword", "async_save", "True")


def test_asc501_fix_replaces_a_positional_false_in_place():
    src = "import mindspore as ms\nfor e in range(3):\n    train_step(x)\n    ms.save_checkpoint(net, 'a.ckpt', True, False)\n"
    (f,) = lint(src, select=["ASC501"])
    (edit,) = f.fix.edits
    assert edit.op == "replace" and edit.text == "True"
    assert (edit.span.line, edit.span.col, edit.span.end_col) == (4, 44, 49)


def test_asc501_no_fix_where_the_file_reads_the_checkpoint_back():
    save = "import mindspore as ms\nfor e in range(3):\n    train_step(x)\n    ms.save_checkpoint(net, {})\n"
    cases = [  # (path saved to, the rest of the file, fix offered)
        ("best", "net2 = ms.load_checkpoint('a.ckpt')\n", False),  # a load, any spelling of it
        ("best", "state = restore_ckpt(best)\n", False),
        ("best", "x = ｌｏａｄ_checkpoint('a.ckpt')\n", False),  # (the tree says `load_checkpoint`: NFKC)
        ("best", "# load_checkpoint('a.ckpt')\nloader = load_data('a')\n", True),  # a comment, other loads
        ("best", "shutil.copy(best, 'b.ckpt')\n", False),  # the saved path passed on
        ("self.best", "shutil.copy(self.best, 'b.ckpt')\n", False),
        ("self.best", "shutil.copy(best, 'b.ckpt')\n", True),  # another name
        ("best", "best = 'a.ckpt'\nprint('best')\n", True),  # named again, passed to no other call
        ("best", "é = 1\nbest = 'a.ckpt'\n", True),  # (a text that is not ASCII)
        ("best", "é = 1\nos.remove(best)\n", False),
        # the saved file named again by an equal literal or expression, or inside another string
        ("'best_model.ckpt'", "upload('best_model.ckpt')\n", False),
        ("os.path.join(d, f'best_{x}.ckpt')", "os.remove(os.path.join(d, f'best_{x}.ckpt'))\n", False),
        ("os.path.join(d, f'best_{x}.ckpt')", "os.remove(os.path.join(d, f'last_{x}.pt'))\n", True),
        ("'best.ckpt'", "subprocess.run(['python', 'eval.py', '--ckpt', 'best.ckpt'])\n", False),
        ("'out/best.ckpt'", "os.system('python eval.py out/best.ckpt')\n", False),
        ("'best.ckpt'", "report(f'wrote best.ckpt at {t}')\n", False),
        ("best", "best = os.path.join(d, 'b.ckpt')\nshow(os.path.join(d, 'b.ckpt'))\n", False),
        ("best", "best = os.path.join(d, 'b.ckpt')\nshow(os.path.join(d, 'c.ckpt'))\n", True),
        ("'best.ckpt'", 'def f():\n    """Writes best.ckpt."""\n', True),  # a docstring reads nothing
    ]
    for path, rest, fixed in cases:
        (f,) = lint(save.format(path) + rest, select=["ASC501"])
        assert (f.fix is not None) is fixed, (path, rest)


def test_asc501_torch_save_has_no_fix():
    src = TORCH_NPU_CLASSIFIER
    (f,) = lint(src, select=["ASC501"])
    assert f.fix is None and "`torch.save`" in f.message


def test_asc501_legacy_callback_import_path():
    src = "from mindspore.train.callback import CheckpointConfig, ModelCheckpoint\ncfg = CheckpointConfig()\n"
    assert len(lint(src, select=["ASC501"])) == 1


# ----------------------------------------------------------------------------------------- ASC502
def test_asc502_autotune_in_another_function_counts():
    src = """
        import mindspore.dataset as ds

        def setup():
            ds.config.set_enable_autotune(True)

        def train(model, data):
            setup()
            model.train(10, data, dataset_sink_mode=True)
    """
    assert not lint(src, select=["ASC502"])


def test_asc502_reports_each_sink_mode_training_call():
    src = """
        import mindspore.dataset as ds

        def train(model, data):
            model.train(10, data, dataset_sink_mode=True)
            model.fit(10, data, data, dataset_sink_mode=True)
    """
    assert [f.line for f in lint(src, select=["ASC502"])] == [5, 6]


# ----------------------------------------------------------------------------------------- metadata
def test_status_context_and_fix_metadata():
    rules = {code: REGISTRY.get(code) for code in NUMERIC}
    assert {c for c, r in rules.items() if r.preview} == {"ASC401", "ASC402", "ASC403", "ASC404", "ASC502"}
    assert {c for c, r in rules.items() if r.npu_context} == {"ASC401", "ASC403"}
    assert {c for c, r in rules.items() if r.fix_applicability} == {"ASC501"}
    assert rules["ASC401"].options == {"min-dim": 16, "alignment": 16}
    for code, rule in rules.items():
        text = rule_text(rule)
        assert "## Fix safety" in text and "## Why is this bad on Ascend?" in text
        safety = rule.docs.fix_safety.lower()
        assert safety.startswith("unsafe") if rule.fix_applicability else safety.startswith("no fix")


def test_asc501_training_loop_needs_training():
    """save_checkpoint counts in a MindSpore step loop (any of its step spellings), not in other loops."""
    trains = ("    loss, grads = grad_fn(x, y)\n    optimizer(grads)\n",
              "    self_loss = trainer(x, y)\n",
              "    loss = self._train_one_batch(batch)\n",
              "    loss = train_step(x, y)\n",
              "    out = grad_fn(x, y)\n    optimizer(out[1])\n")
    for body in trains:
        src = (f"import mindspore as ms\ntrainer = ms.nn.TrainOneStepCell(net, opt)\nfor x, y in loader:\n{body}"
               "    ms.save_checkpoint(net, 'a.ckpt')\n")
        assert lint(src, select=["ASC501"]), body
    for body in ("    out = net(x)\n", "    model.train()\n", "    step_cell = nn.TrainOneStepCell(net, opt)\n", "    optimizer = build_optimizer(net.trainable_params())\n",
                 "    model.train(1, ds)\n", "    train_one_epoch(net)\n"):
        src = f"import mindspore as ms\nfor x, y in loader:\n{body}    ms.save_checkpoint(net, 'a.ckpt')\n"
        assert not lint(src, select=["ASC501"]), body


def test_asc501_callback_step_hook_only():
    src = ("import mindspore as ms\nfrom mindspore.train import Callback\nclass Saver(Callback):\n"
           "    def on_train_step_end(self, run_context):\n        ms.save_checkpoint(self.net, 'a.ckpt')\n"
           "    def on_train_epoch_end(self, run_context):\n        ms.save_checkpoint(self.net, 'b.ckpt')\n")
    (step,) = lint(src, select=["ASC501"])
    assert "`on_train_step_end` (run every training step)" in step.message and step.fix is not None
