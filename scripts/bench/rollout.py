#!/usr/bin/env python3
"""A rollout you can watch: two polling Tritons, one bucket, steady load, two publishes.

    .venv/bin/python scripts/bench/rollout.py --quick     # CI: short load, prints the figures (JSON)
    .venv/bin/python scripts/bench/rollout.py             # longer; writes its section of BENCHMARKS.md

moto's S3 server runs on loopback; two embedded tritonservers read s3://127.0.0.1:PORT/bucket/models in
poll mode (--repository-poll-secs=1). One client thread per server sends requests to the ensemble
without pause for the whole run. Then `publish` uploads version 2 of the model step (adds 2 instead of 1)
and, later, a change to the ensemble (the step twice). Counted: failed requests (goal 0), and for each
publish the time from its end until both servers answer with the new result.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # support/: the small repositories the tests publish too

import numpy as np  # noqa: E402
from support.publish_helpers import ENSEMBLE_TWO_STEPS, write_repository  # noqa: E402

from repo_builder.repository.publish import PublishOptions, publish_repository  # noqa: E402
from repo_builder.store.urls import parse_store_url  # noqa: E402
from repo_builder.triton.client import connect, infer_model  # noqa: E402
from repo_builder.triton.server import start_server  # noqa: E402

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
X = np.arange(4, dtype=np.float32).reshape(1, 4)


@dataclass
class Load:
    """Requests sent to one server without pause; what each one answered (added amount) or its error."""

    url: str
    answers: list[tuple[float, float | None]] = field(default_factory=list)  # (time, X+k -> k, None = failed)
    errors: list[str] = field(default_factory=list)

    def run(self, client: Any, stop: threading.Event) -> None:
        while not stop.is_set():
            now = time.monotonic()
            try:
                y = infer_model(client, "pipeline", {"X": X}, timeout=10)["Y"]
                self.answers.append((now, float(y[0, 0] - X[0, 0])))
            except Exception as exc:  # every failure counts, whatever its type
                self.answers.append((now, None))
                self.errors.append(str(exc).splitlines()[0][:200])
                time.sleep(0.05)

    def first_answer(self, amount: float, after: float) -> float | None:
        """When this server first answered with ``amount`` (after ``after``) and kept doing so."""
        for t, k in self.answers:
            if t >= after and k == amount:
                return t
        return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def s3_server() -> Any:
    import logging

    from moto.server import ThreadedMotoServer  # heavy, test extra only

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)  # the servers inherit them: Triton reads AWS_* from its environment
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _wait_for(loads: list[Load], amount: float, since: float, timeout: float) -> float | None:
    """Seconds from ``since`` until every server answered ``amount``; None after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        times = [load.first_answer(amount, since) for load in loads]
        if all(t is not None for t in times):
            return max(times) - since  # type: ignore[type-var]
        time.sleep(0.1)
    return None


def _publish(repo: Path, url: str, endpoint: str) -> float:
    start = time.monotonic()
    publish_repository(repo, parse_store_url(url, endpoint), PublishOptions(), log=lambda _: None)
    return time.monotonic() - start


def run(quick: bool) -> dict[str, Any]:
    settle = 3.0 if quick else 10.0  # steady load before and after each change
    switch_timeout = 30.0 if quick else 60.0
    with s3_server() as endpoint, tempfile.TemporaryDirectory(prefix="rollout-") as tmp:
        import boto3  # heavy, remote extra only

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="fleet")
        url = "s3://fleet/models"
        repo = write_repository(Path(tmp) / "repo")
        _publish(repo, url, endpoint)
        triton_url = parse_store_url(url, endpoint).triton_url()
        with contextlib.ExitStack() as stack:
            servers = [stack.enter_context(start_server(triton_url, mode="poll", poll_seconds=1, startup_timeout=120))
                       for _ in range(2)]
            loads = [Load(s.grpc_url) for s in servers]
            stop = threading.Event()
            # Clients are made here, one by one: importing tritonclient.grpc from two threads at once races.
            clients = [connect(load.url) for load in loads]
            threads = [threading.Thread(target=load.run, args=(client, stop), daemon=True)
                       for load, client in zip(loads, clients, strict=True)]
            for t in threads:
                t.start()
            try:
                if _wait_for(loads, 1.0, time.monotonic() - 1, switch_timeout) is None:
                    errors = sorted({e for load in loads for e in load.errors})[:3]
                    logs = ", ".join(str(s.log_path) for s in servers)
                    raise SystemExit(f"the servers never answered the first version ({errors}); see {logs}")
                time.sleep(settle)
                write_repository(repo, amount=2, version=2)  # the model step's version 2
                step_publish = _publish(repo, url, endpoint)
                step_switch = _wait_for(loads, 2.0, time.monotonic(), switch_timeout)
                time.sleep(settle)
                (repo / "pipeline" / "config.pbtxt").write_text(ENSEMBLE_TWO_STEPS)  # adds 2, twice
                ensemble_publish = _publish(repo, url, endpoint)
                ensemble_switch = _wait_for(loads, 4.0, time.monotonic(), switch_timeout)
                time.sleep(settle)
            finally:
                stop.set()
                for t in threads:
                    t.join(timeout=15)
    requests = sum(len(load.answers) for load in loads)
    failed = sum(1 for load in loads for _, k in load.answers if k is None)
    return {
        "mode": "quick" if quick else "full",
        "requests": requests,
        "failed_requests": failed,
        "errors": sorted({e for load in loads for e in load.errors})[:5],
        "model_step": {"publish_seconds": round(step_publish, 2),
                       "switch_seconds": None if step_switch is None else round(step_switch, 2)},
        "ensemble": {"publish_seconds": round(ensemble_publish, 2),
                     "switch_seconds": None if ensemble_switch is None else round(ensemble_switch, 2)},
    }


def _markdown(result: dict[str, Any]) -> str:
    return "\n".join([
        "## Rollout to polling Tritons (issue 14)",
        "",
        "`scripts/bench/rollout.py`: two embedded tritonservers (2.51, CPU) poll the same bucket on moto's S3",
        "server every second; one client per server sends requests to the ensemble without pause while",
        "`publish` uploads the model step's version 2, then a changed ensemble. Switch time: from the end",
        "of the publish until both servers answer with the new result.",
        "",
        "| change | publish (s) | switch, both servers (s) |",
        "| --- | --- | --- |",
        f"| model step version 2 | {result['model_step']['publish_seconds']} | {result['model_step']['switch_seconds']} |",
        f"| ensemble config | {result['ensemble']['publish_seconds']} | {result['ensemble']['switch_seconds']} |",
        "",
        f"Requests: {result['requests']}, failed: **{result['failed_requests']}**.",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run for CI; no BENCHMARKS.md section")
    args = parser.parse_args()
    result = run(args.quick)
    print(json.dumps(result, indent=2))
    if not args.quick:
        from _report import write_section  # beside this script

        write_section("rollout", _markdown(result))
    ok = result["failed_requests"] == 0 and None not in (result["model_step"]["switch_seconds"], result["ensemble"]["switch_seconds"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
