"""Component provider: serves DeepSeekService to every Pulumi language. Its schema is inferred
from the typed args (provider/schema.json is that schema, committed; tools/generate_schema.py)."""

from importlib.metadata import version

from pulumi.provider.experimental import component_provider_host

from deepseek_eks import DeepSeekService
from deepseek_eks.settings import PROJECT

if __name__ == "__main__":
    # The installed distribution's version, the one schema.json carries (pyproject.toml).
    component_provider_host(components=[DeepSeekService], name=PROJECT, version=version(PROJECT))
