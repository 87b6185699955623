"""The store tests run against moto's S3 server on loopback and use the publish tests' small repositories."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "publish"))  # publish_helpers
from publish_helpers import bucket, s3_client, s3_server

__all__ = ["bucket", "s3_client", "s3_server"]  # fixtures for this folder's tests
