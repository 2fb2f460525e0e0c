"""Regression cases from the precision triage (issue 13) that inline examples cannot express."""
from __future__ import annotations

from conftest import lint


def test_host_sync_messages_never_show_cut_source():
    src = """
    import torch
    for step, (x, y) in enumerate(loader):
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        total += criterion_with_a_rather_long_name(model_output_tensor, target_labels).item()
        seen += loss.item()
    """
    messages = [f.message for f in lint(src, select=["ASC203"])]
    assert len(messages) == 2
    assert messages[0].startswith("`.item()` copies") and messages[1].startswith("`loss.item()` copies")
    assert not any("..." in m for m in messages)


def test_param_group_messages_never_show_cut_source():
    src = """
    import torch
    groups = [
        {"params": [p for p in model_without_ddp.backbone.parameters() if p.requires_grad]},
        {"params": [p for p in model_without_ddp.classifier.parameters() if p.requires_grad]},
    ]
    opt = torch.optim.SGD(groups, lr=0.1)
    """
    (finding,) = lint(src, select=["ASC302"])
    assert "one `params` list holding all of their parameters" in finding.message and "..." not in finding.message
    short = "import torch\nopt = torch.optim.SGD([{'params': a.parameters()}, {'params': b.parameters()}], lr=0.1)\n"
    (finding,) = lint(short, select=["ASC302"])
    assert "`{'params': [*a.parameters(), *b.parameters()], ...}`" in finding.message
