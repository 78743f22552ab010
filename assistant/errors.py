"""Errors a user can read: each carries a one-line message the CLI prints without a traceback."""


class AssistantError(Exception):
    """Base: a failure with a message meant for the user."""

    exit_code = 1


class ConfigError(AssistantError):
    """A setting is invalid."""


class EngineUnavailable(AssistantError):
    """The engine could not be reached or kept failing before the first token."""


class EngineError(AssistantError):
    """The engine answered with an error that retrying will not fix."""


class BudgetExhausted(AssistantError):
    """The engine spent its whole budget reasoning and gave no answer."""

    exit_code = 3


class BadInput(AssistantError):
    """Input the user gave (text, audio, file) cannot be used; the message says why."""

    exit_code = 2


class Busy(AssistantError):
    """A bounded queue or a per-user limit is full."""


class Conflict(AssistantError):
    """The request contradicts an earlier one: a job key already used for other text."""


class ModelMissing(AssistantError):
    """A named model is not on disk; the message says how to get it."""


def ended_early(engine: object) -> str:
    """Why a stream ended before its budget without a finish reason, true of the engine: only
    llama.cpp's server (one request at a time) stops an answer to serve another request; of
    another engine's, nothing more is known (issue 38)."""
    if getattr(engine, "kind", None) == "llamacpp":
        return "the engine stopped this answer early to serve another request"
    return "the engine ended this answer early without saying why"
