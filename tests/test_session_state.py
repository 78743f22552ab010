"""Gradio sessions with block configs made on demand (`web.page.session_state`): a new session
builds none, and a deep link or a changed value reads what Gradio's own copy would hold."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def demo() -> Any:
    import gradio as gr

    with gr.Blocks() as demo:
        box = gr.Textbox(label="ask", value="hello")
        out = gr.Markdown("nothing yet")
        gr.Button("go").click(lambda t: t.upper(), box, out)
    return demo


def lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    """Install the lazy configs for this test only (Gradio's own `__init__` back after it)."""
    from gradio import state_holder

    from assistant.web.page.session_state import lazy_session_configs

    cls = state_holder.SessionState
    monkeypatch.setattr(cls, "__init__", cls.__init__)
    monkeypatch.setattr(cls, "_lazy_configs", False, raising=False)
    assert lazy_session_configs()


def test_a_session_made_lazily_holds_what_gradios_own_holds(demo, monkeypatch) -> None:
    from gradio import state_holder

    eager = state_holder.SessionState(demo)  # before: Gradio's own
    expected = list(eager.components)
    assert expected  # the configs the deep link saves
    lazily(monkeypatch)
    made: list[int] = []
    config_for_block = demo.default_config.config_for_block

    def counted(key: int, *args: Any) -> dict:
        made.append(key)
        return config_for_block(key, *args)

    monkeypatch.setattr(type(demo.default_config), "config_for_block", staticmethod(counted))
    lazy = state_holder.SessionState(demo)
    assert made == []  # a new session builds none
    assert list(lazy.components) == expected
    assert len(lazy.config_values) == len(eager.config_values)


def test_a_changed_value_is_noted_in_the_lazy_copy(demo, monkeypatch) -> None:
    from gradio import state_holder

    from assistant.web.page.session_state import LazyConfigs

    eager = state_holder.SessionState(demo)
    lazily(monkeypatch)
    lazy = state_holder.SessionState(demo)
    assert isinstance(lazy.config_values, LazyConfigs)
    box = next(k for k, b in demo.blocks.items() if getattr(b, "label", None) == "ask")
    for state in (eager, lazy):
        state._update_value_in_config(box, "changed")
    assert lazy.config_values[box]["props"]["value"] == "changed"
    assert list(lazy.components) == list(eager.components)
    assert 123456 not in lazy.config_values and lazy.config_values.get(123456) is None
