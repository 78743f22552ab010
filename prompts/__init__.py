"""The prompt files, shipped inside the package as `assistant.prompts` (see pyproject.toml)."""
