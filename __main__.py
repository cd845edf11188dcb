"""Pulumi program entry point: validated settings in, one DeepSeekService, its outputs exported."""

import pulumi

from deepseek_eks.components import DeepSeekService, SizingError
from deepseek_eks.components.service import PROGRAM_SERVICE_NAME, ServiceError, export_outputs
from deepseek_eks.settings import SettingsError
from deepseek_eks.settings.pulumi_source import load_settings

try:
    settings = load_settings()
    if settings.deploy_blockers:
        # The real engine runs this file (the offline render calls build() directly): stop before
        # the VPC and cluster are created for a Kubernetes API nothing could reach.
        raise pulumi.RunError("\n".join(["the cluster API would be unreachable:", *settings.deploy_blockers]))
    export_outputs(DeepSeekService(PROGRAM_SERVICE_NAME, {}, settings=settings))
except (SettingsError, SizingError, ServiceError) as error:
    raise pulumi.RunError(str(error)) from None  # RunError prints the message, no traceback
