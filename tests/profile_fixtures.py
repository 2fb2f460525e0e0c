"""Generate Ascend profile directories in the documented export formats, for training scripts written here.

Nothing here is a recorded profile: `write_torch_profile` writes what torch_npu's analysis would write
(`*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json`, kernel_details.csv, operator_details.csv,
step_trace_time.csv, op_statistic.csv, api_statistic.csv, profiler_info.json) for the script in
`TORCH_PROJECT` run for a few steps; `write_mindspore_profile` does the same for MindSpore's layout.
The event shapes follow the sources docs/profile.md cites. The recorded paths use another machine's
prefix (`RECORDED_ROOT`) so the reader has to map them by path suffix. bench/profile_read.py uses the
same writers, with `layers` raised, to make a trace of any size.
"""
from __future__ import annotations

import csv
import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import IO, Dict, Iterable, List, Optional, Sequence, Tuple

RECORDED_ROOT = "/home/ci/jobs/4711/proj"
LIB = "/usr/local/python3.9.2/lib/python3.9/site-packages"

TRAIN_PY = '''\
import torch
import torch_npu

from models.net import Net


def train_step(model, optimizer, x, y):
    x = x.npu()  # @h2d_blocking
    y = y.to("npu", non_blocking=True)  # @h2d_async
    loss = model(x, y)  # @forward
    loss.backward()
    optimizer.step()  # @optimizer
    return loss.item()  # @item


def evaluate(model, x):
    with torch.no_grad():
        return model.score(x)  # @evaluate


def train(loader, steps):
    model = Net().npu()  # @init
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (x, y) in enumerate(loader):
        total = train_step(model, optimizer, x, y)  # @step_call
        if step == 5:
            evaluate(model, x)  # @evaluate_call
    return total


if __name__ == "__main__":
    train(None, 10)  # @main
'''

NET_PY = '''\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, y):
        h = self.fc(x)  # @fc
        h[h < 0] = 0.0  # @index_put
        h = h[: int(y.shape[0])].cumsum(0)  # @dynamic
        return ((h - y) ** 2).mean()  # @loss

    def score(self, x):
        return torch.nonzero(x > 0).shape[0]  # @nonzero
'''

TORCH_PROJECT = {
    "train.py": TRAIN_PY,
    "models/net.py": NET_PY,
    "tools/net.py": "def helper():\n    return 1\n",  # same file name as models/net.py: mapping needs the directory
}

MS_TRAIN_PY = '''\
import mindspore as ms
from mindspore import nn, ops


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(8, 8)

    def construct(self, x):
        return self.fc(x)


def train_step(net, x):
    loss = net(x).sum()
    return loss.asnumpy()


def train(loader):
    net = Net()
    for x in loader:
        train_step(net, x)


if __name__ == "__main__":
    train(None)
'''

MS_PROJECT = {"train_ms.py": MS_TRAIN_PY}


def line_of(source: str, marker: str) -> int:
    """The 1-based line carrying `# @marker` (or, without '@', the line that starts `def marker(`)."""
    for number, text in enumerate(source.splitlines(), 1):
        if text.rstrip().endswith(f"# @{marker}") or text.lstrip().startswith(f"def {marker}("):
            return number
    raise KeyError(marker)


def write_project(root: str, files: Dict[str, str]) -> str:
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    return root


def us(ns: int) -> str:
    """torch_npu's convert_ns2us_str: ns -> 'us.nnn'."""
    text = str(ns)
    return ("0." + text.rjust(3, "0")) if len(text) <= 3 else f"{text[:-3]}.{text[-3:]}"


class TraceWriter:
    """Writes a JSON array of events as torch_npu does (one line, `json.dumps` separators)."""

    def __init__(self, handle: IO[str]) -> None:
        self.handle = handle
        self.first = True
        self.handle.write("[")

    def emit(self, event: dict) -> None:
        self.handle.write(("" if self.first else ", ") + json.dumps(event, ensure_ascii=False))
        self.first = False

    def close(self) -> None:
        self.handle.write("]")


def frames_text(frames: Sequence[Tuple[str, int, str]]) -> str:
    """torch_npu's `Call stack` value: innermost first, `file(line): function`, joined by ';\\r\\n'."""
    return ";\r\n".join(f"{path}({line}): {function}" for path, line, function in frames)


# ------------------------------------------------------------------------------------------------------
# torch_npu
# ------------------------------------------------------------------------------------------------------
PID = 4242
MAIN_TID = 4242
BACKWARD_TID = 4300
CANN_PID = (PID << 10) | (8 << 5)  # TraceEventManager.get_pid_format-style ids
DEVICE_PID = (PID << 10) | (12 << 5)
STREAM = 2
KERNEL_HEADERS = ["Step Id", "Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
                  "Wait Time(us)", "Block Num", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
                  "Output Data Types", "Output Formats"]
OPERATOR_HEADERS = ["Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
                    "Device Self Duration(us)", "Device Total Duration(us)", "Device Self Duration With AICore(us)",
                    "Device Total Duration With AICore(us)"]
STEP_HEADERS = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication",
                "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]


@dataclass
class Op:
    """An open framework operator: where flows attach, and what it launched."""

    name: str
    ts: int
    dur: int
    tid: int
    stack: str
    dims: str
    device_ns: int = 0
    children_device_ns: int = 0
    sequence: int = -1


@dataclass
class TorchProfile:
    """Writers for one torch_npu profile, plus the running totals its summary CSVs need."""

    writer: TraceWriter
    kernels: "csv._writer"
    operators: "csv._writer"
    with_flows: bool = True
    device_clock: int = 0
    connection: int = 1000
    sequence: int = 0
    step: Optional[int] = None
    op_stats: Dict[Tuple[str, str], List[float]] = field(default_factory=lambda: defaultdict(lambda: [0, 0.0]))
    api_stats: Dict[str, List[float]] = field(default_factory=lambda: defaultdict(lambda: [0, 0.0]))
    step_busy: Dict[int, int] = field(default_factory=lambda: defaultdict(int))

    def meta(self) -> None:
        for pid, name, label in ((PID, "Python", "CPU"), (CANN_PID, "CANN", "CPU"),
                                 (DEVICE_PID, "Ascend Hardware", "NPU")):
            self.writer.emit({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            self.writer.emit({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": label}})
        for tid in (MAIN_TID, BACKWARD_TID):
            self.writer.emit({"ph": "M", "name": "thread_name", "pid": PID, "tid": tid,
                              "args": {"name": f"Thread {tid}"}})

    def op(self, name: str, ts: int, dur: int, stack: Sequence[Tuple[str, int, str]] = (), tid: int = MAIN_TID,
           dims: str = "", forward_of: Optional["Op"] = None, sequence: int = -1) -> Op:
        args: Dict[str, object] = {"Sequence number": sequence, "Fwd thread id": 0}
        if dims:
            args["Input Dims"] = dims
        text = frames_text(stack)
        if text:
            args["Call stack"] = text
        if forward_of is not None:
            args["Sequence number"], args["Fwd thread id"] = forward_of.sequence, 1
        self.writer.emit({"ph": "X", "name": name, "pid": PID, "tid": tid, "ts": us(ts), "dur": dur / 1000.0,
                          "cat": "cpu_op", "args": args})
        op = Op(name, ts, dur, tid, text, dims, sequence=sequence)
        if forward_of is not None and self.with_flows:
            self._flow("fwdbwd", "fwdbwd", forward_of.sequence, (PID, forward_of.tid, forward_of.ts), (PID, tid, ts))
        return op

    def forward_op(self, name: str, ts: int, dur: int, stack: Sequence[Tuple[str, int, str]], dims: str) -> Op:
        """A forward operator autograd records (a sequence number its backward operator will carry)."""
        self.sequence += 1
        return self.op(name, ts, dur, stack, dims=dims, sequence=self.sequence)

    def close_op(self, op: Op, parent: Optional[Op] = None) -> None:
        """operator_details.csv row (written when the operator's children are known)."""
        if parent is not None:
            parent.children_device_ns += op.device_ns + op.children_device_ns
        total = op.device_ns + op.children_device_ns
        self.operators.writerow([op.name, op.dims, op.stack, op.dur / 1000.0,
                                 op.dur / 1000.0, op.device_ns / 1000.0, total / 1000.0, op.device_ns / 1000.0,
                                 total / 1000.0])

    def api(self, name: str, ts: int, dur: int, tid: int = MAIN_TID, flow_to_device: bool = False) -> str:
        self.connection += 1
        conn = str(self.connection)
        self.writer.emit({"ph": "X", "name": f"AscendCL@{name}", "pid": CANN_PID, "tid": tid, "ts": us(ts),
                          "dur": dur / 1000.0, "args": {"Thread Id": tid, "Mode": "ACL_OP", "level": "acl",
                                                        "id": name, "item_id": "0", "connection_id": conn}})
        stat = self.api_stats[name]
        stat[0] += 1
        stat[1] += dur / 1000.0
        return conn

    def launch(self, op: Op, kernel: str, op_type: str, dur: int, task_type: str = "AI_CORE",
               dtypes: str = "FLOAT;FLOAT", memcpy: Optional[str] = None) -> None:
        """`op` launches one device task through an aclnn API: the API, the task, and both flows."""
        api_ts = op.ts + 1000
        conn = self.api(f"aclnn{op_type}" if memcpy is None else "aclrtMemcpyAsync", api_ts, 2000, op.tid)
        ts = max(self.device_clock, api_ts + 3000)
        self.device_clock = ts + dur + 500
        args: Dict[str, object] = {"Model Id": 4294967295, "Task Type": task_type, "Physic Stream Id": STREAM,
                                   "Task Id": self.connection % 65536, "Batch Id": 0, "Subtask Id": 4294967295,
                                   "connection_id": conn}
        name = kernel
        if memcpy is not None:
            name = "MEMCPY_ASYNC"
            args.update({"Task Type": "SDMA_SQE", "size(B)": 256, "bandwidth(GB/s)": 1.2, "operation": memcpy})
        self.writer.emit({"ph": "X", "name": name, "pid": DEVICE_PID, "tid": STREAM, "ts": us(ts),
                          "dur": dur / 1000.0, "args": args})
        self._flow("HostToDevice", f"HostToDevice{conn}", conn, (CANN_PID, op.tid, api_ts), (DEVICE_PID, STREAM, ts))
        if self.with_flows:
            self._flow("async_npu", "torch_to_npu", ts, (PID, op.tid, op.ts), (DEVICE_PID, STREAM, ts))
        op.device_ns += dur
        if self.step is not None:
            self.step_busy[self.step] += dur
        if memcpy is None:
            self.kernels.writerow([self.step if self.step is not None else "", 0, kernel, op_type, task_type,
                                   us(ts) + "\t", dur / 1000.0, 0.5, 8, '"8,8"', dtypes, "ND", '"8,8"', "FLOAT", "ND"])
            stat = self.op_stats[(op_type, task_type)]
            stat[0] += 1
            stat[1] += dur / 1000.0

    def _flow(self, cat: str, name: str, flow_id: object, start: Tuple[int, int, int],
              end: Tuple[int, int, int]) -> None:
        for ph, (pid, tid, ts) in (("s", start), ("f", end)):
            self.writer.emit({"ph": ph, "bp": "e", "name": name, "id": flow_id, "pid": pid, "tid": tid, "ts": us(ts),
                              "cat": cat})


WRAPPERS = (  # library frames a real stack has between the script's frames (module calls, trainer, launcher)
    (f"{LIB}/torch/nn/modules/module.py", 1527, "_call_impl"),
    (f"{LIB}/torch/nn/modules/module.py", 1518, "_wrapped_call_impl"),
    (f"{LIB}/transformers/models/llama/modeling_llama.py", 745, "forward"),
    (f"{LIB}/transformers/trainer.py", 2803, "training_step"),
    (f"{LIB}/accelerate/utils/operations.py", 822, "forward"),
    (f"{LIB}/torch/_dynamo/eval_frame.py", 489, "_fn"),
)


class TorchSites:
    """The recorded call stacks of the torch script's call sites (innermost first).

    `padding` library frames are inserted after the innermost project frame of every stack, as the
    wrappers of a real model and trainer would be (bench/profile_read.py uses it for realistic depth).
    """

    def __init__(self, root: str = RECORDED_ROOT, padding: int = 0) -> None:
        train, net = f"{root}/train.py", f"{root}/models/net.py"
        module = (f"{LIB}/torch/nn/modules/module.py", 1501, "_call_impl")
        self.outer = [(train, line_of(TRAIN_PY, "step_call"), "train"), (train, line_of(TRAIN_PY, "main"), "<module>")]
        step = lambda marker: [(train, line_of(TRAIN_PY, marker), "train_step")] + self.outer  # noqa: E731
        forward = lambda marker: [(net, line_of(NET_PY, marker), "forward"), module] + step("forward")  # noqa: E731
        self.h2d_blocking = step("h2d_blocking")
        self.h2d_async = step("h2d_async")
        self.optimizer = [(f"{LIB}/torch/optim/sgd.py", 75, "step")] + step("optimizer")
        self.item = step("item")
        self.fc = [(f"{LIB}/torch/nn/modules/linear.py", 114, "forward"), module] + forward("fc")
        self.index_put = forward("index_put")
        self.dynamic = forward("dynamic")
        self.loss = forward("loss")
        self.evaluate = [(net, line_of(NET_PY, "nonzero"), "score"),
                         (train, line_of(TRAIN_PY, "evaluate"), "evaluate"),
                         (train, line_of(TRAIN_PY, "evaluate_call"), "train"),
                         (train, line_of(TRAIN_PY, "main"), "<module>")]
        self.init = [(train, line_of(TRAIN_PY, "init"), "train"), (train, line_of(TRAIN_PY, "main"), "<module>")]
        self.library = [(f"{LIB}/torch/utils/data/_utils/collate.py", 141, "default_collate"),
                        (f"{LIB}/torch/utils/data/dataloader.py", 630, "__next__")]
        if padding:
            extra = [WRAPPERS[i % len(WRAPPERS)] for i in range(padding)]
            for attr, stack in vars(self).items():
                if isinstance(stack, list) and attr != "outer":
                    first = next((i for i, frame in enumerate(stack) if not frame[0].startswith(LIB)), 0)
                    setattr(self, attr, stack[:first + 1] + extra + stack[first + 1:])


def torch_step(p: TorchProfile, sites: TorchSites, step: int, t: int, layers: int = 1) -> int:
    """One training step of TRAIN_PY starting at host time `t` (ns); returns the time it ends."""
    start = t
    p.step = step
    t += 20_000
    # a data loader op whose whole stack is library code (not a project line)
    p.close_op(p.op("aten::empty", t, 5_000, sites.library, dims="[8, 8]"))
    t += 10_000
    # x = x.npu(): blocking copy -> stream sync + aclrtMemcpy
    outer = p.op("aten::to", t, 60_000, sites.h2d_blocking, dims="[8, 8]")
    copy = p.op("aten::copy_", t + 2_000, 55_000, sites.h2d_blocking, dims="[8, 8];\r\n[8, 8]")
    p.api("aclrtSynchronizeStreamWithTimeout", t + 4_000, 30_000)
    p.api("aclrtMemcpy", t + 36_000, 15_000)
    p.close_op(copy, outer)
    p.close_op(outer)
    t += 70_000
    # y = y.to("npu", non_blocking=True): MEMCPY_ASYNC host to device
    outer = p.op("aten::to", t, 30_000, sites.h2d_async, dims="[8]")
    copy = p.op("aten::copy_", t + 1_000, 25_000, sites.h2d_async, dims="[8];\r\n[8]")
    p.launch(copy, "MEMCPY_ASYNC", "Memcpy", 10_000, memcpy="host to device")
    p.close_op(copy, outer)
    p.close_op(outer)
    t += 40_000
    forwards = []
    for _ in range(layers):
        # h = self.fc(x)
        linear = p.op("aten::linear", t, 40_000, sites.fc, dims="[8, 8];\r\n[8, 8];\r\n[8]")
        addmm = p.forward_op("aten::addmm", t + 2_000, 30_000, sites.fc, dims="[8];\r\n[8, 8];\r\n[8, 8]")
        p.launch(addmm, "MatMul", "MatMul", 50_000)
        forwards.append(addmm)
        p.close_op(addmm, linear)
        p.close_op(linear)
        t += 45_000
        # h[h < 0] = 0.0: Less on the AI Core, IndexPutV2 on the AI CPU
        less = p.op("aten::lt", t, 10_000, sites.index_put, dims="[8, 8];\r\n[]")
        p.launch(less, "Less", "Less", 5_000)
        p.close_op(less)
        t += 12_000
        put = p.op("aten::index_put_", t, 40_000, sites.index_put, dims="[8, 8];\r\n[];\r\n[]")
        p.launch(put, "IndexPutV2", "IndexPutV2", 200_000, task_type="AI_CPU", dtypes="FLOAT;BOOL;FLOAT")
        p.close_op(put)
        t += 45_000
        # h = h[: int(y.shape[0])].cumsum(0): a new shape every step -> online compile every step
        rows = 8 + step % 5
        cumsum = p.op("aten::cumsum", t, 2_600_000, sites.dynamic, dims=f"[{rows}, 8];\r\n[]")
        p.api("aclopCompileAndExecute", t + 5_000, 2_500_000)
        p.launch(cumsum, "CumSum", "Cumsum", 8_000)
        p.close_op(cumsum)
        t += 2_610_000
        # return ((h - y) ** 2).mean()
        for aten, kernel in (("aten::sub", "Sub"), ("aten::pow", "Pow"), ("aten::mean", "ReduceMean")):
            op = p.op(aten, t, 12_000, sites.loss, dims="[8, 8];\r\n[8]")
            p.launch(op, kernel, kernel, 6_000)
            p.close_op(op)
            t += 14_000
    # loss.backward(): ops on the autograd thread, no call stack; fwdbwd flows to the forward addmm
    tb = t + 5_000
    for forward in forwards:
        evaluate = p.op("autograd::engine::evaluate_function: AddmmBackward0", tb, 60_000, tid=BACKWARD_TID,
                        forward_of=forward)
        mm = p.op("aten::mm", tb + 5_000, 40_000, tid=BACKWARD_TID, dims="[8, 8];\r\n[8, 8]")
        p.launch(mm, "MatMul", "MatMul", 80_000)
        p.close_op(mm, evaluate)
        p.close_op(evaluate)
        tb += 65_000
    accumulate = p.op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", tb, 20_000,
                      tid=BACKWARD_TID)
    p.close_op(accumulate)
    t = tb + 30_000
    # optimizer.step()
    opt = p.op("Optimizer.step#SGD.step", t, 50_000, sites.optimizer)
    add = p.op("aten::add_", t + 5_000, 20_000, sites.optimizer, dims="[8, 8];\r\n[8, 8];\r\n[]")
    p.launch(add, "Add", "Add", 7_000)
    p.close_op(add, opt)
    p.close_op(opt)
    t += 60_000
    # loss.item(): aten::item -> aten::_local_scalar_dense: sync + device-to-host copy
    item = p.op("aten::item", t, 450_000, sites.item, dims="[]")
    dense = p.op("aten::_local_scalar_dense", t + 2_000, 440_000, sites.item, dims="[]")
    p.api("aclrtSynchronizeStreamWithTimeout", t + 5_000, 400_000)
    p.launch(dense, "MEMCPY_ASYNC", "Memcpy", 3_000, memcpy="device to host")
    p.close_op(dense, item)
    p.close_op(item)
    t += 460_000
    if step == 5:
        # evaluate(model, x): only in this step; NonZero on the AI CPU once
        nonzero = p.op("aten::nonzero", t, 300_000, sites.evaluate, dims="[8, 8]")
        p.launch(nonzero, "NonZero", "NonZero", 150_000, task_type="AI_CPU", dtypes="FLOAT")
        p.close_op(nonzero)
        t += 310_000
    t = max(t, p.device_clock) + 20_000
    p.writer.emit({"ph": "X", "name": f"ProfilerStep#{step}", "pid": PID, "tid": MAIN_TID, "ts": us(start),
                   "dur": (t - start) / 1000.0, "cat": "cpu_op", "args": {"Sequence number": -1, "Fwd thread id": 0}})
    return t


def torch_profile_dir(base: str, name: str = "localhost_4242_20250101120000000_ascend_pt") -> Tuple[str, str]:
    root = os.path.join(base, name)
    output = os.path.join(root, "ASCEND_PROFILER_OUTPUT")
    os.makedirs(output, exist_ok=True)
    return root, output


def write_torch_profile(base: str, steps: Iterable[int] = range(3, 13), layers: int = 1, with_flows: bool = True,
                        with_stack: bool = True, name: str = "localhost_4242_20250101120000000_ascend_pt",
                        trace_only: bool = False, padding: int = 0) -> str:
    """Write a torch_npu profile of TRAIN_PY under `base`; returns the *_ascend_pt directory."""
    root, output = torch_profile_dir(base, name)
    sites = TorchSites(padding=padding)
    if not with_stack:
        for attr in vars(sites):
            setattr(sites, attr, [])
    with open(os.path.join(output, "trace_view.json"), "w", encoding="utf-8") as trace, \
            open(os.path.join(output, "kernel_details.csv"), "w", newline="", encoding="utf-8") as kernels, \
            open(os.path.join(output, "operator_details.csv"), "w", newline="", encoding="utf-8") as operators:
        kernel_writer, operator_writer = csv.writer(kernels), csv.writer(operators)
        kernel_writer.writerow(KERNEL_HEADERS)
        operator_writer.writerow(OPERATOR_HEADERS)
        profile = TorchProfile(TraceWriter(trace), kernel_writer, operator_writer, with_flows=with_flows)
        profile.meta()
        # model init before the first profiled step (outside every step)
        profile.step = None
        init = profile.op("aten::empty", 1_000_000, 50_000, sites.init, dims="[8, 8]")
        profile.close_op(init)
        t = 2_000_000
        steps = list(steps)
        for step in steps:
            t = torch_step(profile, sites, step, t, layers)
        profile.writer.close()
    if trace_only:
        for extra in ("kernel_details.csv", "operator_details.csv"):
            os.remove(os.path.join(output, extra))
        return root
    _write_summaries(output, profile, steps)
    with open(os.path.join(root, "profiler_info.json"), "w", encoding="utf-8") as info:
        json.dump({"config": {"common_config": {"activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                                                "with_stack": with_stack, "record_shapes": True}},
                   "torch_npu_version": "2.1.0.post10", "cann_version": "8.0.RC3"}, info, indent=4)
    return root


def _write_summaries(output: str, profile: TorchProfile, steps: Sequence[int]) -> None:
    with open(os.path.join(output, "step_trace_time.csv"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(STEP_HEADERS)
        for step in steps:
            busy = profile.step_busy[step] / 1000.0
            writer.writerow([0, step, busy, 0, 0, 0, 3000.0 - busy, 0, 0, 0, 20.0])
    with open(os.path.join(output, "op_statistic.csv"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
                         "Avg Time(us)", "Max Time(us)", "Ratio(%)"])
        for (op_type, core), (count, total) in sorted(profile.op_stats.items()):
            writer.writerow([0, op_type, core, count, total, 0, total / count, 0, 0])
    with open(os.path.join(output, "api_statistic.csv"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)",
                         "Variance"])
        for api, (count, total) in sorted(profile.api_stats.items()):
            writer.writerow(["host", "acl", api, total, count, total / count, 0, 0, 0])


# ------------------------------------------------------------------------------------------------------
# MindSpore
# ------------------------------------------------------------------------------------------------------
MS_PID = 1  # EventConstant.MINDSPORE_PID
MS_TID = 777
MS_CANN_PID = 9000
MS_DEVICE_PID = 9001


def write_mindspore_profile(base: str, steps: Iterable[int] = range(1, 6),
                            name: str = "node1_777_20250101120000000_ascend_ms") -> str:
    """A MindSpore profile of MS_TRAIN_PY: python_function frames (sys.path-relative names, first lines),
    framework launch events, mindspore_to_npu flows, an Asnumpy stage per step."""
    root = os.path.join(base, name)
    output = os.path.join(root, "ASCEND_PROFILER_OUTPUT")
    os.makedirs(output, exist_ok=True)
    train = line_of(MS_TRAIN_PY, "train")
    step_line = line_of(MS_TRAIN_PY, "train_step")
    construct = line_of(MS_TRAIN_PY, "construct")
    with open(os.path.join(output, "trace_view.json"), "w", encoding="utf-8") as handle:
        w = TraceWriter(handle)
        for pid, pname in ((MS_PID, "MindSpore"), (MS_CANN_PID, "CANN"), (MS_DEVICE_PID, "Ascend Hardware")):
            w.emit({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": pname}})

        def x(name: str, ts: int, dur: int, pid: int = MS_PID, cat: Optional[str] = None, args: Optional[dict] = None):
            event = {"ph": "X", "name": name, "pid": pid, "tid": MS_TID if pid != MS_DEVICE_PID else 3,
                     "ts": us(ts), "dur": dur / 1000.0, "args": args or {}}
            if cat is not None:
                event["cat"] = cat
            w.emit(event)

        t = 1_000_000
        device = 0
        steps = list(steps)
        x(f"train_ms.py({train}):train", t - 100_000, len(steps) * 2_000_000 + 200_000, cat="python_function")
        for step in steps:
            start = t
            x(f"train_ms.py({step_line}):train_step", t + 10_000, 1_500_000, cat="python_function")
            x(f"train_ms.py({construct}):nn.Cell.Net.construct", t + 20_000, 500_000, cat="python_function")
            x(f"{LIB}/mindspore/nn/layer/basic.py(620):nn.Cell.Dense.construct", t + 30_000, 400_000,
              cat="python_function")
            launch = t + 40_000
            x("Kernel::KernelLaunch::Default/MatMul-op1", launch, 50_000)
            kernel_ts = max(device, launch + 60_000)
            device = kernel_ts + 90_000
            x("MatMul", kernel_ts, 80_000, pid=MS_DEVICE_PID, args={"Task Type": "AI_CORE", "Task Id": step})
            for ph, pid, tid, ts in (("s", MS_PID, MS_TID, launch), ("f", MS_DEVICE_PID, 3, kernel_ts)):
                w.emit({"ph": ph, "bp": "e", "name": "mindspore_to_npu", "cat": "async_npu", "id": us(kernel_ts),
                        "pid": pid, "tid": tid, "ts": us(ts)})
            x("Asnumpy", t + 700_000, 600_000)
            x(f"<built-in method asnumpy of Tensor object at 0x7f3a{step:04x}>", t + 705_000, 590_000,
              cat="python_function")
            x("AscendCL@aclrtSynchronizeStream", t + 710_000, 550_000, pid=MS_CANN_PID)
            t += 2_000_000
            x(f"ProfilerStep#{step}", start, t - start - 1_000)
        w.close()
    with open(os.path.join(output, "step_trace_time.csv"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(STEP_HEADERS)
        for step in steps:
            writer.writerow([0, step, 80.0, 0, 0, 0, 1900.0, 0, 0, 0, 10.0])
    return root
