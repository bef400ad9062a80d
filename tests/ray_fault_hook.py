"""The fault test_ray's retry test injects, loaded into every Ray worker of its cluster as the
``worker_process_setup_hook`` (so production code carries no test hook).

``install`` wraps ``engine_ray.shard_task`` and ``local.encode_part`` (a ``--merge`` run in
parts): when the file named by ``$WINSAMPLE_RAY_FAULT`` holds a shard's (a part's) index, the
worker running it deletes the file and dies (``os._exit``) — once — so Ray must retry the task.
``K+`` (parts): the worker encodes part K whole, records it done, and dies before answering.
"""

import os
from pathlib import Path

FAULT_ENV = "WINSAMPLE_RAY_FAULT"


def _dies_once(index: int, after: bool = False) -> bool:
    """Whether this worker is the one to die now for shard / part ``index`` (the file taken);
    ``after``: the fault that comes once the part is done (``K+``)."""
    path = os.environ.get(FAULT_ENV)
    if not path:
        return False
    # Workers run shards at once: the file may vanish between any two steps (another
    # worker's retry took it), which must never fail that worker's own shard.
    try:
        due = Path(path).read_text().strip() == f"{index}{'+' if after else ''}"
    except OSError:
        return False
    if not due:
        return False
    try:
        Path(path).unlink()
    except FileNotFoundError:  # another attempt of this shard died first: run it
        return False
    return True


def install() -> None:
    from winsample.encode.executors import local
    from winsample.encode.executors import ray as engine_ray

    real_shard, real_part = engine_ray.shard_task, local.encode_part

    def shard_task(job, shard, *decisions):
        if _dies_once(shard["index"]):
            os._exit(1)
        return real_shard(job, shard, *decisions)

    def encode_part(k, *args):
        if _dies_once(k):
            os._exit(1)
        part = real_part(k, *args)
        if _dies_once(k, after=True):
            os._exit(1)
        return part

    engine_ray.shard_task = shard_task
    local.encode_part = encode_part
