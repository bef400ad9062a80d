"""Files on disk, whatever they hold: atomic writes, staged sets, the writer's lock, names read
from untrusted metadata, special files and sizes, errno texts, and checksums.

Nothing here knows winsample's formats; ``formats`` and everything above build on it.
"""

from .atomic import TMP_SUFFIX, tmp_path, remove_stale_tmp, fsync_dir, check_replaceable, atomic_path, atomic_open, write_json_atomic
from .checksums import CHECKSUM_ALGO, CHUNK_BYTES, SHARD_CHECKSUM, combine_checksums, new_hasher, format_checksum, checksum_file
from .lock import LOCK_NAME, locked_folder
from .names import glob_escape, inside_name, MAX_METADATA_BYTES, plain_name, require_regular, open_regular, read_small_text, refuse_overwrite, is_plain_name
from .oserror import os_error_text, naming
from .staging import STAGING_DIR, COMMIT_MARK, commit_staged, read_commit_mark, roll_forward
