"""Fakes shipped with the library for tests and benchmarks: a loopback OpenAI/Anthropic server."""
