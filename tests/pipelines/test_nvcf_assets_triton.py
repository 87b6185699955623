"""--nvcf-assets on the real embedded Triton, started with --http-header-forward-pattern NVCF-.*, requests
carrying the headers NVCF sends: assets answer exactly as the same bytes sent as IMAGE, and every hostile
header value or id is one error response naming its rule, after which the server still answers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.nvcf_helpers import (
    IMAGES,
    MAX_ASSET_BYTES,
    MAX_ASSETS,
    answer,
    bytes_input,
    nvcf_headers,
    refusal,
)

pytestmark = [pytest.mark.triton, pytest.mark.slow]

class Served:
    def __init__(self, server: Any, root: Path, images: dict[str, bytes]) -> None:
        import tritonclient.http as httpclient

        self.server, self.root, self.images = server, root, images
        # network_timeout: a FIFO opened for reading would block the step, and this test with it.
        self.client = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}", network_timeout=60.0)
        self.folder = root / "request-1"

    def assert_still_serving(self) -> None:
        labels, _ = answer(self.client, [bytes_input("IMAGE", [self.images["a-320x240.jpg"]])])
        assert labels.shape == (1, 5)


@pytest.fixture(scope="module")
def served(asset_repository: Any) -> Iterator[Served]:
    from repo_builder.nvcf import FORWARD_PATTERN
    from repo_builder.triton import start_server

    built = asset_repository
    with start_server(built.repo, mode="explicit", http_header_forward_pattern=FORWARD_PATTERN) as server:
        server.load("resnet50")
        yield Served(server, built.root, built.images)


def test_assets_answer_exactly_as_image_bytes_when_sent_as_ids(served: Served) -> None:
    names = list(IMAGES)
    sent = answer(served.client, [bytes_input("IMAGE", [served.images[n] for n in names])])
    read = answer(served.client, [bytes_input("IMAGE_ASSET", [n.encode() for n in names])], nvcf_headers(served.folder, names))
    assert sent[0].tolist() == read[0].tolist()
    assert np.array_equal(sent[1], read[1])  # bit for bit, not approximately
    one = answer(served.client, [bytes_input("IMAGE_ASSET", [names[2].encode()])], nvcf_headers(served.folder, [names[2]]))
    assert np.array_equal(one[1][0], sent[1][2]) and one[0][0].tolist() == sent[0][2].tolist()


def test_assets_answer_when_headers_are_lower_case(served: Served) -> None:
    name = "b-240x320.png"
    headers = {k.lower(): v for k, v in nvcf_headers(served.folder, [name, "other"]).items()}
    labels, scores = answer(served.client, [bytes_input("IMAGE_ASSET", [name.encode()])], headers)
    expected = answer(served.client, [bytes_input("IMAGE", [served.images[name]])])
    assert labels.tolist() == expected[0].tolist() and np.array_equal(scores, expected[1])


def _refused_with(served: Served, rule: str, inputs: list[Any], headers: dict[str, str] | None) -> str:
    message = refusal(served.client, inputs, headers)
    assert rule in message, message
    served.assert_still_serving()
    return message


def _ids(*ids: str) -> list[Any]:
    return [bytes_input("IMAGE_ASSET", [i.encode() for i in ids])]


def test_assets_refused_when_folder_lies_outside_root(served: Served, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.jpg").write_bytes(served.images["a-320x240.jpg"])
    _refused_with(served, "asset-dir-outside-root", _ids("x.jpg"), nvcf_headers(outside, ["x.jpg"]))
    dotted = f"{served.root}/../{outside.name}"
    _refused_with(served, "asset-dir-outside-root", _ids("x.jpg"), nvcf_headers(dotted, ["x.jpg"]))
    _refused_with(served, "asset-dir-outside-root", _ids("x.jpg"), nvcf_headers("request-1", ["x.jpg"]))  # relative


@pytest.mark.parametrize("bad_id", ["..", "../request-1/a-320x240.jpg", "a/b", ".", "x" * 256, "a\\b"])
def test_assets_refused_when_id_is_not_a_plain_file_name(served: Served, bad_id: str) -> None:
    _refused_with(served, "asset-id-invalid", _ids(bad_id), nvcf_headers(served.folder, [bad_id]))


def test_assets_refused_when_id_is_not_listed_in_header(served: Served) -> None:
    message = _refused_with(served, "asset-id-not-listed", _ids("a-320x240.jpg", "c-500x375.jpg"),
                            nvcf_headers(served.folder, ["a-320x240.jpg"]))
    assert "c-500x375.jpg" in message


def test_assets_refused_when_link_leads_out_of_root(served: Served, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "s.jpg").write_bytes(served.images["a-320x240.jpg"])
    linked_folder = served.root / "linked-request"
    linked_folder.symlink_to(secret, target_is_directory=True)
    (served.folder / "s.jpg").symlink_to(secret / "s.jpg")
    try:
        _refused_with(served, "asset-link", _ids("s.jpg"), nvcf_headers(linked_folder, ["s.jpg"]))
        _refused_with(served, "asset-link", _ids("s.jpg"), nvcf_headers(served.folder, ["s.jpg"]))
    finally:
        linked_folder.unlink()
        (served.folder / "s.jpg").unlink()


def test_assets_refused_without_opening_when_asset_is_fifo_or_folder(served: Served) -> None:
    fifo = served.folder / "pipe.jpg"
    os.mkfifo(fifo)
    (served.folder / "sub.jpg").mkdir()
    try:
        # A FIFO opened for reading with no writer would block the step: the answer coming back at all
        # (within the client's timeout) shows it was not opened that way.
        message = _refused_with(served, "asset-not-regular-file", _ids("pipe.jpg"), nvcf_headers(served.folder, ["pipe.jpg"]))
        assert "a FIFO" in message
        message = _refused_with(served, "asset-not-regular-file", _ids("sub.jpg"), nvcf_headers(served.folder, ["sub.jpg"]))
        assert "a folder" in message
    finally:
        fifo.unlink()
        (served.folder / "sub.jpg").rmdir()


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root")
def test_assets_refused_when_asset_is_device(served: Served) -> None:
    device = served.folder / "null.jpg"
    os.mknod(device, 0o600 | 0o020000, os.makedev(1, 3))  # S_IFCHR: /dev/null's numbers
    try:
        message = _refused_with(served, "asset-not-regular-file", _ids("null.jpg"), nvcf_headers(served.folder, ["null.jpg"]))
        assert "character device" in message
    finally:
        device.unlink()


def test_assets_refused_when_request_names_too_many(served: Served) -> None:
    ids = [list(IMAGES)[i % len(IMAGES)] for i in range(MAX_ASSETS + 1)]
    message = _refused_with(served, "asset-too-many", _ids(*ids), nvcf_headers(served.folder, list(IMAGES)))
    assert f"at most {MAX_ASSETS}" in message


def test_assets_refused_when_asset_is_too_large(served: Served) -> None:
    big = served.folder / "big.jpg"
    big.write_bytes(os.urandom(MAX_ASSET_BYTES + 1))
    try:
        _refused_with(served, "asset-too-large", _ids("big.jpg"), nvcf_headers(served.folder, ["big.jpg"]))
    finally:
        big.unlink()


def test_assets_counted_in_the_memory_budget_from_their_headers_before_they_are_read(served: Served) -> None:
    """Four asset files of 80 KB, each a PNG declaring 9000 x 9000 (under the pixel limit): the estimate from their
    headers, before any is read whole or decoded, puts the request over the step's budget (2048 MiB by default)."""
    import time

    from support.step_repository import zeros_png

    names = [f"wide-{i}.png" for i in range(MAX_ASSETS)]
    for name in names:
        (served.folder / name).write_bytes(zeros_png(9000, 9000))
    assert (served.folder / names[0]).stat().st_size < MAX_ASSET_BYTES
    try:
        start = time.perf_counter()
        message = _refused_with(served, "over its memory budget of 2048 MiB per instance", _ids(*names),
                                nvcf_headers(served.folder, names))
        assert time.perf_counter() - start < 10.0  # the refusal and the good request after it: nothing decoded
        assert "IMAGE: this request may take up to" in message and "--step-memory-mib" in message, message
        labels, _ = answer(served.client, _ids(names[0]), nvcf_headers(served.folder, names[:1]))  # one fits: answered
        assert labels.shape == (1, 5)
    finally:
        for name in names:
            (served.folder / name).unlink()


def test_assets_refused_when_request_carries_both_inputs(served: Served) -> None:
    name = "a-320x240.jpg"
    inputs = [bytes_input("IMAGE", [served.images[name]]), *_ids(name)]
    _refused_with(served, "asset-input-both", inputs, nvcf_headers(served.folder, [name]))


def test_assets_refused_when_ids_come_without_headers(served: Served) -> None:
    message = _refused_with(served, "asset-headers-missing", _ids("a-320x240.jpg"), None)
    assert "--http-header-forward-pattern" in message
    one = {"NVCF-ASSET-DIR": str(served.folder)}
    assert "NVCF-FUNCTION-ASSET-IDS" in _refused_with(served, "asset-headers-missing", _ids("a-320x240.jpg"), one)


def test_request_refused_by_triton_when_it_carries_neither_input(served: Served) -> None:
    """With max_batch_size > 0 Triton itself refuses a request without inputs before any step runs."""
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        f"http://127.0.0.1:{served.server.http_port}/v2/models/resnet50/infer",
        data=json.dumps({"inputs": []}).encode(),
        headers={"Content-Type": "application/json", **nvcf_headers(served.folder, ["a-320x240.jpg"])},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=60)
    assert "request has 0 inputs" in caught.value.read().decode()
    served.assert_still_serving()


def test_assets_refused_when_named_asset_is_missing_or_folder_absent(served: Served) -> None:
    _refused_with(served, "asset-not-found", _ids("nope.jpg"), nvcf_headers(served.folder, ["nope.jpg"]))
    _refused_with(served, "asset-dir-missing", _ids("a-320x240.jpg"), nvcf_headers(served.root / "gone", ["a-320x240.jpg"]))


def test_asset_refusal_fails_only_its_own_request_when_batched(served: Served) -> None:
    """Concurrent good (IMAGE and IMAGE_ASSET) and bad requests: the dynamic batcher may hand them to one execute()."""
    from concurrent.futures import ThreadPoolExecutor

    name = "a-320x240.jpg"
    expected = answer(served.client, [bytes_input("IMAGE", [served.images[name]])])

    def client() -> Any:  # tritonclient's HTTP client is not thread-safe: one per request
        import tritonclient.http as httpclient

        return httpclient.InferenceServerClient(f"127.0.0.1:{served.server.http_port}", network_timeout=60.0)

    def good(as_asset: bool) -> Any:
        if as_asset:
            return answer(client(), _ids(name), nvcf_headers(served.folder, [name]))
        return answer(client(), [bytes_input("IMAGE", [served.images[name]])])

    def bad() -> str:
        return refusal(client(), _ids(".."), nvcf_headers(served.folder, [".."]))

    with ThreadPoolExecutor(8) as pool:
        goods = [pool.submit(good, index % 2 == 0) for index in range(6)]  # IMAGE and IMAGE_ASSET mixed
        bads = [pool.submit(bad) for _ in range(6)]
        for future in goods:
            assert np.array_equal(future.result()[1], expected[1])
        for future in bads:
            assert "asset-id-invalid" in future.result()
