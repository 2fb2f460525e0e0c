"""ASC501 sync-checkpoint-save."""
from __future__ import annotations

import ast
import re
from collections import Counter
from typing import List, Optional, Tuple

from ascend_lint.analysis.records import PER_STEP, STEP_CALL, Role
from ascend_lint.rule import Applicability, Case, Docs, Edit, Fix, Rule
from ascend_lint.astutil import argument, callee_name, constant, contains, dotted_name, has_star_args

# MindSpore callables with an `async_save` parameter -> its positional index
MS_SAVE_CONFIG = {"CheckpointConfig": 5}
MS_SAVE_FUNCTIONS = {"mindspore.save_checkpoint": 3, "mindspore.serialization.save_checkpoint": 3}
_MISSING = object()
# MindSpore Callback hooks and how often Model.train runs them.
STEP_HOOKS = frozenset({"on_train_step_end", "step_end", "on_train_step_begin", "step_begin"})
EPOCH_HOOKS = frozenset({"on_train_epoch_end", "epoch_end", "on_train_epoch_begin", "epoch_begin"})
# A call that reads a checkpoint back: MindSpore's `load_checkpoint`, `load_param_into_net`,
# `load_distributed_checkpoint`, ... or a project helper named like one (`load_ckpt`, `resume_from`).
LOAD_NAME_RE = re.compile(r"(load|restore|resume)(_?(\w*_)?(ckpt|checkpoint|param|state|model|weight)\w*)?",
                          re.IGNORECASE)


class SyncCheckpointSave(Rule):
    code = "ASC501"
    name = "sync-checkpoint-save"
    message = "{op} {problem}: {remedy}"
    fix_applicability = Applicability.UNSAFE
    triggers = ("CheckpointConfig", "save_checkpoint", "save(")
    docs = Docs(
        summary="Synchronous checkpoint saving that blocks training.",
        what="Flags MindSpore `CheckpointConfig(...)` (`mindspore.train.CheckpointConfig`, also imported from "
             "`mindspore` or `mindspore.train.callback`) without a truthy `async_save` (`True`, or "
             "`\"thread\"`/`\"process\"` since MindSpore 2.5); `mindspore.save_checkpoint(...)` without it "
             "inside a training loop (a loop that steps an optimizer, or an epoch loop around one, a local "
             "training function or `model.train(epochs, dataset)`) or in a training hook of a MindSpore "
             "`Callback` (`on_train_step_end`/`step_end`, `on_train_epoch_end`/`epoch_end`); and `torch.save(...)` called on every iteration of a training step loop (not under "
             "an `if` inside that loop).",
        why="A synchronous save stops training while the checkpoint is serialised and written. MindSpore "
            "measured 2450 img/s with `async_save=True` against 2200 img/s with the default synchronous "
            "save. Saving with `torch.save` on every step writes the whole state dict each step.",
        known_problems="`async_save` passed as a variable, or through `**kwargs`, is trusted. A loop that does "
                       "not train (over files in a converter, over evaluation batches) is not a training loop. "
                       "Step and epoch cost: a save in the step loop or in a step hook blocks training at "
                       "step granularity (every step, or every N steps: still each time it runs), which the "
                       "measured MindSpore case is about; a save once per epoch (an epoch loop around the step "
                       "loop, `on_train_epoch_end`/`epoch_end`, typically a best-model save after evaluation) "
                       "blocks once per epoch, a small share of the epoch that users reasonably keep, and is not "
                       "reported. `CheckpointConfig` is always reported: its `save_checkpoint_steps` (default 1) "
                       "sets a step-level frequency. `torch.save` is reported only on every step (torch has no "
                       "asynchronous switch: saving every N steps is the remedy). A save in a helper is reported "
                       "when the project's roles (`ctx.role()`) make the helper per-step through a framework that "
                       "calls it every step (a step hook) and the save is not under an `if` or a loop of the "
                       "helper; the rule reads no other file. A helper that a step loop in another module calls "
                       "is not reported (the call may sit under a condition other than `if step % N == 0:`, "
                       "such as an epoch change, which the role does not record).",
        example="""
            config = CheckpointConfig(save_checkpoint_steps=steps, keep_checkpoint_max=10)
            ckpt_cb = ModelCheckpoint(prefix="resnet50", directory="./ckpt", config=config)
        """,
        use_instead="""
            config = CheckpointConfig(save_checkpoint_steps=steps, keep_checkpoint_max=10, async_save=True)
            ckpt_cb = ModelCheckpoint(prefix="resnet50", directory="./ckpt", config=config)
        """,
        fix_safety="Unsafe: the fix adds `async_save=True` (or replaces a false value), and the save then "
                   "returns before the file is complete (MindSpore documents `async_ckpt_thread_status()` for "
                   "telling when the background write has finished). Whatever reads the file in the meantime "
                   "can see a partial or missing checkpoint: this file, another module, a subprocess "
                   "(an evaluation or upload script), a job watching the directory, or a later step of the "
                   "same run. Most of those readers are out of the linter's sight, so the fix can never be "
                   "proven to leave what the program reads unchanged; review it with `--unsafe-fixes`. It is "
                   "not offered where the file visibly reads the checkpoint back: it loads one "
                   "(`load_checkpoint`, `load_param_into_net`, a `load`/`restore`/`resume` helper; the "
                   "early-stopping \"save best, load best\" pattern), or it uses the saved path again: the "
                   "same name passed to another call (`shutil.copy(path, ...)`), an equal expression anywhere "
                   "(`os.remove(os.path.join(d, f'best_{x}.ckpt'))`, `upload('best_model.ckpt')`, a "
                   "subprocess argument list), or the saved file name inside another string (`os.system('cp "
                   "best.ckpt ...')`). No fix for `torch.save`: how often to save is the user's decision.",
        source="MindSpore performance tuning notes (async checkpoint saving, 2450 vs 2200 img/s); "
               "`mindspore.train.CheckpointConfig` and `mindspore.save_checkpoint` API docs.",
    )
    cases = (
        Case("""
            from mindspore.train import CheckpointConfig
            cfg = CheckpointConfig(save_checkpoint_steps=100)
            """, line=2, message_contains="`CheckpointConfig` saves checkpoints synchronously",
             fixed="""
            from mindspore.train import CheckpointConfig
            cfg = CheckpointConfig(save_checkpoint_steps=100, async_save=True)
            """),
    )
    flagged = (
        "from mindspore.train import CheckpointConfig\ncfg = CheckpointConfig(save_checkpoint_steps=100)",
        "import mindspore as ms\ncfg = ms.CheckpointConfig(keep_checkpoint_max=5, async_save=False)",
        "from mindspore.train.callback import CheckpointConfig\ncfg = CheckpointConfig(100, 0, 5, 0, True, False)",
        "import mindspore as ms\nfor x, y in loader:\n    loss = train_step(x, y)\n"
        "    if step % 100 == 0:\n        ms.save_checkpoint(net, 'last.ckpt')",
        "from mindspore import save_checkpoint\nwhile True:\n    loss, grads = grad_fn(x, y)\n    optimizer(grads)\n"
        "    save_checkpoint(net, 'last.ckpt', async_save=None)",
        # a TrainOneStepCell instance called in the loop
        "import mindspore as ms\ntrainer = ms.nn.TrainOneStepCell(net, opt)\nfor x, y in loader:\n"
        "    trainer(x, y)\n    ms.save_checkpoint(net, 'last.ckpt')",
        # a MindSpore Callback's step hook runs every step of Model.train
        "import mindspore as ms\nfrom mindspore.train import Callback\nclass Saver(Callback):\n"
        "    def on_train_step_end(self, run_context):\n        ms.save_checkpoint(self.net, 'last.ckpt')",
        "import torch\nfor step, (x, y) in enumerate(loader):\n    loss = model(x, y)\n    loss.backward()\n"
        "    optimizer.step()\n    torch.save(model.state_dict(), 'last.pt')",
    )
    clean = (
        "from mindspore.train import CheckpointConfig\n"
        "cfg = CheckpointConfig(save_checkpoint_steps=100, async_save=True)",
        "from mindspore.train import CheckpointConfig\ncfg = CheckpointConfig(async_save='thread')",
        "from mindspore.train import CheckpointConfig\ncfg = CheckpointConfig(async_save=args.async_save)",
        "from mindspore.train import CheckpointConfig\ncfg = CheckpointConfig(**ckpt_kwargs)",
        "import mindspore as ms\nms.save_checkpoint(net, 'final.ckpt')",  # once, outside any loop
        # once per epoch: an epoch loop around the step loop, an epoch hook
        "import mindspore as ms\nfor epoch in range(10):\n    model.train(1, ds)\n    ms.save_checkpoint(net, f'e{epoch}.ckpt')",
        "import mindspore as ms\nfrom mindspore.train.callback import Callback\nclass Saver(Callback):\n"
        "    def epoch_end(self, run_context):\n        if self.acc > self.best:\n"
        "            ms.save_checkpoint(self.net, 'best.ckpt')",
        # a loop that does not train: converting files, evaluating
        "import mindspore as ms\nfor name in names:\n    net = load(name)\n    ms.save_checkpoint(net, name + '.ckpt')",
        "import mindspore as ms\nfor x, y in val_loader:\n    acc = net(x)\n    ms.save_checkpoint(net, 'e.ckpt')",
        # a hook that is not a training-time hook of a MindSpore Callback
        "import mindspore as ms\nfrom mindspore.train import Callback\nclass Saver(Callback):\n"
        "    def end(self, run_context):\n        ms.save_checkpoint(self.net, 'final.ckpt')",
        "import mindspore as ms\nclass Saver:\n    def on_train_step_end(self, ctx):\n"
        "        ms.save_checkpoint(self.net, 'last.ckpt')",
        "import mindspore as ms\nfor epoch in range(10):\n    ms.save_checkpoint(net, 'e.ckpt', async_save=True)",
        "class CheckpointConfig:\n    pass\ncfg = CheckpointConfig()",  # not MindSpore's
        "import torch\nfor step, (x, y) in enumerate(loader):\n    loss = model(x, y)\n    loss.backward()\n"
        "    optimizer.step()\n    if step % 1000 == 0:\n        torch.save(model.state_dict(), 'last.pt')",
        "import torch\nfor epoch in range(90):\n    for x, y in loader:\n        model(x, y).backward()\n"
        "        optimizer.step()\n    torch.save(model.state_dict(), f'e{epoch}.pt')",  # once per epoch
        "import torch\nfor name, t in tensors.items():\n    torch.save(t, name)",  # not a step loop
        "import torch\ndef test_save(tmp_path):\n    model(x).sum().backward()\n    opt.step()\n"
        "    torch.save(opt.state_dict(), tmp_path)",  # one step, then one save: no loop
    )

    def start_file(self) -> None:
        self._pending: List[Tuple[ast.Call, Optional[ast.expr], str, str]] = []
        self._loads: Optional[bool] = None  # the file reads a checkpoint back somewhere (decides the fix)
        self._names_passed: Optional[Counter] = None  # names / dotted names passed to calls (path reuse)
        self._all_nodes: Optional[List[ast.AST]] = None  # the file's expressions and assignments (path reuse)

    def visit_Call(self, node: ast.Call) -> None:
        qual = self.ctx.call_name(node)
        if not qual:
            return
        if qual == "torch.save":
            where = self._every_step()
            if where is not None:
                self.report(node, op="`torch.save`",
                            problem=f"runs on every training step{where} and blocks it while it writes",
                            remedy="save every N steps (`if step % N == 0:`) or once per epoch")
            return
        if not qual.startswith("mindspore."):
            return
        short = qual.rsplit(".", 1)[-1]
        if short in MS_SAVE_CONFIG:
            self._check_async(node, f"`{short}`", MS_SAVE_CONFIG[short], "saves checkpoints synchronously")
        elif qual in MS_SAVE_FUNCTIONS:
            hook = self._callback_hook()
            if hook is not None:
                if hook not in STEP_HOOKS:
                    return  # once per epoch: a small share of the epoch (see the docs)
                problem = f"in `{hook}` (run every training step) blocks training while it writes"
            elif self.ctx.in_step_loop(called_only=True):
                problem = "in the training step loop blocks training while it writes"
            elif self._step_role() is not None and not self._conditional():
                problem = f"blocks training while it writes ({self._step_role().describe()})"
            else:
                return
            self._check_async(node, "`mindspore.save_checkpoint`", MS_SAVE_FUNCTIONS[qual], problem)

    def _every_step(self) -> Optional[str]:
        """Does the save run on every step: unguarded in a step loop (""), or unconditionally in a function the
        project's roles make per-step (" (`save_ckpt` runs every step: the step loop in `train.py:88` calls it)")?
        None otherwise. The roles come from ctx (a step loop, a framework hook or an entry point in any module):
        the rule never looks at other files."""
        ctx = self.ctx
        loop = ctx.current_loop()
        if loop is not None and ctx.is_step_loop(loop):
            return None if ctx.guarded(modulo_only=False) else ""
        role = self._step_role()
        if role is None or self._conditional():
            return None
        return f" ({role.describe()})"

    def _step_role(self) -> Optional[Role]:
        """The per-step role the project gives the current function through a framework that calls it every
        step (a hook such as `Callback.step_end` or `Trainer.training_step`, from the execution model's
        roles). A role from a step loop in another module (`ctx.step_role()`) is not enough for a save: that
        role counts only `if step % N == 0:` as a guard at the call, while saves are mostly called under other
        conditions (`if epoch != iter // n:`, `if is_best:`), which the rule cannot see from here."""
        role = self.ctx.role()
        if role is None or role.kind != PER_STEP or self.ctx.step_role() is not None:
            return None
        return role if role.reason is None or role.reason.kind != STEP_CALL else None

    def _conditional(self) -> bool:
        """Is the call under an `if` (or a loop) of its function: a best-model or every-N save."""
        func = self.ctx.function
        if func is None:
            return True
        return any(contains(func.node, if_node) for if_node, _ in self.ctx.ifs) or any(
            contains(func.node, loop) for loop in self.ctx.loops)

    def _callback_hook(self) -> Optional[str]:
        """The name of the MindSpore `Callback` hook (`on_train_step_end`, `epoch_end`, ...) the call is in."""
        scopes = self.ctx.scopes
        for index in range(len(scopes) - 1, 0, -1):
            scope, owner = scopes[index], scopes[index - 1]
            if scope.kind == "function" and owner.kind == "class":
                if scope.name in STEP_HOOKS | EPOCH_HOOKS and isinstance(owner.node, ast.ClassDef) and any(
                        _callback_base(self.ctx.qualname(base)) for base in owner.node.bases):
                    return scope.name
                return None
        return None

    def _check_async(self, call: ast.Call, op: str, position: int, problem: str) -> None:
        value = argument(call, "async_save", position)
        if value is None and has_star_args(call):
            return  # may come through *args / **kwargs
        current: object = constant(value, _MISSING) if value is not None else False
        if current is _MISSING or current:
            return  # a variable (trusted) or a truthy value
        self._pending.append((call, value, op, problem))  # reported at the end: the fix needs the whole file

    def end_file(self) -> None:
        for call, value, op, problem in self._pending:
            self.report(call, op=op, problem=problem, remedy="pass `async_save=True`", fix=self._fix(call, value))

    # ------------------------------------------------------------------ fix
    def _reads_back(self, call: ast.Call) -> bool:
        """Does the file load a checkpoint, or pass the path this call saves to to another call?"""
        if self._loads is None:  # (whole-file facts: looked at once, only where a fix is to be decided)
            self._loads = _may_load(self.ctx.text) and any(
                LOAD_NAME_RE.fullmatch(callee_name(c)) for c in self.ctx.calls())
        if self._loads:
            return True
        name = dotted_name(argument(call, "ckpt_file_name", 1)) or ""
        if not name or not _may_pass_again(self.ctx.text, name):
            return False
        if self._names_passed is None:
            self._names_passed = Counter(
                passed for c in self.ctx.calls() for arg in c.args + [kw.value for kw in c.keywords]
                for passed in (dotted_name(arg),) if passed)
        return self._names_passed[name] > 1

    def _fix(self, call: ast.Call, value: Optional[ast.expr]) -> Optional[Fix]:
        if self._reads_back(call) or self._path_used_again(call):
            return None  # the background write would be read half-done: see Fix safety
        if value is not None and value in call.args:  # positional: replace the value in place
            edit = Edit("replace", self.ctx.span(value), "True")
        else:
            edit = Edit("set_keyword", self.ctx.span(call), "True", "async_save")
        return Fix(Applicability.UNSAFE, "Pass `async_save=True`", (edit,))

    def _path_used_again(self, call: ast.Call) -> bool:
        """Does the file name the saved file again: an expression equal to the saved path (or to the value
        a path name is assigned) anywhere else, or the saved file's name inside another string?"""
        path = argument(call, "ckpt_file_name", 1)
        if path is None:
            return False
        saved = [path]
        if isinstance(path, ast.Name):  # `best = os.path.join(d, "best.ckpt")`: its value counts too
            saved += [n.value for n in self._nodes() if isinstance(n, ast.Assign) and len(n.targets) == 1
                      and isinstance(n.targets[0], ast.Name) and n.targets[0].id == path.id]
        inside = {id(n) for expr in saved for n in ast.walk(expr)}
        shapes = {type(expr) for expr in saved if not isinstance(expr, ast.Name)}
        dumps = {ast.dump(expr) for expr in saved if not isinstance(expr, ast.Name)}
        names = {c for expr in saved for c in _file_names(expr)}
        for node in self._nodes():
            if id(node) in inside:
                continue
            if type(node) in shapes and ast.dump(node) in dumps:  # (dumped only when the node type matches)
                return True
            if names and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and any(name in node.value for name in names):
                return True
        return False

    def _nodes(self) -> List[ast.AST]:
        """Every expression and assignment of the file, docstrings left out; listed once, only where a fix
        is decided."""
        if self._all_nodes is None:
            docstrings = {id(n.value) for n in ast.walk(self.ctx.tree) if isinstance(n, ast.Expr)
                          and isinstance(n.value, ast.Constant)}
            self._all_nodes = [n for n in ast.walk(self.ctx.tree) if isinstance(n, ast.Assign)
                               or (isinstance(n, ast.expr) and id(n) not in docstrings)]
        return self._all_nodes


def _callback_base(qual: Optional[str]) -> bool:
    """`mindspore.train.Callback`, `mindspore.train.callback.ModelCheckpoint`, ... (any spelling)."""
    return bool(qual) and qual.startswith("mindspore.") and qual.rsplit(".", 1)[-1].endswith(
        ("Callback", "ModelCheckpoint", "CallBack"))


# Every name of the tree of an ASCII text is spelled whole in it: a text without a word that LOAD_NAME_RE takes
# calls no load, and one whose last name of `path` occurs only once (in the save) passes it to no other call.
_LOAD_WORD_RE = re.compile(r"(?:load|restore|resume)[a-z0-9_]*")  # (in the lower-cased text)


def _may_load(text: str) -> bool:
    """Can a call of the tree of `text` be named like a checkpoint load?"""
    if not text.isascii():
        return True
    lower = text.lower()
    for match in _LOAD_WORD_RE.finditer(lower):
        start = match.start()
        if (start == 0 or not (lower[start - 1].isalnum() or lower[start - 1] == "_")) \
                and LOAD_NAME_RE.fullmatch(match.group()):  # (a word starting there)
            return True
    return False


def _may_pass_again(text: str, path: str) -> bool:
    """Can the tree of `text` pass `path` (a dotted name) to more than one call?"""
    word = path.rpartition(".")[2]
    return not text.isascii() or len(re.findall(rf"(?<![A-Za-z0-9_]){word}(?![A-Za-z0-9_])", text)) > 1


def _file_names(expr: ast.AST) -> List[str]:
    """The file names spelled in a path expression: its string parts that end in an extension
    (`"best_model.ckpt"`, the `".ckpt"` of `f"best_{x}.ckpt"`)."""
    return [n.value.rsplit("/", 1)[-1] for n in ast.walk(expr)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and re.search(r"\.[A-Za-z0-9]+$", n.value.rsplit("/", 1)[-1])]
