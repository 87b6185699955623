"""Rules RB2xx: the config text itself (core reads it with protobuf's text parser) and model-wide sections.

Inputs and outputs are in io.py, warmup samples in warmup.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from repo_builder.triton_layout import CONFIG_FILE
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, rule


def _config_link_escapes(model: ModelEntry) -> bool:
    return any(f.name == CONFIG_FILE and f.escapes for f in model.files)


@rule("RB201", "config-parses", quiet="plain_model")
def check_config_parses(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """`config.pbtxt` must parse with Triton's own `ModelConfig` proto (text format).

    Triton reads the file with protobuf's text parser: a misspelt or unknown field, a value of the wrong
    type, two members of one `oneof` (say `dynamic_batching` and `sequence_batching`), a file that is not
    UTF-8 text or is a folder all make the model fail to load. The diagnostic carries the line and column
    the parser stopped at.

    Fails: `max_batch_sise: 8` (unknown field). Passes: `max_batch_size: 8`.
    """
    if model.config_problem is not None and not _config_link_escapes(model):  # RB103 reports the link
        yield Finding(
            model.config_problem,
            hint="field names and enum values are those of Triton's model_config.proto",
            line=model.config_line,
            column=model.config_column,
        )



@rule("RB209", "model-metrics", field="model_metrics", sections=("model_metrics",))
def check_model_metrics(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Per-model metric settings (`model_metrics`) are complete.

    Triton (core's ValidateModelMetrics): "metric control must specify 'metric_identifier'", "metric
    identifier must specify non-empty 'family'", "metric control must specify 'histogram_options'",
    "histogram options must specify non-empty 'buckets'".

    Fails: `model_metrics { metric_control [ { metric_identifier { family: "nv_inference_first_response_histogram_ms" }
    histogram_options { } } ] }`. Passes: `histogram_options { buckets: [ 1, 10, 100 ] }`.
    """
    cfg = model.config
    if cfg is None or not cfg.HasField("model_metrics"):
        return
    for control in cfg.model_metrics.metric_control:
        if not control.HasField("metric_identifier"):
            yield Finding("metric control must specify 'metric_identifier'")
        elif not control.metric_identifier.family:
            yield Finding("metric identifier must specify non-empty 'family'")
        elif not control.HasField("histogram_options"):
            yield Finding("metric control must specify 'histogram_options'")
        elif not control.histogram_options.buckets:
            yield Finding("histogram options must specify non-empty 'buckets'")


RULES: tuple[Rule, ...] = (
    check_config_parses,
    check_model_metrics,
)
