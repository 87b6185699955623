"""``validate --live`` on a repository built with ``--nvcf-assets``: prove the asset path with a real request.

The staged copy's asset steps get their root redirected to a folder of the stage (the built root, NVCF's
``/var/inf/inputAssets`` by default, is not ours to write); the server forwards ``NVCF-.*`` headers. For
each ensemble whose first step reads assets, one image is sent as ``IMAGE`` and then, written into the
stage's asset folder, as ``IMAGE_ASSET`` with the headers NVCF would send: the two answers must be equal,
output by output. Where no root could be redirected (an ``s3://`` repository, read by the server itself),
only the ``IMAGE`` request is sent and the progress line says the asset path was not proven.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.nvcf import ASSET_DIR_HEADER, ASSET_IDS_HEADER, ASSET_SUFFIX, FORWARD_PATTERN, PARAM_ROOT
from repo_builder.signals import signals_deferred
from repo_builder.triton.client import error_text
from repo_builder.triton.errors import ServerError
from repo_builder.triton.server import TritonServer
from repo_builder.triton.synthesize import sample_image
from repo_builder.triton_config import parse_config_text
from repo_builder.triton_layout import CONFIG_FILE
from repo_builder.validate.analysis.nvcf import asset_input
from repo_builder.validate.records import ModelEntry, Repository

__all__ = ["FORWARD_PATTERN", "AssetEnsemble", "asset_ensemble", "has_asset_steps", "prove_assets", "redirect_asset_roots"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class AssetEnsemble:
    image_input: str  # IMAGE
    asset_input: str  # IMAGE_ASSET


def has_asset_steps(repository: Repository) -> bool:
    return any(asset_input(m) is not None for m in repository.models)


def redirect_asset_roots(staged: Path, repository: Repository, root: Path) -> tuple[str, ...]:
    """Point every asset step of the staged copy at ``root``; returns the models changed. Each config is
    unlinked before it is written (the stage's files are links to the user's repository)."""
    from google.protobuf import text_format  # with tritonclient: the serve extra
    changed = []
    for model in repository.models:
        path = staged / model.name / CONFIG_FILE
        if asset_input(model) is None or model.config_text is None or not path.is_file():
            continue
        config = parse_config_text(model.config_text, str(path))  # the text the scan read through the guarded reader
        config.parameters[PARAM_ROOT].string_value = str(root)
        path.unlink()
        path.write_text(text_format.MessageToString(config), encoding="utf-8")
        changed.append(model.name)
    return tuple(changed)


def asset_ensemble(model: ModelEntry, repository: Repository) -> AssetEnsemble | None:
    """The inputs of an ensemble whose first step reads NVCF assets (None for any other model)."""
    config = model.config
    if config is None or not model.is_ensemble or not config.ensemble_scheduling.step:
        return None
    first = repository.model(config.ensemble_scheduling.step[0].model_name)
    name = asset_input(first) if first is not None else None
    if name is None or not name.endswith(ASSET_SUFFIX):
        return None
    names = {i.name for i in config.input}
    image = name[: -len(ASSET_SUFFIX)]
    return AssetEnsemble(image, name) if {image, name} <= names else None


def _client(server: TritonServer) -> Any:
    import tritonclient.http as httpclient  # the serve extra

    with signals_deferred():  # an interrupt inside the constructor would leave a half-built client (triton/client.py)
        return httpclient.InferenceServerClient(f"{server.options.host}:{server.http_port}", network_timeout=60.0)


def _bytes_input(name: str, value: bytes) -> Any:
    import numpy as np
    import tritonclient.http as httpclient

    tensor = httpclient.InferInput(name, [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([value], dtype=object).reshape(1, 1))
    return tensor


def _outputs(result: Any, config: Any) -> dict[str, Any]:
    return {o.name: result.as_numpy(o.name) for o in config.output}


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    import numpy as np

    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def prove_assets(
    server: TritonServer, model: ModelEntry, inputs: AssetEnsemble, root: Path | None, progress: Progress
) -> tuple[bool, str | None]:
    """One request with the image bytes, one through assets (when ``root`` is set); (answered, why not)."""
    data = sample_image()  # a 320x240 JPEG: the crop needs more than synthesize's tiny PNG to mean anything
    client = _client(server)
    try:
        sent = _outputs(client.infer(model.name, [_bytes_input(inputs.image_input, data)]), model.config)
        if root is None:
            progress(f"live: {model.name}: {inputs.asset_input} not proven (the asset root could not be redirected here); {inputs.image_input} answered")
            return True, None
        folder = root / f"live-{uuid.uuid4().hex[:12]}"
        folder.mkdir(parents=True)
        (folder / "sample.jpg").write_bytes(data)
        headers = {ASSET_DIR_HEADER: str(folder), ASSET_IDS_HEADER: "sample.jpg"}
        read = _outputs(client.infer(model.name, [_bytes_input(inputs.asset_input, b"sample.jpg")], headers=headers), model.config)
    except ServerError as exc:
        return False, f"tritonserver died while answering: {exc}"
    except Exception as exc:  # tritonclient's error for a refused request: its message is the answer
        if not server.is_alive():
            return False, f"tritonserver died while answering: {error_text(exc)}"
        return False, error_text(exc)
    finally:
        client.close()
    if not _same(sent, read):
        return False, f"the request through {inputs.asset_input} answered differently from the same image sent as {inputs.image_input}"
    progress(f"live: {model.name}: {inputs.asset_input} proven: an asset read through the NVCF headers answered exactly as {inputs.image_input}")
    return True, None
