"""Gradio's per-session state, without a copy of every component's config made up front.

Gradio 6.31's `SessionState`, made for each new session (a page, or an API client's session
hash), builds at once the config of every block of the app (about 80 here, each a `get_config`
that reads the component's signature): about 12 ms of CPU per session, a third of a typed
turn's when a client starts a session per conversation, and much of what a session keeps in
memory. Gradio reads those configs only to save a deep link and to note a value that changed;
here each is made when one of those first asks for it, from the same block, so what they read
is what Gradio's own copy would hold.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)


class LazyConfigs(dict):
    """`SessionState.config_values`: a block's config, made on first read. `config`: the
    session's `BlocksConfig`; `own`: the app's blocks by id (Gradio keeps only those)."""

    def __init__(self, config: Any, own: dict[int, Any]) -> None:
        super().__init__()
        self._config = config
        self._own = own

    def _owed(self, key: Any) -> bool:
        return key in self._own and key in self._config.blocks and not dict.__contains__(self, key)

    def __missing__(self, key: Any) -> dict:
        if not self._owed(key):
            raise KeyError(key)
        made = self._config.config_for_block(key, [], self._config.blocks[key])
        dict.__setitem__(self, key, made)
        return made

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or self._owed(key)

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def _fill(self) -> None:
        for key in list(self._config.blocks):
            if self._owed(key):
                self.__missing__(key)

    def __iter__(self) -> Iterator[Any]:
        self._fill()
        return super().__iter__()

    def __len__(self) -> int:
        self._fill()
        return super().__len__()

    def keys(self) -> Any:
        self._fill()
        return super().keys()

    def values(self) -> Any:
        self._fill()
        return super().values()

    def items(self) -> Any:
        self._fill()
        return super().items()


class _WithoutBlocks:
    """The app's `Blocks` as Gradio's own `SessionState.__init__` sees it here: no blocks of
    its own, so it builds no configs; everything else is the app's."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self.blocks: dict[int, Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app, name)


def lazy_session_configs() -> bool:
    """Make new Gradio sessions build their block configs on demand (once per process; True
    when installed). Gradio's own `__init__` still runs, so whatever else it sets is kept."""
    from gradio import state_holder

    cls = state_holder.SessionState
    if getattr(cls, "_lazy_configs", False):
        return True
    original = cls.__init__

    def __init__(self: Any, blocks: Any) -> None:
        original(self, _WithoutBlocks(blocks))
        self.config_values = LazyConfigs(self.blocks_config, blocks.blocks)

    cls.__init__ = __init__  # type: ignore[method-assign]
    cls._lazy_configs = True  # type: ignore[attr-defined]
    return True
