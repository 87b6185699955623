"""Served text-recognizer images/s against RapidOCR() in process on the same rendered images (issue 37 item 5),
with the time per image in each stage on both sides.

Builds `build text-recognizer --from-rapidocr` (onnxruntime runtime), serves it on the embedded Triton (the ONNX
Runtime models through the stand-in), sends the images one per request at concurrency 1 and 4, and times
RapidOCR() on the same images in this process. The stages: decode, det_pre (side limits, letterbox, resize and
normalise), det (the detector), db_post (DB post-processing and reading order), crops, cls_pre / cls (the angle
classifier's inputs and model), rec_pre / rec (the recognizer's inputs and model), ctc (decoding), other (the rest).
RapidOCR's are clocked around its own components; the served step clocks its own and logs them
(REPO_BUILDER_OCR_STAGE_TIMES=1 in the server's environment); its det/cls/rec are BLS calls, and Triton's
statistics give the models' own compute time beside them (the difference is the BLS round trip and queueing).
The sides take turns for --rounds rounds (default 2) and each keeps its fastest round, as other jobs share the
machine. --quick: 2 images, one round (CI checks that it runs, not its speed).
Usage: scripts/bench/ocr.py [--quick] [--images N] [--rounds N] [--json FILE] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section

from repo_builder.cli.main import main as cli
from repo_builder.pipelines import ocr_reference
from repo_builder.pipelines.reference import built_ensemble, called_models, served_copy
from repo_builder.triton import start_server
from repo_builder.triton.bench import settled_statistics

NAME = "ocr"
STAGES = ("decode", "det_pre", "det", "db_post", "crops", "cls_pre", "cls", "rec_pre", "rec", "ctc", "other")
MODEL_STAGES = ("det", "cls", "rec")
MODELS = {"det": f"{NAME}_model", "cls": f"{NAME}_cls_model", "rec": f"{NAME}_rec_model"}
STAGE_LINE = re.compile(r"ocr stage seconds images=(\d+)((?: [a-z_]+=[0-9.]+)*)")  # Triton quotes the message


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its descendants so far (Linux /proc): the server, its stubs."""
    parents, cpu = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()  # from the state on (field 3)
        except (OSError, IndexError):
            continue  # exited meanwhile
        parents[int(stat.parent.name)] = int(fields[1])
        cpu[int(stat.parent.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    tree, grew = {pid}, True
    while grew:
        found = {child for child, parent in parents.items() if parent in tree} - tree
        tree, grew = tree | found, bool(found)
    return sum(cpu.get(member, 0.0) for member in tree)


def logged_stages(server: Any, log_start: int) -> tuple[dict[str, float], int]:
    """Seconds per stage summed over the step's log lines since ``log_start``, and how many images they cover."""
    stages = dict.fromkeys(STAGES, 0.0)
    logged = 0
    for match in STAGE_LINE.finditer(server.log_text(log_start)):
        logged += int(match.group(1))
        for pair in match.group(2).split():
            stage, seconds = pair.split("=")
            stages[stage] += float(seconds)
    return stages, logged


def wait_logged(server: Any, log_start: int, count: int) -> dict[str, float]:
    """The stages of ``count`` images logged since ``log_start`` (the stubs' lines reach the file a little later)."""
    deadline = time.monotonic() + 30.0
    stages, logged = logged_stages(server, log_start)
    while logged < count and time.monotonic() < deadline:
        time.sleep(0.2)
        stages, logged = logged_stages(server, log_start)
    if logged != count:
        raise SystemExit(f"the step logged stage times for {logged} of {count} images: is REPO_BUILDER_OCR_STAGE_TIMES set?")
    return stages


def served_rate(server: Any, images: list[bytes], concurrency: int) -> dict[str, Any]:
    """images/s, the step's stage ms per image (from its log lines), the models' compute ms per image and the cores
    the server kept busy."""

    def send(data: bytes) -> None:
        server.infer(NAME, ocr_reference.request([data]), timeout=600.0)

    warm_start = server.log_size()
    send(images[0])  # warm-up; its log line and its models' statistics are waited for, so that it is not counted below
    wait_logged(server, warm_start, 1)
    log_start, before, cpu = server.log_size(), settled_statistics(server.client), tree_cpu_seconds(server.pid)
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(send, images))
    elapsed = time.perf_counter() - started
    cpu = tree_cpu_seconds(server.pid) - cpu
    stages = wait_logged(server, log_start, len(images))
    after = settled_statistics(server.client)  # every execution of the window counted
    compute = {stage: (after[model]["batch_compute_ns"] - before.get(model, {}).get("batch_compute_ns", 0)) / 1e6 / len(images)
               for stage, model in MODELS.items() if model in after}
    return {"images_per_s": len(images) / elapsed, "ms_per_image": {k: v * 1000 / len(images) for k, v in stages.items()},
            "model_compute_ms_per_image": compute, "cores_busy": cpu / elapsed, "cpu_ms_per_image": cpu * 1000 / len(images)}


def clocked_engine(settings: Mapping[str, Any]) -> tuple[Any, dict[str, float]]:
    """RapidOCR() with its components wrapped in clocks (seconds per stage, summed over calls)."""
    engine = ocr_reference.reference_engine(settings)
    seconds = dict.fromkeys((*STAGES, "cls_all", "rec_all"), 0.0)

    def timer(inner: Callable[..., Any], stage: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                seconds[stage] += time.perf_counter() - start

        return timed

    def clock(owner: Any, attribute: str, stage: str) -> None:
        setattr(owner, attribute, timer(getattr(owner, attribute), stage))

    det, cls, rec = engine.text_det, engine.text_cls, engine.text_rec
    for owner, attribute, stage in ((engine, "load_img", "decode"), (engine, "preprocess", "det_pre"),
                                    (engine, "maybe_add_letterbox", "det_pre"), (det, "infer", "det"),
                                    (det, "postprocess_op", "db_post"), (det, "filter_tag_det_res", "db_post"),
                                    (engine, "sorted_boxes", "db_post"), (engine, "get_crop_img_list", "crops"),
                                    (cls, "infer", "cls"), (engine, "text_cls", "cls_all"), (rec, "session", "rec"),
                                    (rec, "postprocess_op", "ctc"), (engine, "text_rec", "rec_all")):
        clock(owner, attribute, stage)
    # get_preprocess builds, per image, the op that resizes and normalises: the op is what is clocked.
    build_op = det.get_preprocess
    det.get_preprocess = lambda *args: timer(build_op(*args), "det_pre")
    return engine, seconds


def reference_rate(engine: Any, seconds: dict[str, float], images: list[bytes]) -> dict[str, Any]:
    """RapidOCR() in process on ``images`` (``clocked_engine``'s engine and clocks)."""
    ocr_reference.reference_lines(engine, images[0])  # warm-up
    for stage in seconds:
        seconds[stage] = 0.0
    started, cpu = time.perf_counter(), time.process_time()
    for data in images:
        ocr_reference.reference_lines(engine, data)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    stages = {stage: seconds[stage] for stage in STAGES}
    stages["cls_pre"] = seconds["cls_all"] - seconds["cls"]  # resize/normalise and the flips
    stages["rec_pre"] = seconds["rec_all"] - seconds["rec"] - seconds["ctc"]
    stages["other"] = elapsed - sum(v for k, v in stages.items() if k != "other")
    return {"images_per_s": len(images) / elapsed, "ms_per_image": {k: v * 1000 / len(images) for k, v in stages.items()},
            "cores_busy": cpu / elapsed, "cpu_ms_per_image": cpu * 1000 / len(images)}


def best(found: dict[str, Any], key: str, measured: dict[str, Any]) -> None:
    """Keep the faster of the rounds (other jobs share the machine: the slower round is the one they slowed)."""
    if key not in found or measured["images_per_s"] > found[key]["images_per_s"]:
        found[key] = measured


def model_share(ms: Mapping[str, float]) -> float:
    return sum(ms[stage] for stage in MODEL_STAGES) / sum(ms.values())


def table(figures: Mapping[str, Any]) -> str:
    """BENCHMARKS.md's breakdown: ms per image in each stage."""
    sides = (("RapidOCR() in process", figures["rapidocr"]), ("served c1 (step)", figures["served_c1"]),
             ("served c4 (step)", figures["served_c4"]))
    rows = ["| stage | " + " | ".join(name for name, _ in sides) + " |", "| --- |" + " --- |" * len(sides)]
    for stage in STAGES:
        cells = []
        for _, side in sides:
            cell = f"{side['ms_per_image'][stage]:.1f}"
            model = side.get("model_compute_ms_per_image", {}).get(stage)
            cells.append(cell + (f" ({model:.1f} in the model)" if model is not None else ""))
        rows.append(f"| {stage} | " + " | ".join(cells) + " |")
    rows.append("| total | " + " | ".join(f"{sum(side['ms_per_image'].values()):.1f}" for _, side in sides) + " |")
    rows.append("| det+cls+rec share | " + " | ".join(f"{model_share(side['ms_per_image']):.0%}" for _, side in sides) + " |")
    rows.append("| images/s | " + " | ".join(f"{side['images_per_s']:.3f}" for _, side in sides) + " |")
    rows.append("| cores busy (of 2) | " + " | ".join(f"{side['cores_busy']:.2f}" for _, side in sides) + " |")
    rows.append("| CPU ms per image | " + " | ".join(f"{side['cpu_ms_per_image']:.0f}" for _, side in sides) + " |")
    return "\n".join(rows)


def run(count: int, work: Path, rounds: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    repo = work / "repo"
    if cli(["build", "text-recognizer", "--from-rapidocr", "--out", str(repo), "--name", NAME, "--runtime", "onnxruntime",
            "--no-gpu", "--force", "-q"]) != 0:
        raise SystemExit("build text-recognizer failed")
    # Text images only (the empty kind measures nothing of the pipeline), in the check's order.
    images = [ocr_reference.render_case(i) for i in range(count * 2) if ocr_reference.kind(i) != "empty"][:count]
    built = built_ensemble(repo)
    engine, seconds = clocked_engine(built.settings)
    figures: dict[str, Any] = {"images": len(images), "rounds": rounds}
    environment = (("REPO_BUILDER_OCR_STAGE_TIMES", "1"),)
    with served_copy(repo, built, None) as folder, start_server(folder, mode="explicit", environment=environment) as server:
        for name in called_models(repo, built):
            server.load(name)
        server.load(NAME)
        # The sides take turns, round after round (the server idles while RapidOCR runs in this process).
        for round_ in range(1, rounds + 1):
            log(f"round {round_}: RapidOCR() in process")
            best(figures, "rapidocr", reference_rate(engine, seconds, images))
            for concurrency in (1, 4):
                log(f"round {round_}: served, concurrency {concurrency}")
                best(figures, f"served_c{concurrency}", served_rate(server, images, concurrency))
    for key in ("served_c1", "served_c4"):
        figures[f"{key}_images_per_s"] = figures[key]["images_per_s"]
    figures["rapidocr_in_process_images_per_s"] = figures["rapidocr"]["images_per_s"]
    figures["ratio_c4"] = figures["served_c4_images_per_s"] / figures["rapidocr_in_process_images_per_s"]
    for key in ("rapidocr", "served_c1", "served_c4"):
        figures[f"{key}_model_share"] = model_share(figures[key]["ms_per_image"])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--images", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--no-report", action="store_true", help="Do not write BENCHMARKS.md's section.")
    args = parser.parse_args()
    count = 2 if args.quick else args.images
    with tempfile.TemporaryDirectory() as scratch:
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        figures = run(count, work, 1 if args.quick else args.rounds)
    print(json.dumps(figures, indent=2))
    print(table(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    if not args.quick and not args.no_report:
        write_section("ocr", section(figures))


def section(figures: Mapping[str, Any]) -> str:
    """BENCHMARKS.md's OCR section: the rates, the per-stage breakdown and the floor they show."""
    rapid, served = figures["rapidocr"], figures["served_c4"]
    cpu_ratio = rapid["cpu_ms_per_image"] / served["cpu_ms_per_image"]
    verdict = "met" if figures["ratio_c4"] >= 1.5 else "missed"
    return "\n".join([
        "## text-recognizer (OCR) vs RapidOCR() in process (scripts/bench/ocr.py, issue 37)",
        "",
        f"`scripts/bench/ocr.py --images {figures['images']} --rounds {figures['rounds']}`: `build text-recognizer "
        "--from-rapidocr` served on the embedded Triton (det, cls and rec through the ONNX Runtime stand-in), one image "
        "per request, against `RapidOCR()` in this process on the same rendered DejaVu images; the sides take turns and "
        f"each keeps its faster round. Served at concurrency 4: {figures['ratio_c4']:.2f}x RapidOCR's images/s "
        f"(target 1.5x: {verdict}).",
        "",
        table(figures),
        "",
        f"The floor: det, cls and rec are {model_share(rapid['ms_per_image']):.0%} of RapidOCR's time and "
        f"{model_share(served['ms_per_image']):.0%} of the served step's; both run the same ONNX Runtime models. Per CPU "
        f"second the served pipeline reads {cpu_ratio:.2f}x as many images (its own work is lighter, e.g. the detector "
        "input normalised by a look-up table); on saturated cores that is the most serving can gain, and beyond it "
        "only cores RapidOCR leaves idle count (images/s then measures the CPU share each side got).",
    ])


if __name__ == "__main__":
    main()
