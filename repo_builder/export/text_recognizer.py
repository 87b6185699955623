"""PP-OCR ONNX models (a text detector, an optional angle classifier, a recognizer and its character
dictionary) -> one export folder the text-recognizer pipeline serves.

Layout: the detector is ``model.onnx`` + ``signature.json`` (the generic model step: compiled, gated, served);
the classifier and recognizer sit in ``cls/`` and ``rec/`` with their own signature.json, and the recognizer's
characters in ``rec/characters.json`` (the list CTC decoding indexes, blank and space included). Nothing is
converted: PaddleOCR's inference format goes through paddle2onnx first (docs/text-recognition.md).
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.export.onnx_reader import read_onnx_io
from repo_builder.export.signature_build import build_signature
from repo_builder.fsutil import sha256_file
from repo_builder.guarded_read import LABELS, ONNX, FileKind, UnsafeFile, read_repository_file
from repo_builder.spec import OnnxArtifact, Signature, TensorSpec, read_signature, write_signature

TASK = "text-recognition"
ONNX_FILE = "model.onnx"
CHARACTERS_FILE = "characters.json"
# RapidOCR 1.4.4's wheel (Apache-2.0): the three models its config.yaml names.
RAPIDOCR_MODELS = {"det": "ch_PP-OCRv4_det_infer.onnx", "cls": "ch_ppocr_mobile_v2.0_cls_infer.onnx",
                   "rec": "ch_PP-OCRv4_rec_infer.onnx"}
METADATA_CHARACTERS = "character"  # the rec model's metadata key RapidOCR reads the dictionary from


@dataclass(frozen=True)
class OcrModels:
    """The files one text-recognizer is built from (``cls`` None: no angle classifier)."""

    det: Path
    rec: Path
    cls: Path | None = None
    dictionary: Path | None = None  # None: the rec model's metadata "character"

    def record(self) -> dict[str, Any]:
        return {"det_model": str(self.det.resolve()), "cls_model": str(self.cls.resolve()) if self.cls else None,
                "rec_model": str(self.rec.resolve()), "dict": str(self.dictionary.resolve()) if self.dictionary else None}


def rapidocr_folder() -> Path:
    """Where the installed rapidocr-onnxruntime wheel keeps its models (found, not imported: importing it loads
    onnxruntime and its whole pipeline)."""
    from importlib.util import find_spec

    spec = find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("--from-rapidocr: rapidocr-onnxruntime is not installed here; pip install 'rapidocr-onnxruntime==1.4.4' "
                        "or pass --det-model, --rec-model (and --cls-model, --dict)")
    return Path(next(iter(spec.submodule_search_locations))) / "models"


def rapidocr_models() -> OcrModels:
    folder = rapidocr_folder()
    paths = {role: folder / name for role, name in RAPIDOCR_MODELS.items()}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise UserError(f"--from-rapidocr: {', '.join(missing)} missing from the installed wheel; reinstall rapidocr-onnxruntime==1.4.4")
    return OcrModels(det=paths["det"], cls=paths["cls"], rec=paths["rec"])


def _one_image_model(path: Path, flag: str, rank: int) -> tuple[TensorSpec, TensorSpec]:
    """The one float32 input (N, 3, H, W) and the one float32 output of a PP-OCR model, or a one-line refusal."""
    if not path.is_file():
        raise UserError(f"{flag} {path}: no such file; pass a PP-OCR ONNX model (paddle2onnx output)")
    io = read_onnx_io(path)
    if len(io.inputs) != 1 or len(io.outputs) != 1:
        raise UserError(f"{flag} {path}: expected one input and one output, found {len(io.inputs)} and {len(io.outputs)}; "
                        "pass a PP-OCR inference model converted with paddle2onnx")
    image, out = io.inputs[0], io.outputs[0]
    if image.dtype != "float32" or len(image.shape) != 4 or image.shape[1] != 3 or isinstance(image.shape[0], int):
        raise UserError(f"{flag} {path}: input '{image.name}' is {image.dtype} {list(image.shape)}, not float32 "
                        "[batch, 3, H, W] with a dynamic batch; pass a PP-OCR model converted with dynamic shapes")
    if out.dtype != "float32" or len(out.shape) != rank:
        raise UserError(f"{flag} {path}: output '{out.name}' is {out.dtype} {list(out.shape)}, not a float32 tensor of rank {rank}; "
                        "is this the right model for the flag?")
    return image, out


def read_characters(models: OcrModels, classes: int) -> list[str]:
    """The recognizer's characters as RapidOCR's CTCLabelDecode builds them: the dictionary's lines (``--dict``,
    read as its read_character_file does; else the model's metadata ``character``, split as its
    get_character_list does), a space appended, the CTC blank first. Must give the model's class count."""
    if models.dictionary is not None:
        if not models.dictionary.is_file():
            raise UserError(f"--dict {models.dictionary}: no such file; pass the recognizer's character dictionary (one per line)")
        data = _read(models.dictionary, LABELS, "--dict")
        # bytes readlines() splits after b"\n" only, as RapidOCR's read_character_file reads the file.
        characters = [line.decode("utf-8", errors="replace").strip("\n").strip("\r\n") for line in io.BytesIO(data).readlines()]
        where = f"--dict {models.dictionary}"
    else:
        import onnx

        model = onnx.load_model_from_string(_read(models.rec, ONNX, "--rec-model"))
        found = {p.key: p.value for p in model.metadata_props}
        if METADATA_CHARACTERS not in found:
            raise UserError(f"--rec-model {models.rec}: no '{METADATA_CHARACTERS}' in its metadata; pass --dict FILE "
                            "(the ppocr_keys file it was trained with)")
        characters = found[METADATA_CHARACTERS].splitlines()
        where = f"--rec-model {models.rec} (metadata '{METADATA_CHARACTERS}')"
    full = ["blank", *characters, " "]
    if len(full) != classes:
        raise UserError(f"{where}: {len(characters)} characters + blank + space = {len(full)}, but the recognizer "
                        f"outputs {classes} classes; pass the dictionary it was trained with")
    return full


def _read(path: Path, kind: FileKind, flag: str) -> bytes:
    try:
        return read_repository_file(path.resolve(), path.resolve().parent, kind, f"{flag} {path}")
    except UnsafeFile as exc:
        raise UserError(str(exc)) from None


def _copy_model(source: Path, folder: Path, io: tuple[TensorSpec, TensorSpec], metadata: Mapping[str, Any]) -> Signature:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / ONNX_FILE
    shutil.copyfile(source, target)
    axes = {io[0].name: {0: str(io[0].shape[0])}}
    signature = build_signature(target, intended_axes=axes, metadata={**metadata, "source_sha256": sha256_file(source)})
    write_signature(signature, folder)
    return signature


def check_models(models: OcrModels) -> tuple[dict[str, tuple[TensorSpec, TensorSpec]], list[str]]:
    """Every file read and checked (one-line refusals naming the flag) before anything is written."""
    found = {"det": _one_image_model(models.det, "--det-model", 4), "rec": _one_image_model(models.rec, "--rec-model", 3)}
    if models.cls is not None:
        found["cls"] = _one_image_model(models.cls, "--cls-model", 2)
    classes = found["rec"][1].shape[2]
    if not isinstance(classes, int):
        raise UserError(f"--rec-model {models.rec}: its output's class axis is dynamic; pass a PP-OCR recognizer")
    return found, read_characters(models, classes)


def write_ocr_export(folder: Path, models: OcrModels, settings: Mapping[str, Any]) -> OnnxArtifact:
    """The export folder (see the module doc); ``settings``: the pipeline's own (thresholds, sizes, limits)."""
    found, characters = check_models(models)
    roles: dict[str, Any] = {}
    for role in ("cls", "rec"):
        if role in found:
            source = models.cls if role == "cls" else models.rec
            assert source is not None
            _copy_model(source, folder / role, found[role], {"task": TASK, "role": role, "source": str(source.resolve())})
            roles[role] = {"folder": role, "input": found[role][0].name, "output": found[role][1].name}
    (folder / "rec" / CHARACTERS_FILE).write_text(json.dumps(characters, ensure_ascii=False) + "\n", encoding="utf-8")
    roles["rec"]["characters"] = f"rec/{CHARACTERS_FILE}"
    det_in, det_out = found["det"]
    ocr = {"det": {"input": det_in.name, "output": det_out.name}, **roles, "settings": dict(settings)}
    signature = _copy_model(models.det, folder, found["det"], {"task": TASK, "role": "det", "ocr": ocr,
                                                               "source": str(models.det.resolve())})
    return OnnxArtifact(onnx_path=folder / ONNX_FILE, signature_path=folder / "signature.json", signature=signature)


def read_role(artifact: OnnxArtifact, role: str) -> tuple[Path, Signature] | None:
    """The cls or rec model beside an export's detector (None: not there, e.g. no classifier)."""
    folder = artifact.onnx_path.parent / role
    if not (folder / ONNX_FILE).is_file():
        return None
    return folder / ONNX_FILE, read_signature(folder / "signature.json")
