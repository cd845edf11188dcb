"""The deepseek-eks policy pack: rules in :mod:`policy.rules`, the pack in ``policy/__main__.py``."""
