"""Errors raised by the policy core for bad configuration or bad input."""


class ConfigError(ValueError):
    """A configuration value or an input is invalid; the message says which and why."""


def require(condition: bool, message: str) -> None:
    """Raise :class:`ConfigError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(message)
