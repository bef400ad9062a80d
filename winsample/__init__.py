"""winsample: text → token files → training-window plans → proof that both are sound."""

__version__ = "0.1.0"
