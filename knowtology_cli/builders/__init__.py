"""Tree building: prompts, token-aware batching, reply validation and the build runners."""
