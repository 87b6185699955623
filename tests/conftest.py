"""Suite-wide settings, applied before any test module imports gRPC."""

from __future__ import annotations

import os

# gRPC's fork handlers can deadlock a fork() made while its threads are busy; the tests fork helpers
# (servers, CLI subprocesses) from a process that also holds gRPC clients.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
