"""The turn-end model's verdicts on one utterance: asked at a pause, asked again after every
`recheck_ms` more of silence while it says the person goes on; one question at a time."""

from __future__ import annotations

from assistant.call.hearing import ListenConfig
from assistant.speech.stages import TurnEndModel


class Verdicts:
    def __init__(self, model: TurnEndModel | None, config: ListenConfig):
        self.model, self.config = model, config
        """`model` None: no model; a pause of `fallback_ms` ends the turn."""
        self.clear()

    def clear(self) -> None:
        """A new utterance, or speech went on: what was asked is forgotten."""
        self.verdict: float | None = None
        self.asked_at_ms: float | None = None
        """The silence when the model was last asked."""
        self.asking = False

    def due(self, silence_ms: float) -> bool:
        """Ask again: the last verdict was "not finished" and the silence grew since."""
        if self.model is None or self.asking or self.verdict is None:
            return False
        if self.verdict >= self.config.end_threshold:
            return False
        return silence_ms >= (self.asked_at_ms or 0.0) + self.config.recheck_ms

    def ask(self, silence_ms: float) -> TurnEndModel | None:
        """The model to ask now (None: there is none), marked as asked at `silence_ms`."""
        if self.model is not None:
            self.asking, self.asked_at_ms = True, silence_ms
        return self.model

    def answered(self, p: float) -> bool:
        """Its answer came: True if it says the turn is over."""
        self.asking, self.verdict = False, p
        return p >= self.config.end_threshold
