"""The training-loop API: read a plan, draw (x, y) batches (``get_batch``) or walk every window once
per epoch across ranks (``Loader``). Depends on formats and token sources, never on a command module."""

from .batch import Plan, get_batch, read_plan
from .loader import CACHED_EPOCHS, LABELS, ORDER_STREAM, SHORT, Exposure, Loader, StepOutOfRange, label_counts, replan_for_epoch

__all__ = ["CACHED_EPOCHS", "LABELS", "ORDER_STREAM", "SHORT", "Exposure", "Loader", "Plan", "StepOutOfRange",
           "get_batch", "label_counts", "read_plan", "replan_for_epoch"]
