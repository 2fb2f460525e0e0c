"""Where a CUDA device value goes, for the fix safety of the migration rules.

On an Ascend host torch has no CUDA: an API that places work on a CUDA device raises there, so the original
program stopped at it and rewriting its device to the NPU cannot change a result it computed (a safe fix).
Other APIs take a CUDA device quietly: `torch.autocast('cuda')` and `torch.amp.GradScaler('cuda')` disable
themselves with a warning (the original trained in fp32, without loss scaling), `device_type=` queries
answer False, a comparison picks another branch. Rewriting the device there changes what the program
computes, and so does rewriting one whose failure an `except` catches (the original went on in the handler).
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional

from ascend_lint.analysis.semantic import FileContext

from .._safety import Ancestry, failure_caught

# Calls that take a device and do not fail without CUDA (listed for the reader: any call not known to fail
# counts as quiet): autocast and GradScaler disable themselves with a warning.
QUIET_DEVICE_CALLS = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.GradScaler",
                                "torch.cuda.amp.GradScaler", "torch.amp.custom_fwd", "torch.amp.custom_bwd"})
# Keywords by which a torch call places work on a device (a CUDA one raises without CUDA).
PLACING_KEYWORDS = frozenset({"device", "map_location"})
MAX_NAME_DEPTH = 3


class DeviceFlow:
    """Follows a device value of one file to the calls that use it (parent links built once, on demand)."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._ancestry = Ancestry(ctx.tree)

    def parents(self) -> Dict[int, ast.AST]:
        return self._ancestry.parents()

    def ancestors(self, node: ast.AST) -> List[ast.AST]:
        """The nodes from the module down to `node` (outermost first)."""
        return self._ancestry.chain(node)

    def fails_everywhere(self, node: ast.AST, depth: int = 0) -> bool:
        """Does every use of the device value at `node` raise on an Ascend host, uncaught? Followed: the
        value's own expression (`torch.device(...)`, `'cuda:{}'.format(...)`, a conditional), and a local
        name it is bound to (every read of it in the function). Anything else (another call, a comparison,
        a module-level name another module may import, a return) is not known to fail."""
        parents = self.parents()
        current = node
        while True:
            parent = parents.get(id(current))
            if isinstance(parent, ast.Attribute) and parent.attr == "format" and parent.value is current:
                call = parents.get(id(parent))
                if not (isinstance(call, ast.Call) and call.func is parent):
                    return False
                current = call
                continue
            if isinstance(parent, ast.IfExp) and current is not parent.test:
                current = parent
                continue
            if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is current:
                return self._name_fails(parent, depth)
            if isinstance(parent, ast.keyword):
                keyword, call = parent.arg, parents.get(id(parent))
            elif isinstance(parent, ast.Call) and current in parent.args:
                keyword, call = None, parent
            else:
                return False
            if not isinstance(call, ast.Call):
                return False
            qual = self.ctx.qualname(call.func)
            if qual == "torch.device":
                current = call  # the device object flows on
                continue
            return self._places(call, qual, keyword) and not failure_caught(self.ancestors(call))

    @staticmethod
    def _places(call: ast.Call, qual: Optional[str], keyword: Optional[str]) -> bool:
        """Does `call` put work on the device it is given (so raise for a CUDA one without CUDA)?"""
        if qual is not None:
            return keyword in PLACING_KEYWORDS and qual.startswith("torch.") and qual not in QUIET_DEVICE_CALLS
        func = call.func
        if not isinstance(func, ast.Attribute):
            return False  # a local or unknown function: not known
        if func.attr in ("to", "cuda"):  # Tensor.to / Module.to / .cuda(index)
            return keyword in (None, "device")
        return func.attr.startswith("new_") and keyword == "device"  # x.new_zeros(..., device=d)

    def _name_fails(self, assign: ast.stmt, depth: int) -> bool:
        targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name) or depth >= MAX_NAME_DEPTH:
            return False
        name = targets[0].id
        function = next((n for n in reversed(self.ancestors(assign))
                         if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if function is None:
            return False  # a module-level name: another module may import it
        for sub in ast.walk(function):  # every read of the name in its function (a bounded look)
            if isinstance(sub, (ast.Global, ast.Nonlocal)) and name in sub.names:
                return False
            if isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load) \
                    and not self.fails_everywhere(sub, depth + 1):
                return False
        return True
