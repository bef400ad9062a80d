"""The fault test_ray's retry test injects, loaded into every Ray worker of its cluster as the
``worker_process_setup_hook`` (so production code carries no test hook).

``install`` wraps ``engine_ray.shard_task``: when the file named by ``$WINSAMPLE_RAY_FAULT``
holds a shard index, the worker running that shard deletes the file and dies (``os._exit``)
— once — so Ray must retry the task.
"""

import os
from pathlib import Path

FAULT_ENV = "WINSAMPLE_RAY_FAULT"


def install() -> None:
    from winsample.encode.executors import ray as engine_ray

    real = engine_ray.shard_task

    def shard_task(job, shard, *decisions):
        path = os.environ.get(FAULT_ENV)
        if path:
            # Workers run shards at once: the file may vanish between any two steps (another
            # worker's retry took it), which must never fail that worker's own shard.
            try:
                due = Path(path).read_text().strip() == str(shard["index"])
            except OSError:
                due = False
            if due:
                try:
                    Path(path).unlink()
                except FileNotFoundError:  # another attempt of this shard died first: run it
                    return real(job, shard, *decisions)
                os._exit(1)
        return real(job, shard, *decisions)

    engine_ray.shard_task = shard_task
