"""Names and limits of Triton's repository layout, in one place (light: no imports).

Every module that reads or writes a repository takes these from here.
"""

from __future__ import annotations

CONFIG_FILE = "config.pbtxt"
# Folders Triton skips when listing versions (core model_repository_manager.cc).
SKIPPED_VERSION_FOLDERS = frozenset({"warmup", "initial_state", "configs"})
# Object stores drop empty folders: an ensemble's version folder keeps this placeholder.
PLACEHOLDER_FILE = "placeholder.txt"  # what build writes; any file keeps the folder
# Bounded reads of repository files (offline validate never reads more than this of one file).
MAX_PYTHON_BYTES = 16 << 20
