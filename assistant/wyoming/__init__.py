"""Home Assistant's voice protocol, Wyoming (issue 54): the app's speech and its two lanes as a
Wyoming server, one more way in.

`assistant serve --wyoming [HOST:]PORT` answers `describe` with three programs, `asr` (the
app's Whisper), `tts` (its Piper voices) and `handle` (the assistant), and translates
Wyoming's events to the session layer's requests and back, as every other transport does:
`server` (the listener, who may connect, the bounds), `wire` (events read within their
bounds), `info`, `hearing` (speech to text), `speaking` (text to speech) and `handling` (a
transcript as a turn of a conversation).
"""
