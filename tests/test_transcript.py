"""A base model's request shape: a transcript with example exchanges (fast tier, no engine)."""

from __future__ import annotations

from types import SimpleNamespace

from assistant.engine.client import Engine, collect
from assistant.engine.transcript import CONTINUE, TranscriptPrompt
from assistant.prompting.prompt import Prompts
from assistant.records import Message

OPENING = "A conversation.\n\nUser: hi\nAssistant: Hello."
T = TranscriptPrompt(OPENING, "User: task\nAssistant: Long answer.\n\nIn paragraphs.")


def test_history_is_kept_one_line_per_turn_ending_at_the_assistant():
    messages = [
        Message("system", "ignored by a base model"),
        Message("user", "What is the capital\nof France?"),
        Message("assistant", "Paris."),
        Message("user", "And Japan?"),
    ]
    prompt = T.render(messages)
    # both lanes share the whole opening: the engine's prefix cache serves them both
    assert prompt.startswith(OPENING + "\nUser: task\nAssistant: Long answer.")
    assert "ignored" not in prompt
    assert prompt.endswith(
        "User: What is the capital of France?\nAssistant: Paris.\nUser: And Japan?\nAssistant:"
    )
    assert "\n" in T.stop("chat") and "\n" not in T.stop("deep")
    assert T.temperature("chat") == 0.0


def test_a_resumed_answer_stays_open_after_the_shared_opening():
    messages = Prompts("s", "d").deep("Explain steam engines.", partial="Steam engines are used")
    assert T.continues(messages) and messages[-1].content == CONTINUE
    prompt = T.render(messages, "deep")
    assert (
        prompt == T.render(messages, "chat")
        and prompt.startswith(OPENING + "\nUser: task\nAssistant: Long answer.")
        and prompt.endswith("User: Explain steam engines.\nAssistant: Steam engines are used")
    )


class _Stream:
    def __init__(self, texts: list[str]):
        self.chunks = [
            SimpleNamespace(usage=None, choices=[SimpleNamespace(text=t, finish_reason=None)])
            for t in texts
        ] + [SimpleNamespace(usage=None, choices=[SimpleNamespace(text="", finish_reason="stop")])]

    def __aiter__(self):
        return self._gen()

    async def _gen(self):
        for chunk in self.chunks:
            yield chunk

    async def close(self) -> None:
        pass


class _Client:
    """Just enough of AsyncOpenAI for a completions stream."""

    def __init__(self, texts: list[str]):
        self.texts = texts
        self.prompts: list[str] = []
        self.completions = SimpleNamespace(create=self._create)

    def with_options(self, **_: object) -> _Client:
        return self

    async def _create(self, **kw: object) -> _Stream:
        self.prompts.append(str(kw["prompt"]))
        return _Stream(self.texts)


async def test_a_new_answer_loses_its_leading_space_and_a_resumed_one_keeps_it(settings):
    client = _Client([" to", " make", " steam."])
    engine = Engine(client, kind="llamacpp", model="m", context=4096, transcript=T)  # type: ignore[arg-type]
    fresh = await collect(engine.stream([Message("user", "hi")], settings.chat))
    assert fresh.content == "to make steam." and fresh.finish_reason == "stop"
    messages = Prompts("s", "d").deep("Explain.", partial="Steam engines are used")
    resumed = await collect(engine.stream(messages, settings.deep))
    assert resumed.content == " to make steam."  # "used to", not "usedto"
    assert client.prompts[-1].endswith("Assistant: Steam engines are used")
