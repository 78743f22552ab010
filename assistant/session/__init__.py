"""One session per open conversation: the only owner of its turns (issue 34).

Every way in (the page typed and spoken, a call, `/v1`, the Gradio API, the command line) asks
the registry (`Sessions`) for the conversation's `Session` and runs its turns through
`Session.ask`; transports only translate their wire to a request and the session's events back.
"""

from assistant.session.session import Session
from assistant.session.sessions import Sessions
from assistant.turns.pipeline import TurnRequest as Ask

__all__ = ["Ask", "Session", "Sessions"]
