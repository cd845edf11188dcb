"""Pulumi program entry point: validated settings in, every resource of the stack out."""

import pulumi

from components import SizingError, build
from settings import SettingsError
from settings.pulumi_source import load_settings

try:
    build(load_settings())
except (SettingsError, SizingError) as error:
    raise pulumi.RunError(str(error)) from None  # RunError prints the message, no traceback
