"""The scripted chat-completions server for tests: it lives in dashcam.agent.replay (``dashcam eval --replay``
uses it at run time); see that module's docstring."""
from dashcam.agent.replay import FakeOpenAI, RecordingProxy, call, calls, cut, delayed, error, raw, say, script_reply

__all__ = ["FakeOpenAI", "RecordingProxy", "call", "calls", "cut", "delayed", "error", "raw", "say", "script_reply"]
