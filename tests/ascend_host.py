"""An emulated Ascend host for running ported training scripts in tests.

`run_script(text, call, *args)` executes a script against a stand-in `torch` that behaves like torch with
torch_npu loaded and no CUDA: `torch.cuda.is_available()` is False, `torch.npu.is_available()` True, autocast
and loss scalers asked for `'cuda'` disable themselves (as torch does without CUDA, with a warning), and
whatever needs a CUDA device raises `NoCuda` (`.cuda()`, `.to('cuda')`, `torch.cuda.set_device`, the 'nccl'
backend). Every other object is a `Fake` that takes any attribute, call, item or arithmetic. The `Host` records
what the program turned on: autocast, loss scaling, pinned memory, asynchronous copies, the optimizers and
their options, data loaders, the collective backend. Only what the tests' scripts use is modelled.
"""
from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

EMULATED = ("torch", "torch_npu", "numpy")  # the packages `import` gets from the host
# torch.cuda calls that answer quietly without CUDA (the rest raise).
QUIET_CUDA = {"is_available": False, "is_bf16_supported": False, "device_count": 0, "manual_seed": None,
              "manual_seed_all": None, "empty_cache": None}
NPU_ANSWERS = {"is_available": True, "is_bf16_supported": True, "device_count": 8}


class NoCuda(RuntimeError):
    """What an Ascend host says to a program that asks for CUDA."""


@dataclass
class Device:
    """`torch.device`: `Device('npu:1')`, `Device('npu', 1)`."""
    type: str
    index: Optional[int] = None

    @classmethod
    def of(cls, *args: Any) -> "Device":
        first = args[0]
        if isinstance(first, Device):
            return first
        kind, _, index = str(first).partition(":")
        return cls(kind, int(index) if index else (args[1] if len(args) > 1 else None))


@dataclass
class Host:
    autocast: List[Tuple[str, bool]] = field(default_factory=list)  # (device type, on)
    scalers: List[Tuple[str, bool]] = field(default_factory=list)  # (device type, on)
    pinned: int = 0
    async_copies: int = 0
    optimizers: List[Tuple[str, Dict[str, Any]]] = field(default_factory=list)
    loaders: List[Dict[str, Any]] = field(default_factory=list)
    backends: List[str] = field(default_factory=list)
    npu_calls: List[str] = field(default_factory=list)
    devices: List[str] = field(default_factory=list)  # where `.to(...)` / `.npu(...)` moved things

    # ------------------------------------------------------------------ the emulated API
    def attribute(self, name: str) -> Any:
        if name.startswith("torch.optim.") and name.count(".") == 2:
            return self._optimizer(name.rsplit(".", 1)[1])
        return Fake(self, name)

    def call(self, name: str, args: Tuple, kwargs: Dict[str, Any]) -> Any:
        module, _, last = name.rpartition(".")
        if module == "torch.cuda" and last in QUIET_CUDA:
            return QUIET_CUDA[last]
        if name in ("torch.cuda.amp.GradScaler", "torch.cuda.amp.autocast"):
            (self.scalers if last == "GradScaler" else self.autocast).append(("cuda", False))
            return Fake(self, name + "()")
        if name.startswith("torch.cuda."):
            raise NoCuda(f"{name}(): no CUDA on an Ascend host")
        if module == "torch.npu" and last in NPU_ANSWERS:
            return NPU_ANSWERS[last]
        if name == "torch.npu.amp.GradScaler":
            self.scalers.append(("npu", kwargs.get("enabled", True)))
        elif name in ("torch.amp.GradScaler", "torch.amp.autocast", "torch.autocast"):
            kind = args[0] if args else kwargs.get("device_type", kwargs.get("device", "cuda"))
            records = self.scalers if last == "GradScaler" else self.autocast
            records.append((kind, bool(kwargs.get("enabled", True)) and kind in ("npu", "cpu")))
        elif module == "torch.npu":
            self.npu_calls.append(last)
        elif name == "torch.device":
            return Device.of(*args)
        elif name == "torch.distributed.init_process_group":
            backend = kwargs.get("backend", args[0] if args else None)
            if backend == "nccl":
                raise NoCuda("the 'nccl' backend does not exist on an Ascend host")
            self.backends.append(backend)
        elif name == "torch.utils.data.DataLoader":
            self.loaders.append(kwargs)
        elif last == "cuda":
            raise NoCuda(f"{name}(): no CUDA on an Ascend host")
        elif last in ("to", "npu"):
            target = args[0] if args else kwargs.get("device", "npu")
            kind = Device.of(target).type if last == "to" else "npu"
            if kind == "cuda":
                raise NoCuda(f"{name}({target!r}): no CUDA on an Ascend host")
            self.devices.append(kind)
            self.async_copies += bool(kwargs.get("non_blocking"))
            return Fake(self, module)  # the moved object
        elif last == "pin_memory":
            self.pinned += 1
            return Fake(self, module)
        return Fake(self, name + "()")

    def _optimizer(self, cls: str) -> Callable[..., Any]:
        def optimizer(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum=0.0, *,
                      foreach=None, fused=None):
            options = {"lr": lr, "betas": betas, "weight_decay": weight_decay, "momentum": momentum, "fused": fused}
            self.optimizers.append((cls, options))
            return Fake(self, f"torch.optim.{cls}()")
        return optimizer

    def module(self, name: str, fromlist: Any) -> Any:
        return Fake(self, name if fromlist else name.partition(".")[0])


class Fake:
    """Any object of the emulated packages (see the module docstring)."""

    def __init__(self, host: Host, name: str) -> None:
        object.__setattr__(self, "_host", host)
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr: str) -> Any:
        return self._host.attribute(f"{self._name}.{attr}")

    def __setattr__(self, attr: str, value: Any) -> None:
        pass  # `torch.npu.matmul.allow_hf32 = True`

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._host.call(self._name, args, kwargs)

    def __getitem__(self, key: Any) -> "Fake":
        return Fake(self._host, self._name + "[]")

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def __iter__(self):
        return iter([Fake(self._host, self._name + "[0]"), Fake(self._host, self._name + "[1]")])

    def __len__(self) -> int:
        return 1024

    def __enter__(self) -> "Fake":
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False

    def __add__(self, other: Any) -> "Fake":
        return self

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __add__

    def __ge__(self, other: Any) -> bool:
        return False

    __gt__ = __le__ = __lt__ = __ge__


def run_script(text: str, path: str, call: str, *args: Any) -> Host:
    """Execute the script `text` on an emulated Ascend host, then call its function `call` with `args`."""
    host = Host()
    real_import = builtins.__import__

    def emulated_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name.partition(".")[0] in EMULATED:
            return host.module(name, fromlist)
        return real_import(name, globals, locals, fromlist, level)

    namespace: Dict[str, Any] = {"__name__": "ported",
                                 "__builtins__": {**vars(builtins), "__import__": emulated_import}}
    exec(compile(text, path, "exec"), namespace)
    namespace[call](*args)
    return host


def fake(name: str = "model") -> Fake:
    """An object handed to the script (a model, a data set) on a fresh host of its own."""
    return Fake(Host(), name)
