"""Files on disk, whatever they hold: atomic writes, staged sets, the writer's lock, names read
from untrusted metadata, special files and sizes, errno texts, and checksums.

Nothing here knows winsample's formats; ``formats`` and everything above build on it.
The read size of every streamed pass is ``disk.checksums.CHUNK_BYTES``, read at call time
from that one module (tests patch it there).
"""

from .atomic import (
    TMP_SUFFIX,
    atomic_open,
    atomic_path,
    check_replaceable,
    fsync_dir,
    remove_stale_tmp,
    tmp_path,
    write_json_atomic,
)
from .checksums import (
    CHECKSUM_ALGO,
    SHARD_CHECKSUM,
    checksum_file,
    combine_checksums,
    format_checksum,
    new_hasher,
    sample_checksum,
)
from .lock import LOCK_NAME, LOCK_TRIES, locked, locked_folder
from .names import (
    MAX_METADATA_BYTES,
    first_inside,
    glob_escape,
    inside_name,
    is_glob,
    is_plain_name,
    open_own,
    open_regular,
    plain_name,
    read_small_text,
    refuse_overwrite,
    require_regular,
)
from .oserror import NO_ROOM, naming, os_error_text, write_error
from .staging import COMMIT_MARK, STAGING_DIR, commit_staged, read_commit_mark, roll_forward, was_committed
