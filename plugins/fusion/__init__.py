"""Pack `fusion`: hand-written blocks that torch_npu ships as one fused operator (ASC7xx; NPU-context)."""
from .asc701_rms_norm import HandwrittenRmsNorm
from .asc702_rotary import HandwrittenRotaryEmbedding
from .asc703_swiglu import HandwrittenSwiglu
from .asc704_attention import HandwrittenAttention
from .asc705_geglu import HandwrittenGeglu

RULES = [
    HandwrittenRmsNorm,
    HandwrittenRotaryEmbedding,
    HandwrittenSwiglu,
    HandwrittenAttention,
    HandwrittenGeglu,
]
