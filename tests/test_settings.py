"""Settings: environment over assistant.toml, read once, bad values rejected clearly."""

from __future__ import annotations

import pytest

from assistant.errors import ConfigError
from assistant.settings import load_settings


def test_defaults(tmp_path):
    s = load_settings(env={}, toml_path=tmp_path / "missing.toml")
    assert s.engine_url is None and s.engine_kind == "auto"
    assert s.chat.priority == 0 and s.chat.reasoning_effort == "low" and not s.chat.thinking
    assert s.deep.priority == 10 and s.deep.reasoning_effort == "high" and s.deep.thinking
    assert s.deep.max_tokens == 32768
    assert s.voice_variation == 1.0  # the voice as it comes
    s = load_settings(env={"ASSISTANT_VOICE_VARIATION": "0"}, toml_path=tmp_path / "missing")
    assert s.voice_variation == 0.0


def test_env_over_toml(tmp_path):
    toml = tmp_path / "assistant.toml"
    toml.write_text(
        'engine_url = "http://toml:8000/v1"\nmodel = "from-toml"\n'
        "[deep]\nmax_tokens = 16000\n[chat]\nmax_tokens = 512\n"
    )
    s = load_settings(
        env={"ASSISTANT_ENGINE_URL": "http://env:8000/v1/", "ASSISTANT_AUTH": "a:b,c:d"},
        toml_path=toml,
    )
    assert s.engine_url == "http://env:8000/v1"
    assert s.model == "from-toml"
    assert s.deep.max_tokens == 16000 and s.chat.max_tokens == 512
    assert s.auth == (("a", "b"), ("c", "d"))


@pytest.mark.parametrize(
    ("env", "toml", "message"),
    [
        ({"ASSISTANT_ENGINE_KIND": "tgi"}, "", "ASSISTANT_ENGINE_KIND"),
        ({"ASSISTANT_AUTH": "nopassword"}, "", "user:password"),
        ({"ASSISTANT_DEEP_MAX_IN_FLIGHT": "many"}, "", "whole number"),
        ({}, "[deep]\nmax_tokens = 100\n", "at least 8192"),
        ({}, "[chat]\ncolour = 1\n", "unknown lane setting"),
        ({}, "this is = = not toml", "assistant.toml"),
        ({"ASSISTANT_EMBEDDED_THREADS": "two"}, "", "EMBEDDED_THREADS must be a whole"),
        ({"ASSISTANT_EMBEDDED_THREADS": "0"}, "", "EMBEDDED_THREADS must be at least 1"),
        ({"ASSISTANT_EMBEDDED_PER_LANE": "maybe"}, "", "EMBEDDED_PER_LANE must be true"),
        ({"ASSISTANT_VOICE_VARIATION": "some"}, "", "VOICE_VARIATION must be a number"),
        ({}, "voice_variation = 1.5\n", "VOICE_VARIATION must be a number from 0 to 1"),
    ],
)
def test_bad_settings_say_what_is_wrong(tmp_path, env, toml, message):
    path = tmp_path / "assistant.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=message):
        load_settings(env=env, toml_path=path)


def test_allowed_hosts_are_names_without_scheme_or_port(tmp_path):
    env = {"ASSISTANT_ALLOWED_HOSTS": " Assistant.LAN, 192.168.1.20 ,[fd00::2],,"}
    s = load_settings(env=env, toml_path=tmp_path / "none")
    assert s.allowed_hosts == ("assistant.lan", "192.168.1.20", "fd00::2")
    toml = tmp_path / "assistant.toml"
    toml.write_text('allowed_hosts = ["box.local"]\n')
    assert load_settings(env={}, toml_path=toml).allowed_hosts == ("box.local",)
    for bad in ("http://box.local", "box.local:7860", "a b"):
        with pytest.raises(ConfigError, match="ASSISTANT_ALLOWED_HOSTS"):
            load_settings(env={"ASSISTANT_ALLOWED_HOSTS": bad}, toml_path=tmp_path / "none")


def test_the_embedded_engine_is_a_process_per_lane_on_one_thread_unless_told(tmp_path):
    s = load_settings(env={}, toml_path=tmp_path / "missing.toml")
    assert s.embedded_per_lane and s.embedded_threads == 1
    toml = tmp_path / "assistant.toml"
    toml.write_text("embedded_threads = 3\n")
    s = load_settings(env={"ASSISTANT_EMBEDDED_PER_LANE": "false"}, toml_path=toml)
    assert not s.embedded_per_lane and s.embedded_threads == 3
