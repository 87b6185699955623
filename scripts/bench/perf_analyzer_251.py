#!/usr/bin/env python3
"""A perf_analyzer that starts on glibc 2.36: version 2.51, from the ``tritonclient==2.51.0`` wheel.

PyPI's ``perf-analyzer`` wheels (2.58-2.60) need glibc 2.38; the 2.51 binary shipped inside the tritonclient
2.51.0 wheel (``*.data/data/bin/perf_analyzer``) needs only ``libb64.so.0d`` and ``libcudart.so.12``, which the
``nvidia-pytriton`` wheel already ships under hashed names. This downloads that wheel with pip, unpacks the
binary, links the two libraries and writes a wrapper that sets ``LD_LIBRARY_PATH``; it prints the wrapper's
path, for ``repo-builder bench --perf-analyzer PATH``, ``$REPO_BUILDER_PERF_ANALYZER`` or
``scripts/bench/pipeline.py --perf-analyzer PATH``.

    .venv/bin/python scripts/bench/perf_analyzer_251.py DIR
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

LIBRARIES = {"libb64.so.0d": "libb64-*.so.0d", "libcudart.so.12": "libcudart-*.so.12*"}


def install(folder: Path) -> Path:
    folder = folder.resolve()
    wheels, libs = folder / "wheels", folder / "lib"
    libs.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "tritonclient==2.51.0", "-d", str(wheels)], check=True)
    wheel = next(wheels.glob("tritonclient-2.51.0-*.whl"))
    binary = folder / "perf_analyzer-2.51"
    with zipfile.ZipFile(wheel) as archive:
        member = next(n for n in archive.namelist() if n.endswith("/bin/perf_analyzer"))
        binary.write_bytes(archive.read(member))
    binary.chmod(0o755)
    import pytriton  # the serve extra: its wheel ships the two libraries

    shipped = Path(pytriton.__file__).resolve().parent.parent / "nvidia_pytriton.libs"
    for name, pattern in LIBRARIES.items():
        found = sorted(shipped.glob(pattern))
        if not found:
            raise SystemExit(f"{shipped}: no {pattern}; install the serve extra (nvidia-pytriton)")
        link = libs / name
        link.unlink(missing_ok=True)
        link.symlink_to(found[0])
    wrapper = folder / "perf_analyzer"
    wrapper.write_text(f"#!/bin/sh\nLD_LIBRARY_PATH='{libs}' exec '{binary}' \"$@\"\n", encoding="utf-8")
    wrapper.chmod(0o755)
    return wrapper


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="Where to put the wheel, the binary, the two library links and the wrapper.")
    wrapper = install(parser.parse_args().folder)
    from repo_builder.triton.perf_analyzer import probe

    why = probe(wrapper)
    if why:
        print(why, file=sys.stderr)
        return 3
    print(wrapper)
    return 0


if __name__ == "__main__":
    sys.exit(main())
