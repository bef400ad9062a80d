"""winsample: text → token files → training-window plans → proof that both are sound."""

__version__ = "0.1.0"

from .train import Batch, Exposure, Loader, Plan, get_batch, read_plan  # noqa: E402  (the training-loop API)

__all__ = ["Batch", "Exposure", "Loader", "Plan", "get_batch", "read_plan", "__version__"]
