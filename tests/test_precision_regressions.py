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
