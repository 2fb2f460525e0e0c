"""Pack `migration`: CUDA leftovers after a GPU -> NPU port (ASC6xx; NPU-context, silent under transfer_to_npu)."""
from .asc601_cuda_device import CudaDevice
from .asc602_nccl_backend import NcclBackend
from .asc603_torch_cuda_api import TorchCudaApi
from .asc604_tf32_flag import Tf32FlagOnNpu
from .asc605_cuda_device_test import CudaDeviceTest

RULES = [
    CudaDevice,
    NcclBackend,
    TorchCudaApi,
    Tf32FlagOnNpu,
    CudaDeviceTest,
]
