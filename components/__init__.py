"""The reusable ComponentResource package (one module per concern) and the program's build()."""

from .build import BuildResult, SizingError, build, size

__all__ = ["BuildResult", "SizingError", "build", "size"]
