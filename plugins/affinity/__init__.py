"""Pack `affinity`: Ascend performance anti-patterns (ASC1xx-ASC5xx)."""
from .asc101_contiguous import ContiguousAfterView
from .asc102_layout_copy import ContiguousLayoutCopy
from .asc201_h2d_copy import HostToDeviceCopyInForward
from .asc202_synchronize import SynchronizeInHotPath
from .asc203_host_sync import HostSyncInStepLoop
from .asc204_launch_blocking import LaunchBlocking
from .asc205_host_sync_forward import HostSyncInForward
from .asc301_fused_optimizer import FusedOptimizerAvailable
from .asc302_param_groups import MergeableParamGroups
from .asc303_amp_combine_grad import AmpCombineGrad
from .asc304_no_mixed_precision import NoMixedPrecision
from .asc305_apex_combine_ddp import ApexCombineDdp
from .asc306_fused_clip_grad_norm import FusedClipGradNorm
from .asc307_fused_set_to_none import FusedOptimizerSetToNone
from .asc401_dim_alignment import DimNotAligned
from .asc402_fp32_matmul import Fp32Matmul
from .asc403_float64 import Float64OnNpu
from .asc404_dynamic_shape import DynamicShapeInForward
from .asc501_sync_checkpoint import SyncCheckpointSave
from .asc502_dataset_autotune import DatasetAutotuneOff
from .asc503_dataloader_pin_memory import DataLoaderWithoutPinMemory

RULES = [
    ContiguousAfterView,
    ContiguousLayoutCopy,
    HostToDeviceCopyInForward,
    SynchronizeInHotPath,
    HostSyncInStepLoop,
    LaunchBlocking,
    HostSyncInForward,
    FusedOptimizerAvailable,
    MergeableParamGroups,
    AmpCombineGrad,
    NoMixedPrecision,
    ApexCombineDdp,
    FusedClipGradNorm,
    FusedOptimizerSetToNone,
    DimNotAligned,
    Fp32Matmul,
    Float64OnNpu,
    DynamicShapeInForward,
    SyncCheckpointSave,
    DatasetAutotuneOff,
    DataLoaderWithoutPinMemory,
]
