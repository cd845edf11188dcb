"""The reusable ComponentResource package (one module per concern): ``DeepSeekService``, the one
top-level component, and ``build()``, the stack program made of one of them."""

from .build import BuildResult, SizingError, size
from .service import DeepSeekService, DeepSeekServiceArgs, build

__all__ = ["BuildResult", "DeepSeekService", "DeepSeekServiceArgs", "SizingError", "build", "size"]
