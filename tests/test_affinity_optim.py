"""ASC301-ASC307 (optimizer, AMP and gradient handling) on realistic scripts, and the fixes they carry."""
from __future__ import annotations

import ast
import textwrap

from ascend_lint.rule import Applicability, Span
from conftest import lint

OPTIM = ["ASC30"]

MOBILENET_APEX = '''
import argparse

import torch
import torch.nn as nn
import torch_npu
from apex import amp
from torch.nn.parallel import DistributedDataParallel as DDP


class MobileNetV1(nn.Module):
    def __init__(self, num_classes=1008):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU(inplace=True))
        self.classifier = nn.Linear(1024, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x).mean((2, 3)))


def main(args):
    model = MobileNetV1().to("npu:0")
    optimizer = torch.optim.SGD([
        {"params": model.features.parameters(), "lr": args.lr, "weight_decay": 4e-5},
        {"params": model.classifier.parameters(), "lr": args.lr, "weight_decay": 4e-5},
    ], momentum=0.9)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O2", loss_scale=128.0)
    model = DDP(model, device_ids=[args.local_rank])
    criterion = nn.CrossEntropyLoss().to("npu:0")
    for epoch in range(args.epochs):
        for images, target in args.loader:
            loss = criterion(model(images.to("npu:0")), target.to("npu:0"))
            optimizer.zero_grad()
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()
'''

FUSED_SGD_SCRIPT = '''
import torch
import torch_npu
from torch_npu.optim import NpuFusedSGD


def train(model, loader, epochs):
    optimizer = NpuFusedSGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scaler = torch.npu.amp.GradScaler()
    for epoch in range(epochs):
        for images, target in loader:
            with torch.npu.amp.autocast():
                loss = torch.nn.functional.cross_entropy(model(images), target)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
            scaler.step(optimizer)
            scaler.update()
'''


def by_code(src, **kwargs):
    found = {}
    for f in lint(src, select=OPTIM, **kwargs):
        found.setdefault(f.code, []).append(f)
    return found


def segment(src: str, span: Span) -> str:
    lines = textwrap.dedent(src).splitlines(keepends=True)
    if span.line == span.end_line:
        return lines[span.line - 1][span.col:span.end_col]
    return lines[span.line - 1][span.col:] + "".join(lines[span.line:span.end_line - 1]) \
        + lines[span.end_line - 1][:span.end_col]


def apply_replace(src: str, span: Span, text: str, block_indent: str = "") -> str:
    """Apply a replace edit as the libcst fixer does: continuation lines of `text` are relative to the
    indentation of the block holding the statement."""
    text = text.replace("\n", "\n" + block_indent)
    lines = textwrap.dedent(src).splitlines(keepends=True)
    before = "".join(lines[:span.line - 1]) + lines[span.line - 1][:span.col]
    after = lines[span.end_line - 1][span.end_col:] + "".join(lines[span.end_line:])
    return before + text + after


# ---------------------------------------------------------------- realistic scripts
def test_mobilenet_with_apex_o2_and_identical_groups():
    found = by_code(MOBILENET_APEX)
    assert sorted(found) == ["ASC301", "ASC302", "ASC303", "ASC305"]  # apex scale_loss: no ASC304
    (sgd,) = found["ASC301"]  # an apex script: the apex family, no fix without an apex.optimizers import
    assert sgd.line == 23 and "torch.optim.SGD" in sgd.message and "apex.optimizers.NpuFusedSGD" in sgd.message
    assert "torch_npu.optim" not in sgd.message and sgd.fix is None
    with_import = MOBILENET_APEX.replace("from apex import amp\n", "from apex import amp, optimizers\n")
    (sgd,) = by_code(with_import)["ASC301"]
    assert sgd.fix.applicability is Applicability.UNSAFE
    assert [e.text for e in sgd.fix.edits] == ["optimizers.NpuFusedSGD"] and sgd.fix.imports == ()
    assert segment(with_import, sgd.fix.edits[0].span) == "torch.optim.SGD"

    (groups,) = found["ASC302"]
    assert groups.line == 25 and "groups 1 and 2" in groups.message
    edit = groups.fix.edits[0]
    fixed = apply_replace(MOBILENET_APEX, edit.span, edit.text, block_indent="    ")
    assert ('{"params": [*model.features.parameters(), *model.classifier.parameters()], "lr": args.lr, '
            '"weight_decay": 4e-5},') in fixed
    assert fixed.count('"params"') == 1 and "], momentum=0.9)" in fixed
    ast.parse(fixed)

    (amp_init,) = found["ASC303"]
    assert amp_init.line == 27
    assert amp_init.fix.applicability is Applicability.UNSAFE and amp_init.fix.imports == ()
    (kw,) = amp_init.fix.edits
    assert (kw.op, kw.name, kw.text) == ("set_keyword", "combine_grad", "True")
    assert segment(MOBILENET_APEX, kw.span).startswith("amp.initialize(")
    (ddp,) = found["ASC305"]
    assert ddp.line == 27 and ddp.fix is None


def test_mobilenet_without_the_problems_is_clean():
    fixed = MOBILENET_APEX.replace("torch.optim.SGD", "torch_npu.optim.NpuFusedSGD")
    fixed = fixed.replace('"lr": args.lr, "weight_decay": 4e-5},\n    ], momentum',
                          '"lr": 10 * args.lr, "weight_decay": 0},\n    ], momentum')
    fixed = fixed.replace('loss_scale=128.0)', 'loss_scale=128.0, combine_grad=True, combine_ddp=True)')
    fixed = fixed.replace("    model = DDP(model, device_ids=[args.local_rank])\n", "")
    assert by_code(fixed) == {}


def test_fused_sgd_script_with_set_to_none_and_plain_clip():
    found = by_code(FUSED_SGD_SCRIPT)
    assert sorted(found) == ["ASC306", "ASC307"]
    (zero,) = found["ASC307"]
    assert zero.line == 14 and zero.severity.value == "error"
    assert "ValueError" in zero.message and "set_to_none=False" in zero.message
    assert zero.fix.applicability is Applicability.SAFE
    (edit,) = zero.fix.edits
    assert (edit.op, edit.name, edit.text) == ("set_keyword", "set_to_none", "False")
    assert segment(FUSED_SGD_SCRIPT, edit.span) == "optimizer.zero_grad(set_to_none=True)"
    (clip,) = found["ASC306"]
    assert clip.line == 17 and "optimizer.clip_grad_norm_fused_(max_norm)" in clip.message and clip.fix is None


def test_apex_fused_optimizer_points_to_the_apex_clip():
    src = '''
    import torch
    from apex import amp
    from apex.optimizers import NpuFusedAdam

    opt = NpuFusedAdam(model.parameters(), lr=1e-3)
    model, opt = amp.initialize(model, opt, opt_level="O1", combine_grad=True)
    for x, y in loader:
        with amp.scale_loss(crit(model(x), y), opt) as scaled:
            scaled.backward()
        torch.nn.utils.clip_grad_norm_(amp.master_params(opt), 1.0)
        model.zero_grad(set_to_none=True)
        opt.step()
    '''
    found = by_code(src)
    assert sorted(found) == ["ASC306", "ASC307"]
    assert "opt.clip_optimizer_grad_norm_fused(max_norm)" in found["ASC306"][0].message
    assert "combine_grad=True" in found["ASC307"][0].message and found["ASC307"][0].line == 12


# ---------------------------------------------------------------- ASC301 names and fixes
def test_qualified_names_not_spelling():
    assert "ASC301" in by_code("import torch_npu\nfrom torch import optim as o\nopt = o.SGD(ps, lr=0.1)")
    assert "ASC301" in by_code("import torch_npu\nimport torch.optim\nopt = torch.optim.RMSprop(ps)")
    local = "import torch_npu\nclass SGD:\n    pass\nopt = SGD(ps, lr=0.1)"
    assert by_code(local) == {}
    shadowed = "import torch_npu\nfrom torch.optim import SGD\ndef SGD(*a, **k):\n    pass\nopt = SGD(ps, lr=0.1)"
    assert by_code(shadowed) == {}


def test_asc301_fix_uses_the_files_torch_npu_alias():
    (f,) = by_code("import torch\nimport torch_npu as tnpu\nopt = torch.optim.SGD(ps, lr=0.1)")["ASC301"]
    assert f.fix.edits[0].text == "tnpu.optim.NpuFusedSGD" and f.fix.imports == ()
    (f,) = by_code("import torch\nfrom torch_npu.optim import NpuFusedAdamW\nimport torch_npu\n"
                   "a = NpuFusedAdamW(qs)\nb = torch.optim.Adam(ps)")["ASC301"]
    assert f.fix.edits[0].text == "torch_npu.optim.NpuFusedAdam"
    (f,) = by_code("import torch\nfrom torch_npu import optim as nopt\nopt = torch.optim.Adam(ps)")["ASC301"]
    assert f.fix.edits[0].text == "nopt.NpuFusedAdam"


def test_asc301_fix_adds_the_import_when_missing():
    (f,) = by_code("import torch\nfrom torch import optim\nmodel.npu()\nopt = optim.AdamW(ps, lr=1e-3)")["ASC301"]
    assert f.fix.edits[0].text == "torch_npu.optim.NpuFusedAdamW" and f.fix.imports == ("torch_npu",)
    assert segment("import torch\nfrom torch import optim\nmodel.npu()\nopt = optim.AdamW(ps, lr=1e-3)",
                   f.fix.edits[0].span) == "optim.AdamW"


def test_asc301_unsupported_options_block_the_fix():
    for call in ("torch.optim.AdamW(ps, foreach=False)", "torch.optim.SGD(ps, lr=0.1, fused=False)",
                 "torch.optim.Adam(ps, maximize=False)", "torch.optim.Adam(ps, capturable=True)",
                 "torch.optim.RMSprop(ps, differentiable=False)"):
        (f,) = by_code(f"import torch, torch_npu\nopt = {call}")["ASC301"]
        assert f.fix is None and "does not accept" in f.message, call
    # no lr for NpuFusedSGD (required there), star-args, a positional foreach for Adadelta
    for call in ("torch.optim.SGD(ps)", "torch.optim.SGD(ps, **cfg)", "torch.optim.Adadelta(ps, 1.0, 0.9, 1e-6, 0, True)"):
        (f,) = by_code(f"import torch, torch_npu\nopt = {call}")["ASC301"]
        assert f.fix is None, call
    (f,) = by_code("import torch, torch_npu\nopt = torch.optim.SGD(ps, 0.1, 0.9, 0, 1e-4, True)")["ASC301"]
    assert f.fix is not None


def test_asc301_silent_where_the_implementation_is_chosen_or_configurable():
    for call in ("torch.optim.AdamW(ps, foreach=True)", "torch.optim.SGD(ps, lr=0.1, fused=True)",
                 "torch.optim.AdamW(ps, lr=1e-3, fused=args.fused)", "torch.optim.Adam(ps, foreach=use_foreach)"):
        assert by_code(f"import torch, torch_npu\nopt = {call}") == {}, call


def test_asc301_silent_where_parameters_may_be_bf16():
    sources = (
        "model = Net().bfloat16()",
        "model.to(device='npu', dtype=torch.bfloat16)",
        "model = model.type(torch.bfloat16)",
        "model = AutoModel.from_pretrained(p, torch_dtype='bfloat16')",
        "model = GPT(cfg, params_dtype=torch.bfloat16)",
        "model = torch.nn.Linear(64, 64, dtype=torch.bfloat16)",
        "torch.set_default_dtype(torch.bfloat16)",
        "DTYPE = torch.bfloat16\nmodel.to(dtype=DTYPE)",
    )
    for line in sources:
        src = f"import torch, torch_npu\n{line}\nopt = torch.optim.AdamW(model.parameters(), lr=1e-3)"
        assert by_code(src) == {}, line
    # these keep fp32 parameters: autocast, FSDP MixedPrecision, a bf16 tensor factory, a cast in forward
    for line in ("ctx = torch.autocast('npu', dtype=torch.bfloat16)",
                 "mp = MixedPrecision(param_dtype=torch.bfloat16)",
                 "noise = torch.zeros(4, dtype=torch.bfloat16)"):
        src = f"import torch, torch_npu\n{line}\nopt = torch.optim.AdamW(model.parameters(), lr=1e-3)"
        assert "ASC301" in by_code(src), line


def test_asc301_apex_family_from_an_imported_apex_fused_class():
    src = ("import torch, torch_npu\nfrom apex.optimizers import NpuFusedSGD\n"
           "a = NpuFusedSGD(qs, lr=0.1)\nb = torch.optim.Adam(ps)")
    (f,) = by_code(src)["ASC301"]
    assert "apex.optimizers.NpuFusedAdam" in f.message and f.fix is None
    src = "import torch\nfrom apex import amp\nfrom torch_npu.optim import NpuFusedSGD\nb = torch.optim.Adam(ps)"
    (f,) = by_code(src)["ASC301"]
    assert "torch_npu.optim.NpuFusedAdam" in f.message and f.fix is not None


# ---------------------------------------------------------------- ASC302 fixes
def test_asc302_merges_in_the_position_of_the_first():
    src = ("opt = torch.optim.SGD([{'params': a.parameters(), 'lr': 0.1}, {'params': b.parameters(), 'lr': 1.0},"
           " {'lr': 0.1, 'params': c.parameters()}], momentum=0.9)")
    (f,) = by_code(src)["ASC302"]
    assert "groups 1 and 3" in f.message and f.col == src.index("{'lr'") + 1
    fixed = apply_replace(src, f.fix.edits[0].span, f.fix.edits[0].text)
    assert fixed == ("opt = torch.optim.SGD([{'params': [*a.parameters(), *c.parameters()], 'lr': 0.1}, "
                     "{'params': b.parameters(), 'lr': 1.0}], momentum=0.9)")
    assert f.fix.applicability is Applicability.UNSAFE


def test_asc302_multiline_list_through_a_local_name():
    src = '''
    def build(model, lr):
        backbone = [p for n, p in model.named_parameters() if "head" not in n]
        head, wd = list(model.head.parameters()), 1e-4
        groups = [
            {"params": backbone, "lr": lr, "weight_decay": wd},
            {"params": head, "lr": lr, "weight_decay": wd},
            {"params": model.bias_params(), "lr": lr, "weight_decay": 0},
        ]
        return torch.optim.SGD(groups, momentum=0.9)
    '''
    (f,) = by_code(src)["ASC302"]
    assert f.line == 7
    fixed = apply_replace(src, f.fix.edits[0].span, f.fix.edits[0].text, block_indent="    ")
    assert fixed == textwrap.dedent('''
    def build(model, lr):
        backbone = [p for n, p in model.named_parameters() if "head" not in n]
        head, wd = list(model.head.parameters()), 1e-4
        groups = [
            {"params": [*backbone, *head], "lr": lr, "weight_decay": wd},
            {"params": model.bias_params(), "lr": lr, "weight_decay": 0},
        ]
        return torch.optim.SGD(groups, momentum=0.9)
    ''')


def test_asc302_multiline_groups_keep_their_layout():
    src = textwrap.dedent('''
    def build(model):
        return torch.optim.AdamW([{"params": model.enc.parameters(),
                                   "lr": 1e-4},
                                  {"params": model.dec.parameters(), "lr": 1e-3},
                                  {"lr": 1e-4,
                                   "params": model.head.parameters()}], weight_decay=0.05)
    ''')
    (f,) = by_code(src)["ASC302"]
    assert "groups 1 and 3" in f.message
    fixed = apply_replace(src, f.fix.edits[0].span, f.fix.edits[0].text, block_indent="    ")
    assert fixed == textwrap.dedent('''
    def build(model):
        return torch.optim.AdamW([{"params": [*model.enc.parameters(), *model.head.parameters()], "lr": 1e-4},
                                  {"params": model.dec.parameters(), "lr": 1e-3}], weight_decay=0.05)
    ''')


def test_asc302_no_fix_when_params_may_be_a_single_tensor():
    src = "opt = torch.optim.Adam([{'params': model.logit_scale, 'lr': 1e-3}, {'params': w, 'lr': 1e-3}])"
    (f,) = by_code(src)["ASC302"]
    assert f.fix is None


def test_asc302_is_not_npu_context():
    assert "ASC302" in by_code("import torch\nopt = torch.optim.SGD([{'params': a}, {'params': b}], lr=0.1)")


# ---------------------------------------------------------------- ASC303 / ASC305
def test_asc303_fix_is_unsafe_and_adds_no_import():
    """combine_grad shares storage with every `.grad` and costs a gradient-sized buffer: unsafe everywhere;
    importing torch_npu would not change which apex is installed, so the fix adds no import."""
    for src in ("from apex import amp\nfrom apex.optimizers import NpuFusedSGD\n"
                "model, opt = amp.initialize(model, opt, opt_level='O2')",
                "import torch_npu\nfrom apex import amp\nm, o = amp.initialize(m, o, opt_level=args.level)",
                "import torch_npu\nfrom apex import amp\nm, o = amp.initialize(m, o, True, 'O1')"):
        (f,) = by_code(src)["ASC303"]
        assert f.fix.applicability is Applicability.UNSAFE and f.fix.imports == ()


def test_asc305_needs_a_ddp_wrap_in_the_file():
    base = "import torch, torch_npu\nfrom apex import amp\nm, o = amp.initialize(m, o, opt_level='O2', combine_grad=True)\n"
    assert "ASC305" not in by_code(base)
    assert "ASC305" in by_code(base + "m = torch.nn.parallel.DistributedDataParallel(m)")
    assert "ASC305" in by_code(base.replace("import torch,", "from apex.parallel import DistributedDataParallel\nimport")
                               + "m = DistributedDataParallel(m)")
    assert "ASC305" not in by_code(base + "m = torch.nn.DataParallel(m)")
    assert "ASC305" not in by_code(base, preview=False)


# ---------------------------------------------------------------- ASC304
def test_asc304_reports_the_first_backward_of_a_step_loop():
    src = '''
    import torch_npu

    def fit_one(model, x):
        return model(x).sum()  # no backward here

    def train(model, loader, optimizer):
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    '''
    (f,) = by_code(src)["ASC304"]
    assert f.line == 11 and "torch.npu.amp.autocast()" in f.message and f.fix is None
    assert "ASC304" not in by_code(src, preview=False)
    assert "ASC304" not in by_code(src.replace("loss = (model(x)", "loss = (model(x.half())"))
    assert "ASC304" not in by_code(src.replace("import torch_npu", "import torch_npu\n    from torch.cuda.amp import autocast"))


# ---------------------------------------------------------------- ASC307
def test_asc307_positional_true_is_replaced_in_place():
    src = "import torch_npu\nopt = torch_npu.optim.NpuFusedAdam(ps)\nopt.zero_grad(True)"
    (f,) = by_code(src)["ASC307"]
    (edit,) = f.fix.edits
    assert edit.op == "replace" and edit.text == "False" and segment(src, edit.span) == "True"


def test_asc307_fix_is_unsafe_where_an_except_catches_the_value_error():
    """`set_to_none=True` raises on a fused optimizer: safe to rewrite only where that stopped the program."""
    plain = "import torch_npu\nopt = torch_npu.optim.NpuFusedAdam(ps)\nopt.zero_grad(set_to_none=True)\n"
    caught = ("import torch_npu\nopt = torch_npu.optim.NpuFusedAdam(ps)\ntry:\n    opt.zero_grad(set_to_none=True)\n"
              "except ValueError:\n    print('skipped')\n")
    (f,) = by_code(plain)["ASC307"]
    assert f.fix.applicability is Applicability.SAFE
    (f,) = by_code(caught)["ASC307"]
    assert f.fix.applicability is Applicability.UNSAFE
    (f,) = by_code(caught.replace("print('skipped')", "raise"))["ASC307"]
    assert f.fix.applicability is Applicability.SAFE


def test_asc307_follows_amp_initialize_and_self_attributes():
    src = '''
    from apex import amp
    from apex.optimizers import NpuFusedLamb

    class Trainer:
        def __init__(self, model):
            self.opt = NpuFusedLamb(model.parameters(), lr=1e-3)
            self.model, self.opt2 = model, None

        def step(self, loss):
            self.opt.zero_grad(set_to_none=True)
            loss.backward()

    def run(model):
        optimizer = NpuFusedLamb(model.parameters())
        model, optimizer = amp.initialize(model, optimizer, opt_level="O2")
        optimizer.zero_grad(set_to_none=True)
    '''
    assert [f.line for f in by_code(src)["ASC307"]] == [11, 17]


def test_asc307_plain_optimizer_through_amp_initialize_is_fine():
    src = '''
    import torch, torch_npu
    from apex import amp
    optimizer = torch.optim.SGD(ps, lr=0.1)
    model, optimizer = amp.initialize(model, optimizer, combine_grad=True)
    optimizer.zero_grad(set_to_none=True)
    '''
    assert "ASC307" not in by_code(src)


def test_noqa_on_the_reported_line():
    src = "import torch_npu\nopt = torch_npu.optim.NpuFusedSGD(ps, lr=0.1)\nopt.zero_grad(set_to_none=True)  # noqa: ASC307"
    assert by_code(src) == {}
