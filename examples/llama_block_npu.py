"""A LLaMA-style decoder block for an Ascend NPU port, before any fused-operator tuning.

Every building block is written out in plain PyTorch: RMSNorm, rotary embeddings, SwiGLU (and the
GEGLU variant), and matmul-softmax-matmul attention. torch_npu ships a fused kernel for each
(`npu_rms_norm`, `npu_rotary_mul`, `npu_swiglu`, `npu_geglu`, `npu_fusion_attention` or
`F.scaled_dot_product_attention`), which is what ascend-lint's fusion pack (ASC7xx) points out.
Run the file to overfit one random batch for a few steps as a smoke test.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_npu  # noqa: F401


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))  # expect: ASC701


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x):
        # positions are made on the device from the input's shape: no host-to-device copy, not flagged
        t = torch.arange(x.shape[-2], device=x.device, dtype=self.inv_freq.dtype)
        freqs = t[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(q, k, cos, sin):
    q = q * cos + rotate_half(q) * sin  # expect: ASC702
    k = k * cos + rotate_half(k) * sin  # expect: ASC702
    return q, k


class Attention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, k, cos, sin)
        out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) + mask, dim=-1) @ v  # expect: ASC704
        out = out.transpose(1, 2).contiguous().view(b, s, -1)  # expect: ASC101
        return self.o_proj(out)


class SwiGLU(nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # expect: ASC703


class GEGLU(nn.Module):
    """GELU-gated feed-forward with one fused gate/up projection."""

    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.proj = nn.Linear(hidden_size, 2 * intermediate_size, bias=False)
        self.out = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        a, b = self.proj(x).chunk(2, dim=-1)
        return self.out(F.gelu(a) * b)  # expect: ASC705


class DecoderBlock(nn.Module):
    def __init__(self, hidden_size=4096, num_heads=32, intermediate_size=11008, mlp="swiglu", eps=1e-6):
        super().__init__()
        self.input_norm = RMSNorm(hidden_size, eps)
        self.attn = Attention(hidden_size, num_heads)
        self.post_attn_norm = RMSNorm(hidden_size, eps)
        ffn = SwiGLU if mlp == "swiglu" else GEGLU
        self.mlp = ffn(hidden_size, intermediate_size)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.input_norm(x), cos, sin, mask)
        return x + self.mlp(self.post_attn_norm(x))


if __name__ == "__main__":
    torch.npu.set_device(0)
    block = DecoderBlock(hidden_size=512, num_heads=8, intermediate_size=1376).npu()
    rope = RotaryEmbedding(512 // 8).npu()
    x = torch.randn(2, 128, 512).npu()
    target = torch.randn(2, 128, 512).npu()
    mask = torch.full((128, 128), float("-inf")).triu(1).npu()
    cos, sin = rope(x)
    optimizer = torch.optim.AdamW(block.parameters(), lr=1e-3)  # expect: ASC301
    for step in range(50):
        loss = F.mse_loss(block(x, cos, sin, mask), target)
        optimizer.zero_grad()
        loss.backward()  # expect: ASC304
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
