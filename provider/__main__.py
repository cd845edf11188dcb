"""Component provider: serves DeepSeekService to every Pulumi language. Its schema is inferred
from the typed args and completed from the settings model (deepseek_eks/schema.py);
provider/schema.json is that schema, committed (tools/generate_schema.py)."""

import json
import sys
from importlib.metadata import version

from pulumi.provider import main
from pulumi.provider.experimental.component import ComponentProvider

from deepseek_eks import DeepSeekService
from deepseek_eks.schema import enrich
from deepseek_eks.settings import PROJECT


class DeepSeekProvider(ComponentProvider):
    """Pulumi's component provider (what ``component_provider_host`` runs), serving the completed
    schema; construct is the stock one."""

    def __init__(self) -> None:
        # The installed distribution's version, the one schema.json carries (deepseek_eks.__version__).
        super().__init__([DeepSeekService], PROJECT, None, version(PROJECT))
        self.schema = json.dumps(enrich(json.loads(self.schema or "{}")))


if __name__ == "__main__":
    # As component_provider_host does: the engine passes the plugin directory, then its address.
    main(DeepSeekProvider(), sys.argv[1:])
