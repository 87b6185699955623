"""metadata.axis_ranges: an export's ranges for symbolic axes that are not sequences (a detector's image size)."""

from __future__ import annotations

import pytest

from repo_builder.compile.profiles import derive_profiles
from repo_builder.compile_recipe import CompileSettings
from repo_builder.errors import UserError
from repo_builder.spec import Signature, TensorSpec


def image_signature(metadata: dict) -> Signature:
    return Signature(inputs=(TensorSpec("images", "float32", ("batch", 3, "height", "width")),),
                     outputs=(TensorSpec("out", "float32", ("batch", 84, "anchors")),), metadata=metadata)


def test_derive_profiles_uses_axis_ranges_when_export_recorded_them() -> None:
    signature = image_signature({"axis_ranges": {"height": [32, 640, 640], "width": [32, 320, 640]}})
    (profile,) = derive_profiles(signature, CompileSettings(max_batch_size=4))
    r = profile["images"]
    assert (r.min, r.opt, r.max) == ((1, 3, 32, 32), (4, 3, 640, 320), (4, 3, 640, 640))


@pytest.mark.parametrize("ranges", [None, {"height": [640, 32, 640], "width": [32, 640, 640]}, {"height": [1, 2], "width": "x"}])
def test_derive_profiles_asks_for_profile_when_axis_ranges_missing_or_invalid(ranges: object) -> None:
    with pytest.raises(UserError, match="pass --profile images"):
        derive_profiles(image_signature({"axis_ranges": ranges}), CompileSettings(max_batch_size=4))
