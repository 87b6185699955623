"""Work bounded per request and per instance, one error per bad request (issue 40, items 2 and 3).

The folder's shared repository of Python steps (support.step_repository, built once per session: image classifier
with random weights, the tiny detector, the tiny text and token classifiers, and a text classifier built with small
limits, --max-request-bytes and --step-memory-mib) is served from a linked copy whose configs are edited:
each preprocessing step's dynamic batcher is set to wait 1 s and form one batch (no preferred sizes), so requests
sent together are answered by one execution: the tests check that with the server's statistics, then assert that the
bad request gets its own error naming the item and the rule while every other request gets exactly the answer it gets
alone.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.step_repository import BUDGET_OPTIONS, linked_copy, replace_file
from support.triton_stats import served_counts

pytest.importorskip("ultralytics", reason="needs-ultralytics: the tiny detector is built with Ultralytics (detect extra)")
pytestmark = [pytest.mark.triton, pytest.mark.slow]
IMAGE_MODELS = ("cls", "det")
TEXT_MODELS = ("txt", "ner", "budget")
QUEUE_DELAY_US = 1_000_000  # long enough that requests sent together meet in one batch, on a loaded CI machine too
# The budget model (BUDGET_OPTIONS): 200,000 bytes per request, 12 MiB per execution; a text of WORDS_BYTES words may
# take 3 x 30,000 + 30,000 x 260 bytes = 7.5 MiB, so one such request fits and a second one waits its turn (busy).
assert BUDGET_OPTIONS == ["--max-request-bytes", "200000", "--step-memory-mib", "12"]
WORDS = "Ada Lovelace met George Washington in London . "
WORDS_TEXT = (WORDS * (30_000 // len(WORDS))).encode()


def patch_queue_delay(config: Path) -> None:
    """The step's dynamic batcher waits QUEUE_DELAY_US and batches up to max_batch_size, whatever is queued."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    parsed = text_format.Parse(config.read_text(), model_config_pb2.ModelConfig())
    parsed.dynamic_batching.max_queue_delay_microseconds = QUEUE_DELAY_US
    del parsed.dynamic_batching.preferred_batch_size[:]
    replace_file(config, text_format.MessageToString(parsed))  # a new file: the shared repository is not changed


@pytest.fixture(scope="module")
def repo(step_repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = linked_copy(step_repository, tmp_path_factory.mktemp("budget") / "repo")
    for name in IMAGE_MODELS + TEXT_MODELS:
        patch_queue_delay(out / f"{name}_preprocess" / "config.pbtxt")
    return out


@pytest.fixture(scope="module")
def server(repo: Path) -> Iterator[Any]:
    from repo_builder.triton import start_server

    with start_server(repo, mode="explicit") as running:
        for name in IMAGE_MODELS + TEXT_MODELS:
            running.load(name)
        yield running


def send(server: Any, name: str, items: list[bytes]) -> dict[str, np.ndarray]:
    from repo_builder.triton.client import connect, infer_model

    key = "TEXT" if name in TEXT_MODELS else "IMAGE"
    return infer_model(connect(server.grpc_url), name, {key: np.array([[item] for item in items], dtype=np.object_)})


def outcome(server: Any, name: str, items: list[bytes]) -> dict[str, np.ndarray] | Exception:
    from tritonclient.utils import InferenceServerException

    try:
        return send(server, name, items)
    except InferenceServerException as exc:
        return exc


def together(server: Any, name: str, requests: list[list[bytes]]) -> list[dict[str, np.ndarray] | Exception]:
    """Send every request at once; assert the step served them in fewer executions than requests (batched)."""
    before = served_counts(server.grpc_url, f"{name}_preprocess", settle=0.5)
    with ThreadPoolExecutor(len(requests)) as pool:
        results = list(pool.map(lambda items: outcome(server, name, items), requests))
    after = served_counts(server.grpc_url, f"{name}_preprocess", at_least=before[0] + len(requests))
    count, runs = after[0] - before[0], after[1] - before[1]
    assert count == len(requests) and runs < count, f"{name}: {count} requests in {runs} executions: not batched"
    return results


def assert_same(answer: dict[str, np.ndarray] | Exception, expected: dict[str, np.ndarray]) -> None:
    assert isinstance(answer, dict), answer
    assert answer.keys() == expected.keys()
    assert all(np.array_equal(answer[key], expected[key]) for key in expected)


def photo(height: int, width: int, seed: int) -> bytes:
    from PIL import Image

    rows, cols = np.mgrid[0:height, 0:width]
    array = np.stack([rows * 255 // height, cols * 255 // width, (rows * seed + cols) % 256], axis=-1).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "JPEG")
    return buffer.getvalue()


GOOD_TEXTS = [b"George Washington went to Washington", b"Ada Lovelace met Charles Babbage in London", b"a short one",
              b"The weather in Paris is fine", WORDS_TEXT[:150]]
# A bad request per model: (its items, what its error must say)
BAD = {
    "cls": ([photo(240, 320, 1), b"not an image at all"], "IMAGE: image 1 of this request: cannot decode image"),
    "det": ([photo(240, 320, 1), b"not an image at all"], "IMAGE: image 1 of this request: cannot decode image"),
    "txt": ([b"fine", b" " * 100_000 + b"hidden"], "TEXT: text 1 of this request: it is 100006 bytes"),
    "ner": ([b"fine", WORDS_TEXT], "text 1 of this request is longer than 128 tokens"),
}


def good_requests(name: str) -> list[list[bytes]]:
    if name in IMAGE_MODELS:
        return [[photo(200 + 20 * i, 300 - 10 * i, i + 2)] for i in range(5)]
    return [[text] for text in GOOD_TEXTS]


@pytest.mark.parametrize("name", ["cls", "det", "txt", "ner"])
def test_batch_answers_every_good_request_exactly_when_one_request_of_the_batch_is_bad(server: Any, name: str) -> None:
    goods = good_requests(name)
    expected = [send(server, name, items) for items in goods]  # each alone
    bad_items, rule = BAD[name]
    results = together(server, name, [*goods[:2], bad_items, *goods[2:]])
    bad = results.pop(2)
    assert isinstance(bad, Exception) and rule in str(bad), bad
    for answer, alone in zip(results, expected, strict=True):
        assert_same(answer, alone)


def test_step_answers_busy_when_concurrent_requests_would_pass_its_memory_budget(server: Any) -> None:
    alone = send(server, "budget", [WORDS_TEXT])
    results = together(server, "budget", [[WORDS_TEXT]] * 4)
    answered = [r for r in results if isinstance(r, dict)]
    busy = [r for r in results if isinstance(r, Exception)]
    # One execution: the first request fits the 12 MiB budget, the next three would pass it.
    assert len(answered) == 1 and len(busy) == 3, results
    assert_same(answered[0], alone)
    for error in busy:
        assert "busy: this step's instance is already working on" in str(error) and "send it again" in str(error), error
        assert "--step-memory-mib" in str(error)
        assert error.status() == "StatusCode.UNAVAILABLE", error.status()
    assert_same(send(server, "budget", [WORDS_TEXT]), alone)  # served again once the burst is over


def test_step_refuses_only_the_request_over_the_byte_cap_or_the_budget_when_batched_with_good_ones(server: Any) -> None:
    small = [[text] for text in GOOD_TEXTS[:3]]
    expected = [send(server, "budget", items) for items in small]
    over_bytes = [b"word " * 50_000]  # 250,000 bytes, over --max-request-bytes 200000
    over_budget = [WORDS_TEXT, WORDS_TEXT]  # 2 x 7.5 MiB: over 12 MiB on its own, never admitted
    results = together(server, "budget", [small[0], over_bytes, small[1], over_budget, small[2]])
    assert "TEXT: this request's inputs are 250000 bytes, over this step's limit of 200000 bytes" in str(results[1])
    assert "--max-request-bytes" in str(results[1])
    assert "over its memory budget of 12 MiB per instance" in str(results[3]) and "busy" not in str(results[3])
    for answer, alone in zip([results[0], results[2], results[4]], expected, strict=True):
        assert_same(answer, alone)
