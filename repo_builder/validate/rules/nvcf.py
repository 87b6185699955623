"""Rules RB8xx: serving a repository through NVIDIA Cloud Functions (the target's server settings)."""

from __future__ import annotations

from collections.abc import Iterable

from repo_builder.validate.analysis.nvcf import FORWARD_PATTERN, asset_input, unforwarded_headers
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, rule


@rule("RB801", "nvcf-headers-forwarded", Severity.WARNING, field="parameters", sections=("parameters",))
def check_nvcf_headers_forwarded(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A step that reads NVCF assets runs on a server that forwards the NVCF headers to it.

    `repo-builder build --nvcf-assets` writes a preprocessing step that takes asset ids and reads the
    files from the folder named by the `NVCF-ASSET-DIR` header, checking each id against
    `NVCF-FUNCTION-ASSET-IDS`. tritonserver passes HTTP headers to a model only when it runs with
    `--http-header-forward-pattern` matching them (case-insensitive, partial match); without it every
    request through assets is refused. The target's pattern is stated with validate's
    `--http-header-forward-pattern` flag (none stated: the target forwards nothing). A warning, since
    the same repository still answers requests that send the bytes themselves.

    Fails: a step whose config has `parameters { key: "nvcf_asset_root" ... }`, validated without
    `--http-header-forward-pattern`, or with `--http-header-forward-pattern 'X-.*'`.
    Passes: the same with `--http-header-forward-pattern 'NVCF-.*'`, or any step without those parameters.
    """
    name = asset_input(model)
    if name is None:
        return
    pattern = ctx.options.http_header_forward_pattern
    missing = unforwarded_headers(pattern)
    if not missing:
        return
    target = f"forwards only headers matching '{pattern}'" if pattern else "forwards no HTTP headers"
    yield Finding(
        f"'{model.name}' reads NVCF assets ({name}) from the {', '.join(missing)} header(s), but the target server "
        f"{target}: every request through assets would be refused",
        hint=f"run the target's tritonserver with --http-header-forward-pattern '{FORWARD_PATTERN}' and state it here with "
        f"validate --http-header-forward-pattern '{FORWARD_PATTERN}' (repo-builder serve --nvcf does both)",
    )


RULES: tuple[Rule, ...] = (check_nvcf_headers_forwarded,)
