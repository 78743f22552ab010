"""The deep lane's cap follows the engine's sequences where the engine says them (llama.cpp's
`/props`, vLLM's `/server_info` with its development endpoints on), and the doctor's
"deep lane" check says what it found beside the cap the app uses."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import pytest

from assistant import runtime
from assistant.doctor import sequences_check
from assistant.runtime import probe


def _engine(routes: dict[str, dict]):
    """A fake `httpx.get`: each path's JSON, 404 elsewhere; records the paths asked."""
    asked: list[str] = []

    def get(url: str, **kw) -> httpx.Response:
        path = "/" + url.split("/", 3)[3]
        asked.append(path)
        request = httpx.Request("GET", url)
        if path in routes:
            return httpx.Response(200, json=routes[path], request=request)
        return httpx.Response(404, json={"detail": "Not Found"}, request=request)

    return get, asked


MODELS_LLAMACPP = {"data": [{"id": "m", "owned_by": "llamacpp"}]}
MODELS_VLLM = {"data": [{"id": "tiny", "owned_by": "vllm", "max_model_len": 4096}]}


def test_llamacpp_slots_are_read_from_props(monkeypatch):
    props = {"total_slots": 4, "default_generation_settings": {"n_ctx": 8192}}
    get, asked = _engine({"/v1/models": MODELS_LLAMACPP, "/props": props})
    monkeypatch.setattr(runtime.httpx, "get", get)
    info = probe("http://engine/v1", None, "auto")
    assert (info.kind, info.slots, info.context) == ("llamacpp", 4, 8192)
    assert "/props" in asked


def test_vllm_max_num_seqs_is_read_from_server_info_in_dev_mode(monkeypatch):
    dump = {"vllm_config": {"scheduler_config": {"max_num_seqs": 6}}}
    get, _ = _engine({"/v1/models": MODELS_VLLM, "/server_info": dump})
    monkeypatch.setattr(runtime.httpx, "get", get)
    info = probe("http://engine/v1", None, "auto")
    assert (info.kind, info.slots, info.context) == ("vllm", 6, 4096)


def test_vllm_without_dev_mode_reports_no_sequences(monkeypatch):
    get, asked = _engine({"/v1/models": MODELS_VLLM})
    monkeypatch.setattr(runtime.httpx, "get", get)
    info = probe("http://engine/v1", None, "auto")
    assert info.slots is None and "/props" not in asked


def _rt(kind: str, cap: int, setting: int | None, slots: int | None = None, app_slots=None):
    return SimpleNamespace(
        scheduler=SimpleNamespace(deep_max=cap, slots=app_slots),
        settings=SimpleNamespace(deep_max_in_flight=setting),
        engine=SimpleNamespace(kind=kind),
        info=SimpleNamespace(slots=slots),
    )


@pytest.mark.parametrize(
    ("rt", "seen", "ok", "detail"),
    [
        (
            _rt("vllm", 2, None),
            4,
            True,
            "vLLM runs 4 sequences at once; the deep lane may use 2 (the default; "
            "set ASSISTANT_DEEP_MAX_IN_FLIGHT=3 to use all but one)",
        ),
        (
            _rt("vllm", 3, 3),
            4,
            True,
            "vLLM runs 4 sequences at once; the deep lane may use 3 "
            "(ASSISTANT_DEEP_MAX_IN_FLIGHT=3), so one is always free for chat",
        ),
        (
            _rt("vllm", 4, 4),
            4,
            False,
            "vLLM runs 4 sequences at once; the deep lane may use 4 "
            "(ASSISTANT_DEEP_MAX_IN_FLIGHT=4), so a chat turn can wait behind deep requests at "
            "the engine (vLLM does not preempt at max_num_seqs); "
            "set ASSISTANT_DEEP_MAX_IN_FLIGHT=3 to keep one for chat",
        ),
        (
            _rt("llamacpp", 2, None, slots=3, app_slots=3),
            None,
            True,
            "llama.cpp runs 3 sequences at once (as it reports); the deep lane may use 2 "
            "(the default), so one is always free for chat",
        ),
        (
            _rt("openai", 2, None),
            None,
            None,
            "the engine does not say how many sequences it runs at once; the deep lane may use 2 "
            "(the default; set ASSISTANT_DEEP_MAX_IN_FLIGHT to the engine's sequences minus one)",
        ),
    ],
)
def test_the_doctor_says_the_sequences_and_the_cap(rt, seen, ok, detail):
    check = sequences_check(rt, seen)
    assert (check.name, check.ok, check.detail) == ("deep lane", ok, detail)
