#!/usr/bin/env python3
"""Send one image to a served image-classification ensemble through tritonclient.grpc; print the top-k.

    python scripts/demo_client.py --url 127.0.0.1:8001 --model resnet50 [--image photo.jpg]

Without --image, a small JPEG is drawn on the spot, so the demo needs no file and no network.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException


def wait_ready(client: grpcclient.InferenceServerClient, model: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        try:
            if client.is_server_live() and client.is_model_ready(model):
                return
            last = f"model '{model}' is not ready yet"
        except InferenceServerException as exc:
            last = exc.message() or str(exc)
        time.sleep(0.5)
    sys.exit(f"error: {model} was not ready within {timeout:.0f}s ({last})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="gRPC address of the server, host:port")
    parser.add_argument("--model", default="resnet50", help="ensemble to call")
    parser.add_argument("--image", type=Path, default=None, help="an image file (JPEG/PNG/WebP); default: a drawn one")
    parser.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the model to be ready")
    args = parser.parse_args()

    if args.image is not None:
        try:
            data = args.image.read_bytes()
        except OSError as exc:
            sys.exit(f"error: --image {args.image}: {exc.strerror}")
        source = str(args.image)
    else:
        from repo_builder.triton.synthesize import sample_image

        data, source = sample_image(), "a drawn 320x240 JPEG"
    client = grpcclient.InferenceServerClient(args.url)
    wait_ready(client, args.model, args.wait)
    # One request, one image: IMAGE is TYPE_STRING [1], so the batch is [1, 1] of encoded bytes.
    image = grpcclient.InferInput("IMAGE", [1, 1], "BYTES")
    image.set_data_from_numpy(np.array([[data]], dtype=np.object_))
    started = time.perf_counter()
    try:
        result = client.infer(args.model, [image], client_timeout=60)
    except InferenceServerException as exc:
        sys.exit(f"error: {args.model} refused the request: {exc.message()}")
    elapsed = (time.perf_counter() - started) * 1000
    labels = [x.decode() for x in result.as_numpy("LABELS")[0]]
    scores = result.as_numpy("SCORES")[0]
    ids = result.as_numpy("CLASS_IDS")[0]
    print(f"{args.model} on {source} ({len(data)} bytes, {elapsed:.0f} ms):")
    for rank, (label, score, class_id) in enumerate(zip(labels, scores, ids, strict=True), start=1):
        print(f"  {rank}. {score:7.4f}  {label} (class {class_id})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
