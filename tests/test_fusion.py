"""Pack `fusion` (ASC701-ASC705): structural matches on realistic decoder blocks, spellings, near-misses."""
from __future__ import annotations

import re
import textwrap

import pytest

from conftest import lint


def found(src, code):
    return [f for f in lint(src, select=[code]) if f.code == code]


def expected(src):
    out = []
    for i, line in enumerate(textwrap.dedent(src).splitlines(), 1):
        for code in re.findall(r"#.*?(ASC7\d\d)", line):
            out.append((i, code))
    return sorted(out)


# A Qwen2/LLaMA-style decoder layer written out by hand (the shape of code an NPU port starts from).
DECODER = '''
    import math
    from typing import Optional

    import torch
    import torch.nn.functional as F
    import torch_npu
    from torch import nn


    class Qwen2RMSNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.variance_epsilon = eps

        def forward(self, hidden_states):
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)  # ASC701
            return self.weight * hidden_states.to(input_dtype)


    def rotate_half(x):
        """Rotates half the hidden dims of the input."""
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)


    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        cos = cos.unsqueeze(unsqueeze_dim)
        sin = sin.unsqueeze(unsqueeze_dim)
        q_embed = (q * cos) + (rotate_half(q) * sin)  # ASC702
        k_embed = (k * cos) + (rotate_half(k) * sin)  # ASC702
        return q_embed, k_embed


    def repeat_kv(hidden_states, n_rep):
        batch, num_key_value_heads, slen, head_dim = hidden_states.shape
        if n_rep == 1:
            return hidden_states
        hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
        return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


    class Qwen2Attention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.hidden_size = config.hidden_size
            self.num_heads = config.num_attention_heads
            self.head_dim = self.hidden_size // self.num_heads
            self.num_key_value_heads = config.num_key_value_heads
            self.num_key_value_groups = self.num_heads // self.num_key_value_heads
            self.attention_dropout = config.attention_dropout
            self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=True)
            self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
            self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
            self.o_proj = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=False)

        def forward(self, hidden_states, cos, sin, attention_mask: Optional[torch.Tensor] = None):
            bsz, q_len, _ = hidden_states.size()
            query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
            key_states = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
            value_states = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
            key_states = repeat_kv(key_states, self.num_key_value_groups)
            value_states = repeat_kv(value_states, self.num_key_value_groups)

            attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
            if attention_mask is not None:
                causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
                attn_weights = attn_weights + causal_mask
            attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
            attn_weights = nn.functional.dropout(attn_weights, p=self.attention_dropout, training=self.training)
            attn_output = torch.matmul(attn_weights, value_states)  # ASC704
            attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, self.hidden_size)
            return self.o_proj(attn_output)


    class Qwen2MLP(nn.Module):
        def __init__(self, hidden_size, intermediate_size):
            super().__init__()
            self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
            self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
            self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
            self.act_fn = nn.SiLU()

        def forward(self, x):
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))  # ASC703


    class FusedGateUpMLP(nn.Module):
        """Megatron-style: one column-parallel projection holding gate and up."""

        def __init__(self, hidden_size, ffn_size):
            super().__init__()
            self.gate_up = nn.Linear(hidden_size, 2 * ffn_size, bias=False)
            self.down = nn.Linear(ffn_size, hidden_size, bias=False)

        def forward(self, x):
            y = self.gate_up(x)
            y = torch.chunk(y, 2, dim=-1)
            return self.down(F.silu(y[0]) * y[1])  # ASC703


    class GEGLUFeedForward(nn.Module):
        def __init__(self, dim, inner):
            super().__init__()
            self.proj = nn.Linear(dim, inner * 2)
            self.act = nn.GELU(approximate="tanh")
            self.out = nn.Linear(inner, dim)

        def forward(self, hidden_states):
            hidden_states, gate = self.proj(hidden_states).chunk(2, dim=-1)
            return self.out(hidden_states * self.act(gate))  # ASC705
'''


def test_decoder_layer_reports_each_block_once():
    got = sorted((f.line, f.code) for f in lint(DECODER, select=["ASC7"]))
    assert got == expected(DECODER)


def test_decoder_messages_carry_the_fused_call():
    by_code = {f.code: f.message for f in lint(DECODER, select=["ASC7"])}
    assert "torch_npu.npu_rms_norm(hidden_states, self.weight, epsilon=self.variance_epsilon)[0]" in by_code["ASC701"]
    assert "torch_npu.npu_rotary_mul(q, cos, sin)" in by_code["ASC702"] or \
        "torch_npu.npu_rotary_mul(k, cos, sin)" in by_code["ASC702"]
    # `y` was rebound to the chunk tuple: the message names the tensor it held before
    assert "merge `self.gate_proj` and `self.up_proj`" in by_code["ASC703"] or \
        "npu_swiglu(self.gate_up(x), dim=-1)" in by_code["ASC703"]
    assert "torch_npu.npu_fusion_attention(query_states, key_states, value_states, head_num, 'BNSD'" \
        in by_code["ASC704"]
    assert "torch_npu.npu_geglu(self.proj(hidden_states), dim=-1, approximate=1)[0]" in by_code["ASC705"]
    for message in by_code.values():
        assert "npu_confusion_transpose" not in message


def test_no_npu_context_no_findings():
    plain = DECODER.replace("    import torch_npu\n", "")
    assert lint(plain, select=["ASC7"]) == []
    assert [f.code for f in lint(plain, select=["ASC701"], target="npu")] == ["ASC701"]


def test_not_torch_code_no_findings():
    src = """
        import mindspore
        from mindspore import ops

        def rms(x, eps):
            return x * ops.rsqrt(x.pow(2).mean(-1, keep_dims=True) + eps)
    """
    assert lint(src, select=["ASC7"]) == []


# ------------------------------------------------------------------------------ fused fallbacks
def test_explicit_fallback_of_the_fused_path_is_silent():
    src = """
        import torch
        import torch_npu

        class RMSNorm(torch.nn.Module):
            def forward(self, x):
                if self.use_fused_rmsnorm:
                    return torch_npu.npu_rms_norm(x, self.weight, epsilon=self.eps)[0]
                else:
                    variance = x.pow(2).mean(-1, keepdim=True)
                    return self.weight * (x * torch.rsqrt(variance + self.eps))
    """
    assert found(src, "ASC701") == []


@pytest.mark.parametrize("code, fused_line", [
    ("ASC701", "from torch_npu import npu_rms_norm"),
    ("ASC702", "out = torch_npu.npu_rotary_mul(q, cos, sin)"),
    ("ASC703", "out = torch_npu.npu_swiglu(x, dim=-1)"),
    ("ASC704", "out = F.scaled_dot_product_attention(q, k, v)"),
    ("ASC705", "out = torch_npu.npu_geglu(x)[0]"),
    ("ASC703", "out = torch_npu.npu_ｓｗｉｇｌｕ(x, dim=-1)  # silu"),  # (the tree spells it `npu_swiglu`: NFKC)
])
def test_a_file_that_calls_the_fused_op_is_silent(code, fused_line):
    lines = textwrap.dedent(DECODER).splitlines()
    assert any(f.code == code for f in lint(DECODER, select=[code]))
    src = "\n".join(lines + [fused_line, ""])
    assert found(src, code) == []


# ------------------------------------------------------------------------------ ASC701 spellings
HEAD = "import torch\nimport torch_npu\nimport torch.nn.functional as F\nfrom torch import nn\nimport math\n"


@pytest.mark.parametrize("body", [
    "return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)",
    "return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)",
    "return x * torch.rsqrt((x ** 2).mean(dim=-1, keepdim=True) + eps)",
    "return x * torch.rsqrt(torch.pow(x, 2).mean(-1, True) + eps)",
    "return x * torch.rsqrt(torch.mean(x.square(), -1, keepdim=True) + eps)",
    "return x * torch.rsqrt(eps + x.pow(2).mean(-1, keepdim=True))",
    "return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)",
    "return x * (1 / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps))",
    "return x * x.pow(2).mean(-1, keepdim=True).add(eps).rsqrt()",
    "ms = torch.mean(x * x, dim=self.dim, keepdim=True)\n    return x * torch.rsqrt(ms + self.eps)",
    "h = x.float()\n    v = h.pow(2).mean(-1, keepdim=True)\n    h = h * torch.rsqrt(v + eps)\n    return h.type_as(x)",
])
def test_asc701_spellings(body):
    assert len(found(HEAD + f"def norm(self, x, eps):\n    {body}\n", "ASC701")) == 1


@pytest.mark.parametrize("body", [
    # LayerNorm: centred
    "mean = x.mean(-1, keepdim=True)\n    var = ((x - mean) ** 2).mean(-1, keepdim=True)\n"
    "    return (x - mean) / torch.sqrt(var + eps)",
    "xc = x - x.mean(-1, keepdim=True)\n    return xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + eps)",
    # variance, not a mean of squares
    "return (x - x.mean(-1, keepdim=True)) * torch.rsqrt(x.var(-1, keepdim=True) + eps)",
    # other dims, no keepdim, a global mean
    "return x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + eps)",
    "return x * torch.rsqrt(x.pow(2).mean(-1) + eps)",
    "return torch.sqrt(x.pow(2).mean())",
    # sqrt used as a value, not a divisor
    "return torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)",
    # rsqrt of something else
    "return x * torch.rsqrt(var + eps)",
])
def test_asc701_near_misses(body):
    assert found(HEAD + f"def norm(self, x, eps, var=None):\n    {body}\n", "ASC701") == []


# ------------------------------------------------------------------------------ ASC702 spellings
@pytest.mark.parametrize("rot", [
    "def rotate_half(x):\n    x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)\n",
    "def rotate_half(x):\n    x1, x2 = torch.chunk(x, 2, -1)\n    return torch.cat([-x2, x1], -1)\n",
    "def rotate_half(t):\n    d = t.shape[-1] // 2\n    a, b = t[..., :d], t[..., d:]\n"
    "    return torch.cat((-b, a), dim=-1)\n",
    "def rotate_half(x):\n    x1 = x[:, :, :, : x.size(-1) // 2]\n    x2 = x[:, :, :, x.size(-1) // 2 :]\n"
    "    return torch.cat((-x2, x1), dim=x1.ndim - 1)\n",
])
@pytest.mark.parametrize("use", [
    "q * cos + rotate_half(q) * sin",
    "(q * cos) + (rotate_half(q) * sin)",
    "rotate_half(q) * sin + q * cos",
    "cos * q + sin * rotate_half(q)",
])
def test_asc702_spellings(rot, use):
    src = HEAD + rot + f"def rope(q, cos, sin):\n    return {use}\n"
    assert len(found(src, "ASC702")) == 1


def test_asc702_tuple_unpack_of_two_names_is_not_two_halves():
    # a, b = t[..., :d], t[..., d:] is one tuple: the halves are resolved through the tuple elements
    src = HEAD + ("def rope(q, cos, sin):\n    d = q.shape[-1] // 2\n    q1 = q[..., :d]\n    q2 = q[..., d:]\n"
                  "    rq = torch.cat((-q2, q1), dim=-1)\n    return q * cos + rq * sin\n")
    assert len(found(src, "ASC702")) == 1


@pytest.mark.parametrize("src", [
    # imported rotate_half: not inspected
    "from transformers.models.llama.modeling_llama import rotate_half\n"
    "def rope(q, cos, sin):\n    return q * cos + rotate_half(q) * sin\n",
    # rotate without the negation
    "def rot(x):\n    x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((x2, x1), dim=-1)\n"
    "def rope(q, cos, sin):\n    return q * cos + rot(q) * sin\n",
    # interleaved pairs without the negation, or not flattened back
    "def rot(x):\n    x1 = x[..., ::2]\n    x2 = x[..., 1::2]\n    return torch.stack((x2, x1), dim=-1).flatten(-2)\n"
    "def rope(q, cos, sin):\n    return q * cos + rot(q) * sin\n",
    "def rot(x):\n    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1)\n"
    "def rope(q, cos, sin):\n    return q * cos + rot(q) * sin\n",
    # pairs of different tensors
    "def rot(x, y):\n    return torch.stack((-y[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)\n"
    "def rope(q, cos, sin):\n    return q * cos + rot(q, q) * sin\n",
    # mismatched tensors
    "def rotate_half(x):\n    x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)\n"
    "def rope(q, k, cos, sin):\n    return k * cos + rotate_half(q) * sin\n",
    # a plain weighted sum
    "def mix(a, b, wa, wb):\n    return a * wa + b * wb\n",
])
def test_asc702_near_misses(src):
    assert found(HEAD + src, "ASC702") == []


# ------------------------------------------------------------------------------ ASC703 / ASC705
@pytest.mark.parametrize("body, words", [
    ("a, b = x.chunk(2, dim=-1)\n    return F.silu(a) * b", ["npu_swiglu(x, dim=-1)"]),
    ("a, b = x.chunk(2, dim=-1)\n    return b * F.silu(a)", ["npu_swiglu(x, dim=-1)"]),
    ("a, b = x.chunk(2, dim=-1)\n    return a * F.silu(b)", ["swapping the halves"]),
    ("return F.silu(self.w1(x)) * self.w3(x)", ["merge `self.w1` and `self.w3`"]),
    ("g = self.w1(x)\n    u = self.w3(x)\n    return nn.functional.silu(g) * u", ["merge `self.w1` and `self.w3`"]),
    ("return torch.nn.functional.silu(x[..., :n]) * x[..., n:]", ["npu_swiglu(x, dim=-1)"]),
    ("return nn.SiLU()(x.chunk(2, -1)[0]) * x.chunk(2, -1)[1]", ["npu_swiglu"]),
])
def test_asc703_spellings(body, words):
    (f,) = found(HEAD + f"def mlp(self, x, n=4):\n    {body}\n", "ASC703")
    for word in words:
        assert word in f.message


@pytest.mark.parametrize("body", [
    "return F.silu(x) * x",
    "return F.silu(x) * gate",
    "return F.silu(self.w1(x)) * self.w1(x)",
    "return F.silu(self.w1(x)) * self.w3(y)",
    "a, b = x.chunk(2, dim=1)\n    return F.silu(a) * b",
    "a, b, c = x.split(n, dim=-1)\n    return F.silu(a) * b",
    "a, b = x.chunk(2, dim=-1)\n    return F.gelu(a) * b",
    "a, b = x.chunk(2, dim=-1)\n    return torch.sigmoid(a) * b",
])
def test_asc703_near_misses(body):
    assert found(HEAD + f"def mlp(self, x, gate=None, y=None, n=4):\n    {body}\n", "ASC703") == []


@pytest.mark.parametrize("body, call", [
    ("a, b = x.chunk(2, dim=-1)\n    return F.gelu(a) * b",
     "npu_geglu(x, dim=-1, approximate=0, activate_left=True)[0]"),
    ("a, b = x.chunk(2, dim=-1)\n    return a * F.gelu(b)", "npu_geglu(x, dim=-1, approximate=0)[0]"),
    ("a, b = x.chunk(2, dim=-1)\n    return F.gelu(a, approximate='tanh') * b",
     "npu_geglu(x, dim=-1, approximate=1, activate_left=True)[0]"),
    ("h = self.proj(x)\n    return F.gelu(h[..., :n]) * h[..., n:]",
     "npu_geglu(h, dim=-1, approximate=0, activate_left=True)"),
])
def test_asc705_spellings(body, call):
    (f,) = found(HEAD + f"def ff(self, x, n=4):\n    {body}\n", "ASC705")
    assert call in f.message


@pytest.mark.parametrize("body", [
    "return F.gelu(self.w1(x)) * self.w2(x)",  # GELU gating without chunk halves
    "return F.gelu(x) * y",
    "a, b = x.chunk(2)\n    return F.gelu(a) * b",
    "return F.gelu(x)",
])
def test_asc705_near_misses(body):
    assert found(HEAD + f"def ff(self, x, y=None):\n    {body}\n", "ASC705") == []


# ------------------------------------------------------------------------------ ASC704
@pytest.mark.parametrize("body", [
    "return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1) @ v",
    "return torch.softmax(q @ k.transpose(-1, -2) * scale, dim=-1) @ v",
    "return F.softmax(torch.matmul(q, k.mT) * scale, dim=-1).matmul(v)",
    "s = (q * scale) @ k.transpose(-2, -1)\n    return s.softmax(-1) @ v",
    "s = q @ k.permute(0, 1, 3, 2)\n    s = s.masked_fill(mask, float('-inf'))\n    return s.softmax(dim=-1) @ v",
    "s = torch.baddbmm(bias, q, k.transpose(1, 2), beta=0.0, alpha=scale)\n"
    "    p = torch.nn.Softmax(dim=-1)(s)\n    return torch.bmm(p, v)",
    "s = torch.matmul(q, k.transpose(-1, -2))\n    s = s / math.sqrt(d)\n    s = s + mask\n"
    "    p = F.softmax(s.float(), dim=-1).type_as(q)\n    p = F.dropout(p, p=0.1, training=True)\n"
    "    return torch.matmul(p, v)",
])
def test_asc704_spellings(body):
    src = HEAD + f"def attn(q, k, v, d=64, scale=0.125, mask=None, bias=None):\n    {body}\n"
    assert len(found(src, "ASC704")) == 1


@pytest.mark.parametrize("body", [
    "w = F.softmax(self.gate(x), dim=-1)\n    return w @ experts",  # router softmax
    "return torch.softmax(q @ k.transpose(-2, -1), dim=1) @ v",  # not the last dim
    "return torch.softmax(q @ k, dim=-1) @ v",  # no transposed key
    "s = q @ k.transpose(0, 1)\n    return s.softmax(-1) @ v",  # batch/sequence swap, not the key's last dims
    "return F.scaled_dot_product_attention(q, k, v)",
    "p = torch.softmax(logits, dim=-1)\n    return p @ self.codebook",
])
def test_asc704_near_misses(body):
    src = HEAD + f"def attn(self, q, k, v, x=None, experts=None, logits=None):\n    {body}\n"
    assert found(src, "ASC704") == []


def test_asc704_rebinding_chain_is_followed_not_looped():
    src = HEAD + ("def attn(a, k, v):\n    a = a @ k.transpose(-2, -1)\n    a = a.softmax(-1)\n    a = a @ v\n"
                  "    a = a @ v\n    return a\n")
    assert [f.line for f in found(src, "ASC704")] == [9]


# ------------------------------------------------------------------------------ regressions from the corpus
def test_reference_implementations_in_test_files_are_skipped():
    src = HEAD + "def ref(x, eps):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n"
    assert len(found(src, "ASC701")) == 1
    assert lint(src, select=["ASC701"], path="tests/ops/test_npu_rms_norm.py") == []


def test_rsqrt_factor_scaling_another_tensor_is_not_rms_norm():
    # mHC-style head: the norm factor of x scales a projection of x
    src = HEAD + ("def head(self, x, w):\n    x = x.float()\n"
                  "    rsqrt = torch.rsqrt(x.square().mean(-1, keepdim=True) + self.eps)\n"
                  "    mixes = F.linear(x, w) * rsqrt\n    return mixes\n")
    assert found(src, "ASC701") == []


def test_bound_factor_is_reported_once_where_it_scales_x():
    src = HEAD + ("def gated_norm(x, w, b, eps):\n    x = x.float()\n"
                  "    rstd = 1 / torch.sqrt(x.square().mean(dim=-1, keepdim=True) + eps)\n"
                  "    out = (x * rstd * w) + b if b is not None else (x * rstd * w)\n    return out\n")
    assert [f.line for f in found(src, "ASC701")] == [9]


@pytest.mark.parametrize("marker", [
    "attention_interface = ALL_ATTENTION_FUNCTIONS[self.config._attn_implementation]",
    "out = torch_npu.npu_sparse_flash_attention(q, k, v)",
    "from flash_attn import flash_attn_func",
])
def test_eager_attention_as_fallback_of_a_fused_path_is_silent(marker):
    src = HEAD + ("def eager(q, k, v, mask):\n    w = torch.matmul(q, k.transpose(2, 3)) + mask\n"
                  "    w = F.softmax(w, dim=-1)\n    return torch.matmul(w, v)\n")
    assert len(found(src, "ASC704")) == 1
    assert found(src + marker + "\n", "ASC704") == []


def test_messages_never_quote_a_cut_expression():
    src = HEAD + ("def norm(self, eps):\n"
                  "    h = self.layers[self.current_layer_index].attention.output_projection(self.cached_states)\n"
                  "    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)\n")
    (f,) = found(src, "ASC701")
    assert "npu_rms_norm(h, gamma, epsilon=eps)" in f.message and "..." not in f.message
    src = HEAD + ("def mlp(self, x):\n    x = self.w12(x)\n    x = x.chunk(2, dim=-1)\n"
                  "    return F.silu(x[0]) * x[1]\n")
    (f,) = found(src, "ASC703")
    assert "npu_swiglu(self.w12(x), dim=-1)" in f.message
    src = HEAD + ("def mlp(self, x):\n    x = self.projections_for_the_gated_linear_unit_of_this_block(x)\n"
                  "    x = x.chunk(2, dim=-1)\n    return F.silu(x[0]) * x[1]\n")
    (f,) = found(src, "ASC703")
    assert "npu_swiglu(gate_up, dim=-1)" in f.message and "..." not in f.message


@pytest.mark.parametrize("body", [
    # GPT-J's rotate_every_two
    "def rotate_every_two(x):\n    x1 = x[:, :, :, ::2]\n    x2 = x[:, :, :, 1::2]\n"
    "    x = torch.stack((-x2, x1), axis=-1)\n    return x.flatten(-2)\n"
    "def rope(x, cos, sin):\n    return (x * cos) + (rotate_every_two(x) * sin)\n",
    # written inline, reshaped back
    "def rope(qw, cos, sin):\n    qw2 = torch.stack([-qw[..., 1::2], qw[..., ::2]], dim=-1).reshape_as(qw)\n"
    "    return qw * cos + qw2 * sin\n",
    # einops
    "from einops import rearrange\ndef rot(x):\n    x1, x2 = x[..., ::2], x[..., 1::2]\n"
    "    return rearrange(torch.stack((-x2, x1), dim=-1), '... d j -> ... (d j)')\n"
    "def rope(t, cos, sin):\n    return t * cos + rot(t) * sin\n",
])
def test_asc702_interleaved_rope(body):
    (f,) = found(HEAD + body, "ASC702")
    assert "rotary_mode='interleave'" in f.message and "slice/neg/stack" in f.message
    assert "Atlas A2/A3" in f.message


def test_asc702_rotate_half_message_has_no_mode():
    src = HEAD + ("def rotate_half(x):\n    x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)\n"
                  "def rope(q, cos, sin):\n    return q * cos + rotate_half(q) * sin\n")
    (f,) = found(src, "ASC702")
    assert "npu_rotary_mul(q, cos, sin)`" in f.message and "rotary_mode" not in f.message


# ------------------------------------------------------------------------------ issue #29: shapes the rules missed
@pytest.mark.parametrize("body", [
    # a cast around the softmax (upcast for stability, cast back)
    "s = q @ k.transpose(-2, -1) * scale\n    p = torch.softmax(s.float(), dim=-1).to(s.dtype)\n    return p @ v",
    "s = torch.matmul(q, k.transpose(2, 3))\n    s = s + mask\n"
    "    p = F.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)\n    return torch.matmul(p, v)",
    # the mask applied in one branch of `if mask is not None`, the softmax written in both
    "s = q @ k.transpose(-2, -1)\n    if mask is not None:\n        s = s.masked_fill(mask, float('-inf'))\n"
    "        p = torch.softmax(s, dim=-1)\n    else:\n        p = torch.softmax(s, dim=-1)\n    return p @ v",
    # Swin: the scores reshaped per window to add the mask, in one branch only
    "s = q @ k.transpose(-2, -1) + bias\n    if mask is not None:\n"
    "        s = s.view(b // w, w, h, n, n) + mask.unsqueeze(1).unsqueeze(0)\n        s = s.view(-1, h, n, n)\n"
    "        s = s.softmax(dim=-1)\n    else:\n        s = s.softmax(dim=-1)\n    return s @ v",
    # T5: the bias added in place
    "s = torch.matmul(q, k.transpose(3, 2))\n    s += bias\n"
    "    p = F.softmax(s.float(), dim=-1).type_as(s)\n    return torch.matmul(p, v)",
    # the old LLaMA floor and GPT-2's causal `torch.where`
    "s = torch.matmul(q, k.transpose(2, 3)) / 8\n    if mask is not None:\n        s = s + mask\n"
    "        s = torch.max(s, torch.tensor(torch.finfo(s.dtype).min))\n    return torch.matmul(s.softmax(-1), v)",
    "s = torch.matmul(q, k.transpose(-1, -2))\n    s = torch.where(mask, s, floor)\n"
    "    return torch.matmul(F.softmax(s, dim=-1), v)",
    # the key transposed and scaled, the query scaled (CPM/Visformer)
    "s = torch.matmul(q / scale, k.transpose(-1, -2) / scale)\n    return torch.matmul(s.softmax(-1), v)",
])
def test_asc704_casts_branches_and_in_place_updates(body):
    src = HEAD + f"def attn(q, k, v, scale=0.125, mask=None, bias=None, b=2, w=1, h=4, n=8, floor=-1e4):\n    {body}\n"
    assert len(found(src, "ASC704")) == 1


def test_asc704_bmm_softmax_bmm_with_reshapes_in_optional_branches():
    # BART/Whisper: the scores reshaped to add the mask, the probabilities reshaped for a head mask and for the
    # returned weights, each in its own optional branch; one finding, at the second bmm
    src = HEAD + """def attn(self, q, k, v, bsz, tgt, src, mask, head_mask, output_attentions):
    w = torch.bmm(q, k.transpose(1, 2))
    if mask is not None:
        w = w.view(bsz, self.num_heads, tgt, src) + mask
        w = w.view(bsz * self.num_heads, tgt, src)
    w = nn.functional.softmax(w, dim=-1)
    if head_mask is not None:
        w = head_mask.view(1, -1, 1, 1) * w.view(bsz, self.num_heads, tgt, src)
        w = w.view(bsz * self.num_heads, tgt, src)
    if output_attentions:
        w_reshaped = w.view(bsz, self.num_heads, tgt, src)
        w = w_reshaped.view(bsz * self.num_heads, tgt, src)
    p = nn.functional.dropout(w, p=self.dropout, training=self.training)
    return torch.bmm(p, v)
"""
    assert [f.line for f in found(src, "ASC704")] == [19]


@pytest.mark.parametrize("body", [
    "sim = torch.einsum('b i d, b j d -> b i j', q, k) * scale\n"
    "    return torch.einsum('b i j, b j d -> b i d', sim.softmax(dim=-1), v)",
    # channels first (guided-diffusion's QKVAttention), an fp32 softmax
    "w = torch.einsum('bct,bcs->bts', q * scale, k * scale)\n"
    "    w = torch.softmax(w.float(), dim=-1).type(w.dtype)\n    return torch.einsum('bts,bcs->bct', w, v)",
    "s = torch.einsum('...id,...jd->...ij', q, k)\n    return torch.einsum('...ij,...jd->...id', s.softmax(-1), v)",
])
def test_asc704_einsum_attention(body):
    assert len(found(HEAD + f"def attn(q, k, v, scale=0.125):\n    {body}\n", "ASC704")) == 1


@pytest.mark.parametrize("body", [
    # a router's softmax, cast to fp32 for a stable routing decision: no q @ k^T
    "w = F.softmax(self.gate(x).float(), dim=-1).type_as(x)\n    return w @ experts",
    # single-query (Luong) attention over an untransposed product, softmax over a 2-D score
    "a = torch.bmm(h, q.unsqueeze(2)).squeeze(2)\n    a = torch.softmax(a, dim=1)\n"
    "    return torch.bmm(a.unsqueeze(1), h)",
    # einsum that is a plain product `a @ b`, and one weighing a relative-position table (it has the query axis)
    "w = torch.einsum('bij,bjk->bik', q, k)\n    return torch.einsum('bik,bkd->bid', w.softmax(-1), v)",
    "s = torch.einsum('bnid,bnjd->bnij', q, k).softmax(-1)\n    return torch.einsum('bnij,ijh->bnih', s, table)",
    # the probabilities of the other branch of an if/else never reach this product
    "p = x.softmax(-1)\n    if train:\n        p = torch.softmax(q @ k.transpose(-2, -1), dim=-1)\n"
    "    else:\n        return p @ v\n    return p",
    # a reduction, not a clamp, before the softmax
    "s = torch.max(q @ k.transpose(-2, -1), -1)\n    return torch.softmax(s, -1) @ v",
])
def test_asc704_not_attention(body):
    src = HEAD + (f"def f(self, q, k, v, x=None, h=None, experts=None, table=None, train=True):\n    {body}\n")
    assert found(src, "ASC704") == []


def test_asc704_mindspore_casts_around_the_softmax():
    src = """
        import mindspore as ms
        from mindspore import nn, ops
        from mindspore.ops import operations as P
        import mindspore.common.dtype as mstype

        class Attention(nn.Cell):
            def __init__(self):
                super().__init__()
                self.bmm = P.BatchMatMul()
                self.bmm_t = P.BatchMatMul(transpose_b=True)
                self.softmax = nn.Softmax()
                self.cast = P.Cast()

            def construct(self, q, k, v):
                score = self.cast(self.bmm_t(q, k), mstype.float32)
                probs = self.cast(self.softmax(score), mstype.float16)
                return self.bmm(probs, v)

        def vit(q, k, v):
            attn = ops.matmul(q, k.transpose(0, 1, 3, 2))
            attn = ops.softmax(attn.astype(ms.float32), axis=-1).astype(attn.dtype)
            return ops.matmul(attn, v)
    """
    assert [f.line for f in found(src, "ASC704")] == [18, 23]


def test_asc701_weight_or_gamma_in_the_message():
    src = HEAD + """def rms_norm(x, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
class Weighted(nn.Module):
    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * x * torch.rsqrt(variance + self.eps)
class Llama(nn.Module):
    def forward(self, h):
        dtype = h.dtype
        h = h.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)
def scaled_after(x, g, eps):
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)).to(g.dtype) * g
"""
    by_line = {f.line: f.message for f in found(src, "ASC701")}
    assert sorted(by_line) == [7, 11, 16, 19]
    assert "npu_rms_norm(x, gamma, epsilon=eps)[0]" in by_line[7] and "a ones tensor" in by_line[7]
    assert "npu_rms_norm(x, self.weight, epsilon=self.eps)[0]" in by_line[11]
    assert "npu_rms_norm(h, self.weight, epsilon=self.eps)[0]" in by_line[16]
    assert "npu_rms_norm(x, g, epsilon=eps)[0]" in by_line[19]
    assert "ones tensor" not in by_line[11] + by_line[16] + by_line[19]


@pytest.mark.parametrize("body", [
    # an L2 normalisation (a sum of squares): F.normalize, not RMSNorm
    "return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)",
    # the RMS of one tensor scaling another
    "return y * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)",
    "return (w * y) * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)",
])
def test_asc701_rms_like_code_that_normalises_something_else(body):
    assert found(HEAD + f"def norm(x, y, w, eps):\n    {body}\n", "ASC701") == []


def test_asc701_weight_after_an_in_place_cast_or_a_branch():
    src = HEAD + """class T5LayerNorm(nn.Module):
    def forward(self, h):
        variance = h.to(torch.float32).pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.eps)
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            h = h.to(self.weight.dtype)
        return self.weight * h
class Either(nn.Module):
    def forward(self, x):
        if self.rms:
            o = x * torch.rsqrt(x.to(torch.float32).pow(2).mean(-1, keepdim=True) + self.eps)
        else:
            o = self.ln(x)
        return o.type_as(x) * self.g
class Projected(nn.Module):
    def forward(self, x):
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.proj(x) * self.scale
"""
    messages = [f.message for f in found(src, "ASC701")]
    assert len(messages) == 3
    assert "npu_rms_norm(h, self.weight, epsilon=self.eps)[0]" in messages[0]  # the input, not its fp32 copy
    assert "npu_rms_norm(x, self.g, epsilon=self.eps)[0]" in messages[1]
    assert "npu_rms_norm(x, gamma, epsilon=self.eps)[0]" in messages[2]  # `self.scale` scales a projection


@pytest.mark.parametrize("gelu, advice", [
    ("F.gelu(gate, approximate=self.approximate)", "approximate=approx)[0]` with `approx` 1 if the GELU"),
    ("F.gelu(gate, approximate='tanh' if fast else 'none')", "approximate=approx)[0]` with `approx` 1 if"),
    ("F.gelu(gate, approximate='none')", "approximate=0)[0]`"),
    ("F.gelu(gate, approximate='tanh')", "approximate=1)[0]`"),
])
def test_asc705_approximation_chosen_at_run_time_is_not_prescribed(gelu, advice):
    src = HEAD + f"def ff(self, x, fast=False):\n    h, gate = self.proj(x).chunk(2, dim=-1)\n    return h * {gelu}\n"
    (f,) = found(src, "ASC705")
    assert advice in f.message
    if "approx)" in advice:
        assert "approximate=0" not in f.message and "approximate=1" not in f.message


def test_asc705_gelu_module_configured_at_run_time():
    src = HEAD + """class GEGLU(nn.Module):
    def __init__(self, dim, approximate):
        super().__init__()
        self.act = nn.GELU(approximate=approximate)
    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return self.act(a) * b
"""
    (f,) = found(src, "ASC705")
    assert "approximate=approx, activate_left=True)[0]`" in f.message


@pytest.mark.parametrize("body, code", [
    # one line: view -> transpose -> contiguous -> view (ShuffleNet), and flattened back with flatten(1, 2)
    ("return x.view(b, g, c // g, h, w).transpose(1, 2).contiguous().view(b, c, h, w)", "ASC101"),
    ("return x.reshape(b, g, c // g, h, w).permute(0, 2, 1, 3, 4).contiguous().flatten(1, 2)", "ASC101"),
    ("x = x.view(b, g, c // g, h, w).transpose(1, 2).contiguous()\n    return x.view(b, -1, h, w)", "ASC101"),
    # not a shuffle: the channels moved into the batch, or a 4-D (attention-head) view
    ("return x.view(b, g, c // g, h, w).transpose(1, 2).contiguous().view(b * c // g, g, h, w)", "ASC102"),
    ("return x.view(b, h, g, c).transpose(1, 2).contiguous()", "ASC102"),
])
def test_asc101_channel_shuffle_on_one_line(body, code):
    src = "import torch\nimport torch_npu\n" + f"def shuffle(x, g):\n    b, c, h, w = x.size()\n    {body}\n"
    assert [f.code for f in lint(src, select=["ASC101", "ASC102"])] == [code]
