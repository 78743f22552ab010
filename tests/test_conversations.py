"""Conversations per login: the list, reopening, rename, delete, export, and preferences
(the last conversation, the voice and its rate). A real SQLite file; fast tier."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from assistant.records import Timings, TurnResult
from assistant.store.db import Store
from assistant.store.schema import MIGRATIONS
from assistant.turns.conversations import Conversations
from assistant.web.page.conversations_panel import label
from assistant.web.page.turns import history_of, voice_of


def result(reply: str, **kw) -> TurnResult:
    timings = Timings(ttft=120.0, total=480.0)
    return TurnResult(reply, "chat", "classifier 0.9", "stop", timings=timings, **kw)


@pytest.fixture()
def convs(tmp_path) -> Conversations:
    return Conversations(Store(tmp_path / "a.db"))


def test_the_list_is_per_login_newest_first_titled_by_the_first_request(convs):
    store = convs._store
    a, b = convs.start("ann"), convs.start("ann")
    bobs = convs.start("bob")
    empty = convs.start("ann")  # no turn yet: not listed
    store.add_turn(a, "apples are red", result("ok"))
    store.add_turn(b, "bananas are yellow", result("ok"))
    store.add_turn(bobs, "bob's question", result("ok"))
    store.add_turn(a, "and cherries", result("ok"))  # a is active again: first
    listed = convs.listed("ann")
    assert [(c.id, c.title, c.turns) for c in listed] == [
        (a, "apples are red", 2),
        (b, "bananas are yellow", 1),
    ]
    assert empty not in [c.id for c in listed]
    assert [c.title for c in convs.listed("bob")] == ["bob's question"]
    assert "apples are red" in label(listed[0])


def test_another_login_cannot_open_rename_delete_or_export(convs):
    cid = convs.start("ann")
    convs._store.add_turn(cid, "ann's secret", result("ok"))
    assert convs.turns(cid, "bob") is None and convs.get(cid, "bob") is None
    assert not convs.rename(cid, "bob", "mine now")
    assert not convs.delete(cid, "bob")
    assert convs.markdown(cid, "bob") is None
    assert [c.title for c in convs.listed("ann")] == ["ann's secret"]


def test_rename_delete_and_blank_titles(convs):
    cid = convs.start("ann")
    convs._store.add_turn(cid, "first", result("ok"))
    assert not convs.rename(cid, "ann", "   ")  # a blank title is refused
    assert convs.rename(cid, "ann", "  Fruit\n talk ")
    assert convs.get(cid, "ann").title == "Fruit talk"
    assert convs.delete(cid, "ann")
    assert convs.listed("ann") == [] and convs.turns(cid, "ann") is None


def test_export_is_markdown_with_reasoning_folded_and_latency(convs):
    cid = convs.start("ann")
    convs._store.add_turn(
        cid, "why is the sky blue", result("Rayleigh scattering.", reasoning="hmm")
    )
    convs._store.add_turn(cid, "spoken one", result("", error="the engine broke"), source="voice")
    md = convs.markdown(cid, "ann")
    assert md.startswith("# why is the sky blue\n")
    assert "<details><summary>Reasoning</summary>" in md and "hmm" in md
    assert "Rayleigh scattering." in md and "*chat lane, classifier 0.9; ttft 120 ms" in md
    assert "## You (spoken)" in md and "⚠️ the engine broke" in md


def test_reopened_turns_look_as_they_did_live(convs):
    cid = convs.start("ann")
    convs._store.add_turn(cid, "typed", result("answer one", reasoning="thinking"))
    convs._store.add_turn(cid, "spoken", result("answer two"), source="voice")
    history = history_of(convs.turns(cid, "ann"))
    roles = [(m["role"], (m.get("metadata") or {}).get("title")) for m in history]
    assert roles == [
        ("user", None),
        ("assistant", "Reasoning"),
        ("assistant", None),
        ("user", None),
        ("assistant", None),
    ]
    assert history[1]["metadata"]["status"] == "done"
    assert "answer one" in history[2]["content"] and "ttft 120 ms" in history[2]["content"]
    assert history[3]["content"] == "🎤 spoken"


def test_preferences_merge_per_login(convs):
    assert convs.prefs("ann") == {}
    convs.remember("ann", voice="joe", rate=1.25)
    convs.remember("ann", conversation="c1")
    convs.remember("ann", voice=None)  # None forgets
    assert convs.prefs("ann") == {"rate": 1.25, "conversation": "c1"}
    assert convs.prefs("bob") == {}


def test_migration_titles_and_dates_existing_conversations(tmp_path):
    # a store made before conversations were listed: titles come from the first request
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    for step in MIGRATIONS[:2]:
        db.execute("BEGIN")
        step(db)
        db.execute("COMMIT")
    db.execute("PRAGMA user_version=2")
    db.execute("INSERT INTO conversations VALUES ('c1', 'ann', '', 100.0)")
    db.execute(
        "INSERT INTO turns (conversation_id, created_at, user_text, lane, reason) "
        "VALUES ('c1', 200.0, 'old question', 'chat', 'r')"
    )
    db.close()
    (info,) = Store(path).conversations("ann")
    assert (info.title, info.updated_at, info.turns) == ("old question", 200.0, 1)


class Speech:
    """SpeechModels' interface: records which voice and rate were asked for."""

    def __init__(self, known: set[str]):
        self.known = known
        self.asked: list[tuple[str | None, float]] = []

    async def tts(self, voice: str | None = None, rate: float = 1.0) -> object:
        self.asked.append((voice, rate))
        if voice is not None and voice not in self.known:
            from assistant.errors import ConfigError

            raise ConfigError(f"unknown voice '{voice}'")
        return object()


def test_replies_use_the_users_voice_and_rate_and_a_gone_voice_falls_back():
    speech = Speech({"joe"})
    assert asyncio.run(voice_of(speech, {"voice": "joe", "rate": 1.5})) is not None
    assert asyncio.run(voice_of(speech, {"voice": "removed", "rate": 0.8})) is not None
    assert speech.asked == [("joe", 1.5), ("removed", 0.8), (None, 0.8)]


def test_voice_settings_stay_disabled_until_the_logins_own_values_are_loaded(convs):
    # enabled from the start, a change made before the page's load event answered was
    # overwritten by the stored values (and then saved back over the choice)
    import gradio as gr

    from assistant.settings import Settings
    from assistant.web.page.conversations_panel import VoiceSettings, build_voice_panel

    settings = Settings()
    with gr.Blocks():
        panel = build_voice_panel(settings)
    assert [panel.voice.interactive, panel.rate.interactive, panel.speak.interactive] == [
        False,
        False,
        False,
    ]
    convs.remember("local", rate=1.5, speak=False)
    voice, rate, speak, player = VoiceSettings(convs, settings).load_voice(None)
    assert voice["interactive"] is True and "value" not in voice  # no stored voice: kept
    assert rate == {"__type__": "update", "value": 1.5, "interactive": True}
    assert speak == {"__type__": "update", "value": False, "interactive": True}
    assert player.visible is False


def test_each_voice_setting_is_saved_alone_as_its_control_shows_it(convs):
    # a save of all three on a change to any could carry another control's value from before
    # its change landed: CI saw the untick hide the player while the store kept the old values
    import gradio as gr
    import pytest

    from assistant.settings import Settings
    from assistant.web.page.conversations_panel import VoiceSettings

    voices = VoiceSettings(convs, Settings())
    assert voices.save("rate", 1.5, None, None) is None
    player = voices.save("speak", False, None, None)
    assert convs.prefs("local") == {"rate": 1.5, "speak": False}
    assert player.visible is False
    voices.save("rate", 9.0, None, None)  # out of range: held to the slider's bounds
    assert convs.prefs("local") == {"rate": 2.0, "speak": False}  # speak untouched by the rate
    with pytest.raises(gr.Error):
        voices.save("voice", "no-such-voice", None, None)
    assert convs.prefs("local") == {"rate": 2.0, "speak": False}  # refused: nothing changed
    voices.save("voice", None, None, None)  # the default voice: not stored
    assert convs.prefs("local") == {"rate": 2.0, "speak": False}
    assert voices.save("speak", True, None, None).visible is True


def test_a_voice_save_that_lands_after_a_newer_one_of_its_control_is_dropped(convs):
    # two saves in flight at once may finish in either order: CI saw the box's untick saved,
    # then an earlier save (box still ticked) land last, and the setting read "on"
    from assistant.settings import Settings
    from assistant.web.page.conversations_panel import VoiceSettings

    voices = VoiceSettings(convs, Settings())
    voices.save("speak", False, "page1:2", None)  # the newer save lands first
    assert voices.save("speak", True, "page1:1", None) == {"__type__": "update"}  # the older
    assert convs.prefs("local") == {"speak": False}
    voices.save("rate", 1.5, "page1:1", None)  # another control's order is its own
    assert convs.prefs("local") == {"rate": 1.5, "speak": False}
    voices.save("rate", 1.2, "page1:3", None)
    assert convs.prefs("local") == {"rate": 1.2, "speak": False}
    voices.save("speak", True, "page2:1", None)  # another page (a reload): its own order
    assert convs.prefs("local") == {"rate": 1.2, "speak": True}


def test_the_export_is_made_when_asked_not_after_every_turn(convs, tmp_path):
    # every turn wrote the whole conversation again as an export file (and Gradio kept a copy
    # of each in its cache), whether or not anyone downloaded it (issue 49, item 6)
    from assistant.app_client import LOCAL_OWNER
    from assistant.settings import Settings
    from assistant.web.page.conversations_panel import Library
    from assistant.web.page.turns import Tab

    library = Library(convs, Settings(data_dir=tmp_path))
    tab = Tab()
    assert library.export(tab, None) is None  # nothing open: nothing to export
    cid = tab.conversation_id = convs.start(LOCAL_OWNER)
    for n in range(5):
        convs._store.add_turn(cid, f"question {n}", result(f"answer {n}", reasoning="hmm"))
        library.after_turn(tab, None)
    assert list(library.exports.iterdir()) == []  # five turns, no file written
    made = library.export(tab, None)
    assert made is not None and [p.name for p in library.exports.iterdir()] == [
        made.rsplit("/", 1)[-1]
    ]
    # the same document the download always was
    assert open(made).read() == convs.markdown(cid, LOCAL_OWNER)
    other = Tab(conversation_id=convs.start("bob"))  # another login's id: nothing
    convs._store.add_turn(other.conversation_id, "bob's", result("his"))
    assert library.export(other, None) is None
