"""Read settings from the Pulumi runtime: the same path for ``pulumi up``, tests and the render."""

from __future__ import annotations

import pulumi
from pulumi.runtime import config as runtime_config

from .model import PROJECT, SECRET_KEYS, Settings
from .validate import parse_settings


def raw_config() -> tuple[dict[str, object], set[str]]:
    """Every config value the engine gave this program, and which keys are secret.

    Structured values (``pulumi config set --path``) arrive as one key holding JSON, e.g.
    ``deepseek-eks:model`` = ``{"variant": ...}``; ``parse_settings`` reads both forms."""
    values: dict[str, object] = dict(runtime_config.get_config_env())
    values.update(runtime_config.CONFIG.get())
    secret = set(runtime_config.get_config_secret_keys_env())
    secret |= {k for k in values if runtime_config.is_config_secret(k)}
    return values, secret


def load_settings() -> Settings:
    """Validated settings of the current stack; secrets stay Pulumi secret Outputs. Warnings
    (valid settings with no effect, world-open CIDRs) go to the engine's log."""
    values, secret_keys = raw_config()
    config = pulumi.Config(PROJECT)
    secrets = {key: config.get_secret(key) for key in SECRET_KEYS if f"{PROJECT}:{key}" in values}
    settings = parse_settings(values, secret_keys, stack=pulumi.get_stack(), secrets=secrets)
    for warning in settings.warnings:
        pulumi.log.warn(warning)
    return settings
