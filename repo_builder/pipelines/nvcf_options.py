"""The build options of ``--nvcf-assets`` (pipelines/nvcf_assets.py), as family options: a family whose
input is one encoded file per row adds ``NVCF_OPTIONS`` to its own options to offer them."""

from __future__ import annotations

from repo_builder.nvcf import DEFAULT_MAX_ASSET_BYTES, DEFAULT_MAX_ASSETS, DEFAULT_ROOT
from repo_builder.pipelines.family import FamilyOption

NVCF_OPTIONS = (
    FamilyOption(("--nvcf-assets",), "nvcf_assets", "Also take inputs as NVIDIA Cloud Functions assets: the ensemble gets an "
                 "optional IMAGE_ASSET input (asset ids) beside IMAGE; serve with --nvcf (docs/deploy.md).", kind="flag",
                 conflicts_with_export=False),
    FamilyOption(("--asset-root",), "asset_root", "--nvcf-assets: the folder every NVCF-ASSET-DIR must lie in "
                 f"[default: {DEFAULT_ROOT}, NVCF's].", metavar="DIR", conflicts_with_export=False),
    FamilyOption(("--max-asset-bytes",), "max_asset_bytes", f"--nvcf-assets: largest asset read [default: {DEFAULT_MAX_ASSET_BYTES}].",
                 kind="int", metavar="N", conflicts_with_export=False),
    FamilyOption(("--max-assets",), "max_assets", f"--nvcf-assets: most assets per request [default: {DEFAULT_MAX_ASSETS}].",
                 kind="int", metavar="N", conflicts_with_export=False),
)
