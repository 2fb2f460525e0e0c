"""ASC401 dim-not-16-aligned."""
from __future__ import annotations

import ast
from typing import Dict, Tuple

from ascend_lint.rule import Case, Docs, Rule
from ascend_lint.astutil import argument, callee_name

_IN_OUT = (("in_channels", 0), ("out_channels", 1))
# layer class -> the (keyword, position) of each dimension argument that is checked
LAYER_DIMS: Dict[str, Tuple[Tuple[str, int], ...]] = {
    "torch.nn.Linear": (("in_features", 0), ("out_features", 1)),
    "torch.nn.Conv1d": _IN_OUT,
    "torch.nn.Conv2d": _IN_OUT,
    "torch.nn.Conv3d": _IN_OUT,
    "torch.nn.Embedding": (("embedding_dim", 1),),
    "mindspore.nn.Dense": _IN_OUT,
    "mindspore.nn.Conv1d": _IN_OUT,
    "mindspore.nn.Conv2d": _IN_OUT,
    "mindspore.nn.Conv3d": _IN_OUT,
    "mindspore.nn.Embedding": (("embedding_size", 1),),
}
NUM_CLASSES = "num_classes"


class DimNotAligned(Rule):
    code = "ASC401"
    name = "dim-not-16-aligned"
    preview = True  # demoted by the held-out precision measurement (docs/precision.md)
    message = ("{value} ({what}) is not a multiple of {alignment}: consider {suggested}; "
               "Ascend moves data in {alignment}-element blocks")
    npu_context = True
    options = {"min-dim": 16, "alignment": 16}
    triggers = ("Linear", "Conv", "Embedding", "Dense", NUM_CLASSES)
    docs = Docs(
        summary="A layer dimension that is not a multiple of the 16 elements Ascend moves and multiplies in one block.",
        what="Flags integer dimensions that are at least `min-dim` (16) and not a multiple of `alignment` "
             "(16), read from literals, module constants, local names or parameter defaults (such as "
             "`num_classes=1000`), in "
             "`torch.nn.Linear(in, out)`, `torch.nn.Conv1d/2d/3d` channels, the `torch.nn.Embedding` "
             "embedding dim, `mindspore.nn.Dense(in, out)`, `mindspore.nn.Conv1d/2d/3d` channels, the "
             "`mindspore.nn.Embedding` embedding size, and `num_classes=` arguments of any call except "
             "`load*` functions (`load_pretrained(..., num_classes=1000)` describes a checkpoint) and "
             "except a parameter default passed on (`num_classes=num_classes`). One "
             "finding per offending argument, pointing at it.",
        why="The AI Core moves data in 16-element blocks and its Cube unit multiplies 16x16 tiles: MatMul "
            "inputs that are not 16-aligned cannot use every core (MindSpore's `ops.MatMul` docs: "
            "performance is poor on Ascend when N x M is not divisible by 16), and fp16 activations live "
            "in the 5HD format, which pads channels to a multiple of 16, so a channel count that is not "
            "a multiple of 16 wastes compute and forces 5HD <-> 4D format conversions (concat does not "
            "support 5HD when C is not a multiple of 16, as the ShuffleNetV2 port found). MindSpore's "
            "tuning notes round `num_classes` up to a multiple of 16 for the classifier weight.",
        known_problems="Dimensions computed at run time (arguments, arithmetic, loop variables) are not "
                       "checked. A name rebound in a loop is read from the binding before the loop. A "
                       "parameter default (`num_classes=1000`) is reported where it reaches a layer, not at "
                       "the `def` nor where a factory passes it on (`num_classes=num_classes`): a loss or "
                       "metric that only takes `num_classes` builds no layer, and callers may pass another "
                       "value.",
        example="""
            NUM_CLASSES = 1000

            class Classifier(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(2048, NUM_CLASSES)
        """,
        use_instead="""
            NUM_CLASSES = 1000
            PADDED_CLASSES = 1008  # next multiple of 16

            class Classifier(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(2048, PADDED_CLASSES)

                def forward(self, x):
                    return self.fc(x)[:, :NUM_CLASSES]
        """,
        fix_safety="No fix: padding a dimension changes the model's parameters and outputs; the message "
                   "names the next multiple.",
        source="MindSpore performance tuning notes (MatMul/Tile/Div 16-alignment, `num_classes` rounded "
               "up); `mindspore.ops.MatMul` API docs; NC1HWC0 (5HD) format definition, C0 = 16; "
               "ShuffleNetV2 on Ascend 910 tuning case.",
    )
    cases = (
        Case("""
            import torch_npu
            from torch import nn
            fc = nn.Linear(2048, 1000)
            """, line=3, message_contains="1000 (`out_features` of `nn.Linear`) is not a multiple of 16"),
    )
    flagged = (
        "import torch_npu\nimport torch\nfc = torch.nn.Linear(1000, 2048)",
        "import torch_npu\nimport torch.nn as nn\nNUM_CLASSES = 1000\nfc = nn.Linear(2048, NUM_CLASSES)",
        "import torch_npu\nimport torch.nn as nn\nstem = nn.Conv2d(3, 24, 3, 2, 1, bias=False)",
        "import torch_npu\nimport torch.nn as nn\nc = nn.Conv1d(in_channels=100, out_channels=64, kernel_size=3)",
        "import torch_npu\nimport torch.nn as nn\nc = nn.Conv3d(64, 72, 3)",
        "import torch_npu\nimport torch.nn as nn\nemb = nn.Embedding(32000, 300)",
        "import torch_npu\nimport torch.nn as nn\n"
        "class Head(nn.Module):\n    def __init__(self, hidden=1000):\n        super().__init__()\n"
        "        self.proj = nn.Linear(hidden, 512)",
        "import torch_npu\nimport torch.nn as nn\n"
        "class Net(nn.Module):\n    def __init__(self, num_classes=1000):\n        super().__init__()\n"
        "        self.fc = nn.Linear(2048, num_classes)",
        "import torch_npu\nmodel = build_model('resnet50', num_classes=1000)",
        "import mindspore.nn as nn\nfc = nn.Dense(2048, 1000)",
        "from mindspore import nn\nfc = nn.Dense(in_channels=768, out_channels=30522)",
        "from mindspore import nn\nconv = nn.Conv2d(3, 24, 3)",
        "from mindspore import nn\nemb = nn.Embedding(21128, 100)",
        "import mindspore\nNUM_CLASSES = 1001\ndef resnet50(**kwargs):\n    return ResNet(num_classes=NUM_CLASSES)",
    )
    clean = (
        "import torch_npu\nimport torch.nn as nn\nfc = nn.Linear(2048, 1008)",
        "import torch_npu\nimport torch.nn as nn\nstem = nn.Conv2d(3, 64, 7, 2, 3)",  # 3 RGB channels: small
        "import torch_npu\nimport torch.nn as nn\nhead = nn.Linear(512, 1)",  # a regression output
        "import torch_npu\nimport torch.nn as nn\nfc = nn.Linear(2048, 10)",
        "import torch_npu\nimport torch.nn as nn\nemb = nn.Embedding(30522, 768)",  # vocab size is not checked
        "import torch_npu\nimport torch.nn as nn\ndef head(dim, n):\n    return nn.Linear(dim, n)",
        "import torch_npu\nimport torch.nn as nn\ndef block(c):\n    return nn.Conv2d(c, c * 3, 3)",
        "import torch_npu\nimport torch.nn as nn\nlayers = [nn.Linear(d, d) for d in (100, 200)]",
        "import torch_npu\nimport torch.nn as nn\nfc = nn.Linear(*dims)",
        "import torch_npu\nfc = Linear(2048, 1000)",  # not torch.nn.Linear
        "import torch_npu\nimport torch.nn as nn\nx = torch.randn(2, 1000)",
        "import torch_npu\ndef resnet(num_classes=10):\n    pass",
        "import torch, torch_npu\nclass LabelSmoothing(torch.nn.Module):\n"
        "    def __init__(self, smoothing=0.1, num_classes=1000):\n        super().__init__()\n"
        "        self.num_classes = num_classes",  # a default that builds no layer
        "import torch_npu\nload_pretrained(model, cfg, num_classes=1000, in_channels=3)",  # describes a checkpoint
        "import mindspore\ndef resnet50(num_classes=1001, **kwargs):\n"
        "    return ResNet(num_classes=num_classes, **kwargs)",  # a factory passing its default on
        "import torch.nn as nn\nfc = nn.Linear(2048, 1000)",  # no NPU context
        "from mindspore import nn\nfc = nn.Dense(2048, 1008)",
        "from mindspore import nn\nfc = nn.Dense(in_channels, out_channels)",
    )

    def visit_Call(self, node: ast.Call) -> None:
        qual = self.ctx.call_name(node)
        dims = LAYER_DIMS.get(qual or "")
        if dims:
            short = qual.rsplit(".", 2)
            layer = f"{short[-2]}.{short[-1]}"
            for name, pos in dims:
                arg = argument(node, name, pos)
                if arg is not None:
                    self._check(arg, f"`{name}` of `{layer}`")
        callee = qual or callee_name(node)
        if callee.rsplit(".", 1)[-1].startswith("load"):
            return  # load_pretrained(..., num_classes=1000) reads a checkpoint's head, it builds nothing
        for kw in node.keywords:
            # a default passed on (`num_classes=num_classes`) is reported where it reaches a layer
            passed_on = isinstance(kw.value, ast.Name) and self._source(kw.value.id) == "default"
            if kw.arg == NUM_CLASSES and not passed_on:
                self._check(kw.value, "`num_classes`")

    def _check(self, arg: ast.expr, what: str) -> None:
        value = self.ctx.int_value(arg)
        if value is None:
            return
        alignment = int(self.opts.get("alignment", 16))
        if alignment <= 1 or value < int(self.opts.get("min-dim", 16)) or value % alignment == 0:
            return
        if isinstance(arg, ast.Name):
            origin = "the default of" if self._source(arg.id) == "default" else "from"
            what = f"{what}, {origin} `{arg.id}`"
        suggested = (value // alignment + 1) * alignment
        self.report(arg, value=value, what=what, alignment=alignment, suggested=suggested)

    def _source(self, name: str) -> str:
        """Where `int_value` reads `name` from: "local", "default", "parameter" or "module"."""
        for scope in reversed(self.ctx.scopes):
            if scope.kind != "function":
                continue
            if name in scope.bindings:
                return "local"
            if name in scope.defaults:
                return "default"
            if name in scope.params:
                return "parameter"
        return "module"
