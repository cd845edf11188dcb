"""Pulumi program entry point: validated settings in, one DeepSeekService, its outputs exported."""

import pulumi

from deepseek_eks.components import DeepSeekService, SizingError
from deepseek_eks.components.service import PROGRAM_SERVICE_NAME, export_outputs
from deepseek_eks.settings import SettingsError
from deepseek_eks.settings.pulumi_source import load_settings

try:
    export_outputs(DeepSeekService(PROGRAM_SERVICE_NAME, {}, settings=load_settings()))
except (SettingsError, SizingError) as error:
    raise pulumi.RunError(str(error)) from None  # RunError prints the message, no traceback
