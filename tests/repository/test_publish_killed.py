"""A publish killed with SIGKILL at random points: the bucket validates as the old or the new repository,
or is reported as an interrupted publish; never silently half-new.

Each upload is slowed with REPO_BUILDER_PUBLISH_PAUSE, and each kill is timed from the moment the publish
prints its plan (its uploads start right after), so the kills spread over the uploads and past the end.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.publish_helpers import ENSEMBLE_TWO_STEPS, tree_digest, write_repository

from repo_builder.cli.main import main
from repo_builder.store.publish_record import PUBLISH_STATE_FILE
from repo_builder.validate.remote import check_remote

pytestmark = pytest.mark.slow
PAUSE = 0.3


def _remote_digest(client: Any, bucket: str, prefix: str) -> dict[str, str]:
    import hashlib

    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for item in page.get("Contents", []):
            relative = item["Key"][len(prefix) + 1 :]
            if relative != PUBLISH_STATE_FILE:
                body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                out[relative] = hashlib.sha256(body).hexdigest()
    return out


def test_publish_killed_at_random_points_leaves_old_new_or_reported_repository(
    s3_server: str, s3_client: Any, bucket: str, tmp_path: Path
) -> None:
    old = write_repository(tmp_path / "old")
    new = write_repository(tmp_path / "new", amount=2, version=2)
    write_repository(new, amount=1, version=1)
    (new / "pipeline" / "config.pbtxt").write_text(ENSEMBLE_TWO_STEPS)
    (new / "add" / "labels.txt").write_text("w\nx\ny\nz\n")
    rng = random.Random(14)
    outcomes = []
    for round_ in range(4):
        url = f"s3://{bucket}/r{round_}"
        assert main(["publish", str(old), url, "--endpoint-url", s3_server, "--no-gpu", "-q"]) == 0
        # SIGKILL leaves the child's temporary S3 mirror behind: it goes to tmp_path, not the session's TMPDIR.
        (tmp_path / "tmp").mkdir(exist_ok=True)
        env = {**os.environ, "REPO_BUILDER_PUBLISH_PAUSE": str(PAUSE), "TMPDIR": str(tmp_path / "tmp")}
        cmd = [sys.executable, "-m", "repo_builder", "publish", str(new), url, "--endpoint-url", s3_server, "--no-gpu"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("plan:"):
                break
        time.sleep(round_ * PAUSE + rng.uniform(0, PAUSE * 0.8))  # the 4th lands after the 3 uploads
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        verdict = check_remote(url, s3_server)
        remote = _remote_digest(s3_client, bucket, f"r{round_}")
        if verdict.ok:
            assert remote in (tree_digest(old), tree_digest(new)), "a half-new repository passed for a whole one"
            outcomes.append("old" if remote == tree_digest(old) else "new")
        else:
            assert verdict.interrupted is not None or verdict.mismatches or not verdict.report.ok
            outcomes.append("reported")
    assert "reported" in outcomes, outcomes  # at least one kill landed inside the uploads
