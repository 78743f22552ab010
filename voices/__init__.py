"""The voice registry, shipped inside the package as `assistant.voices` (see pyproject.toml)."""
