"""The training-loop API: read a plan, draw (x, y) batches (``get_batch``) or walk every window once
per epoch across ranks (``Loader``). Depends on formats and token sources, never on a command module."""

from .batch import Plan, get_batch, plan_eot, read_plan
from .loader import CACHED_EPOCHS, LABELS, ORDER_STREAM, SHORT, Exposure, Loader, StepOutOfRange, label_counts, replan_for_epoch
from .samples import CROSS_DOC, POSITIONS, Batch

__all__ = ["CACHED_EPOCHS", "CROSS_DOC", "LABELS", "ORDER_STREAM", "POSITIONS", "SHORT", "Batch", "Exposure", "Loader",
           "Plan", "StepOutOfRange", "get_batch", "label_counts", "plan_eot", "read_plan", "replan_for_epoch"]
