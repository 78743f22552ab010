"""The tree keeps the shape docs/layout.md describes."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from assistant.records import STAGES, TIMING_KEYS, Timings

PACKAGE = Path(__file__).resolve().parent.parent / "assistant"
MAX_LINES = 420  # "about 400": past that, split along a stage boundary


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts).removesuffix(".__init__")] = path
    return found


def _imports(path: Path, known: dict[str, Path]) -> set[str]:
    """Every assistant module `path` imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module in known:
            out.add(node.module)
            for alias in node.names:  # `from assistant.speech import audio`
                if f"{node.module}.{alias.name}" in known:
                    out.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
    return out


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(path, modules) for name, path in modules.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_module_is_too_long():
    long = {
        str(p.relative_to(PACKAGE.parent)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these along a stage boundary: {long}"


def test_the_web_layer_never_touches_the_store():
    modules = _modules()
    for name, path in modules.items():
        if name.startswith("assistant.web"):
            assert not any(m.startswith("assistant.store") for m in _imports(path, modules)), name


ADAPTERS = ("assistant.web.page", "assistant.web.call", "assistant.web.openai", "assistant.cli",
            "assistant.wyoming")  # fmt: skip
"""The ways in: each translates its wire into a request of the session and its events back."""
TURN_MACHINERY = ("assistant.turns", "assistant.routing", "assistant.prompting")
"""What runs a turn: the pipeline, its chat stages (route, prompt, stream, recover), its voice
stages, the recorder; the router; the prompt. `turns.conversations` is the conversations' list
and settings, not a turn's machinery."""
NOT_MACHINERY = ("assistant.turns.conversations",)
EXEMPT = {
    # `assistant route`: the classifier's own tool (text in, its decision out), no turn
    ("assistant.cli", "assistant.routing.router"),
    ("assistant.cli", "assistant.routing.conversation"),
}


def _is_adapter(name: str) -> bool:
    return any(name == a or name.startswith(a + ".") or name.startswith(a + "_") for a in ADAPTERS)


def _is_machinery(name: str) -> bool:
    inside = any(name == m or name.startswith(m + ".") for m in TURN_MACHINERY)
    return inside and name not in NOT_MACHINERY


def test_adapters_reach_the_turn_machinery_only_through_the_session():
    # issue 47, item 3: the page, the call socket, /v1, the Gradio API, the command line and
    # Wyoming ask `assistant.session` (and pass typed records); none imports the pipeline, the
    # chat stages, the voice stages, the router or the prompt, at the top or in a function
    modules = _modules()
    adapters = sorted(n for n in modules if _is_adapter(n))
    ways_in = ("web.page.turns", "web.page.api", "web.call", "web.openai.route", "cli_chat",
               "wyoming.handling")  # fmt: skip
    for way_in in ways_in:
        assert f"assistant.{way_in}" in adapters, way_in
    machinery = {n for n in modules if _is_machinery(n)}
    assert {"assistant.turns.pipeline", "assistant.turns.chat", "assistant.turns.voice",
            "assistant.routing.router"} <= machinery  # fmt: skip
    breaches = sorted(
        (name, used)
        for name in adapters
        for used in _imports(modules[name], modules)
        if _is_machinery(used) and (name, used) not in EXEMPT
    )
    assert not breaches, f"adapters past the session: {breaches}"


def test_one_list_of_stages_and_one_percentile():
    assert tuple(f.name for f in dataclasses.fields(Timings)) == TIMING_KEYS == tuple(STAGES)
    for path in PACKAGE.rglob("*.py"):
        if path.name == "stats.py":
            continue
        text = path.read_text()
        for other in ("np.percentile", "quantile(", "def pct", "def percentile"):
            assert other not in text, f"{path.name}: use assistant.stats.percentile"


def test_one_protocol_per_speech_stage():
    # the stages' interfaces live once, in speech/stages.py; copies drifted apart before
    import re

    found = [
        (path.name, name)
        for path in PACKAGE.rglob("*.py")
        for name in re.findall(
            r"^class (SpeechToText|TextToSpeech)\(Protocol\)", path.read_text(), re.M
        )
    ]
    assert sorted(found) == [("stages.py", "SpeechToText"), ("stages.py", "TextToSpeech")]
