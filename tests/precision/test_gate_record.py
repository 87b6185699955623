"""What a gated build leaves for bench and the report page to show: one line per gated model step."""

from __future__ import annotations

from repo_builder.precision.gate import describe, recorded_precision


def _manifest(precision: object) -> dict[str, object]:
    settings = {"precision": precision} if precision is not None else {}
    return {"models": {"emb_model": {"role": "model", "versions": {"1": {"settings": {}}, "2": {"settings": settings}}}}}


RECORD = {
    "precision": "int8",
    "accuracy": {"metric": "mean_cosine", "figures": {"mean_cosine": 0.98256, "worst_cosine": 0.9664}, "compared": 300,
                 "unit": "texts", "threshold": 0.98},
    "fallback": {"float_nodes": [{"node": "a"}, {"node": "b"}]},
}


def test_describe_names_the_precision_the_figure_the_data_and_the_nodes_kept_float() -> None:
    assert describe(RECORD) == "int8: mean_cosine 0.9826 vs fp32 on 300 texts (gate >= 0.98), 2 nodes kept float"


def test_recorded_precision_reads_the_newest_version_of_the_ensembles_model_step() -> None:
    assert recorded_precision(_manifest(RECORD), "emb").startswith("int8: mean_cosine 0.9826")
    assert recorded_precision(_manifest(None), "emb") == "fp32"
    assert recorded_precision({"models": {}}, "emb") == "fp32"
    assert recorded_precision({"models": "broken"}, "emb") == "fp32"
