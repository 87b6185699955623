"""moto's standalone S3 server on loopback, shared by the publish tests, and a fresh bucket per test."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # publish_helpers
from publish_helpers import bucket, s3_client, s3_server

__all__ = ["bucket", "s3_client", "s3_server"]  # fixtures for this folder's tests
