"""Test helpers for FlexMatch (stdlib only, safe to import anywhere)."""

from flexmatch.testing.fake_llm import FakeLLMServer, RecordedRequest

__all__ = ["FakeLLMServer", "RecordedRequest"]
