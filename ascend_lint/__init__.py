"""ascend-lint: find Ascend NPU performance anti-patterns in PyTorch and MindSpore code."""

__version__ = "0.1.0"
