"""``build --nvcf-assets``: a pipeline whose encoded-file input may also come from NVIDIA Cloud Functions assets.

A family whose input is one encoded file per row (the image families; any family whose preprocessing
template includes ``model/_nvcf_assets.py.j2``) opts in by adding ``nvcf_options.NVCF_OPTIONS`` to its options and
passing ``settings.nvcf`` to ``render_preprocess_step(asset_parameters=...)`` and ``asset_ensemble_inputs``.
The ensemble then takes ``IMAGE`` or ``IMAGE_ASSET`` (ids of files NVCF copied for the request), both
optional; the preprocessing step reads the files under the limits recorded in its config's parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from repo_builder.errors import UserError
from repo_builder.nvcf import (
    DEFAULT_MAX_ASSET_BYTES,
    DEFAULT_MAX_ASSETS,
    DEFAULT_ROOT,
    FORWARD_PATTERN,
    NvcfAssets,
    asset_input_name,
)
from repo_builder.render import context as ctx

ASSET_PARAMETERS_COMMENT = (
    "NVCF assets (build --nvcf-assets): the input the asset ids arrive in, the only folder assets are read\n"
    "# under (NVCF-ASSET-DIR must lie inside it), and the limits per request; read by model.py at load."
)

_TUNING = {"asset_root": "--asset-root", "max_asset_bytes": "--max-asset-bytes", "max_assets": "--max-assets"}


def nvcf_settings(params: Mapping[str, Any], family: str, options: Sequence[Any]) -> NvcfAssets | None:
    """The family's NVCF options (by dest) -> settings, or None without ``--nvcf-assets``; checked here.
    ``options``: the family's own; a family that does not declare NVCF_OPTIONS cannot take assets."""
    if params.get("nvcf_assets") and not any(o.dest == "nvcf_assets" for o in options):
        raise UserError(f"--nvcf-assets: the {family} family takes no file input; only families whose input is an encoded file can")
    if not params.get("nvcf_assets"):
        given = [flag for dest, flag in _TUNING.items() if params.get(dest) is not None]
        if given:
            raise UserError(f"{', '.join(given)} only apply with --nvcf-assets; add it or drop them")
        return None
    root = params.get("asset_root")
    max_bytes, max_assets = params.get("max_asset_bytes"), params.get("max_assets")
    return NvcfAssets(
        root=str(root) if root is not None else DEFAULT_ROOT,
        max_asset_bytes=int(max_bytes) if max_bytes is not None else DEFAULT_MAX_ASSET_BYTES,
        max_assets=int(max_assets) if max_assets is not None else DEFAULT_MAX_ASSETS,
    )


def optional_tensor(name: str) -> dict[str, Any]:
    """One encoded item per row (TYPE_STRING [1]) that a request may leave out."""
    return {**ctx.tensor_context(name, "object", [1]), "optional": True}


def gate_forward_pattern(params: Mapping[str, Any]) -> str | None:
    """The header pattern the build's validate gate states: a --nvcf-assets step reads NVCF's headers, which
    only a server run with ``--http-header-forward-pattern 'NVCF-.*'`` hands it (without it RB rule nvcf warns)."""
    return FORWARD_PATTERN if params.get("nvcf_assets") else None


def nvcf_step_inputs(pipeline_input: str) -> list[dict[str, Any]]:
    """The first step's (and the ensemble's) inputs: the bytes or the asset ids, each optional."""
    return [optional_tensor(pipeline_input), optional_tensor(asset_input_name(pipeline_input))]


def asset_parameters(nvcf: NvcfAssets | None, pipeline_input: str) -> dict[str, str] | None:
    return nvcf.parameters(pipeline_input) if nvcf is not None else None
