from __future__ import annotations

import pytest
from support.trt_fixtures import IMAGE_SIGNATURE, TEXT_SIGNATURE

from repo_builder.compile import CompileSettings, derive_profiles, engine_max_batch, parse_profile_options
from repo_builder.errors import UserError
from repo_builder.spec import Profile, Signature, TensorSpec


def test_derive_profiles_batch_axis_spans_one_to_max_when_image_signature():
    (profile,) = derive_profiles(IMAGE_SIGNATURE, CompileSettings(max_batch_size=16))
    r = profile["input"]
    assert (r.min, r.opt, r.max) == ((1, 3, 8, 8), (16, 3, 8, 8), (16, 3, 8, 8))
    assert profile.names() == ("input",)


def test_derive_profiles_sequence_axis_follows_max_seq_len_when_text_signature():
    (profile,) = derive_profiles(TEXT_SIGNATURE, CompileSettings(max_batch_size=4, max_seq_len=512))
    for name in ("input_ids", "attention_mask"):
        r = profile[name]
        assert (r.min, r.opt, r.max) == ((1, 1), (4, 128), (4, 512))


def test_derive_profiles_takes_max_seq_len_from_signature_when_export_recorded_it():
    sig = Signature(TEXT_SIGNATURE.inputs, TEXT_SIGNATURE.outputs, metadata={"preprocess": {"max_length": 384}})
    (profile,) = derive_profiles(sig, CompileSettings(max_batch_size=4))
    assert profile["input_ids"].max == (4, 384)
    (explicit,) = derive_profiles(sig, CompileSettings(max_batch_size=4, max_seq_len=64))
    assert explicit["input_ids"].max == (4, 64)


def test_derive_profiles_opt_sequence_capped_by_max_when_short_max_seq_len():
    (profile,) = derive_profiles(TEXT_SIGNATURE, CompileSettings(max_batch_size=2, max_seq_len=32))
    assert profile["input_ids"].opt == (2, 32)


def test_derive_profiles_raises_naming_max_seq_len_when_sequence_axis_unbounded():
    with pytest.raises(UserError, match=r"--max-seq-len") as info:
        derive_profiles(TEXT_SIGNATURE, CompileSettings())
    assert "input_ids" in str(info.value) and "\n" not in str(info.value)


def test_derive_profiles_raises_naming_profile_option_when_spatial_axis_dynamic():
    sig = Signature(
        inputs=(TensorSpec("image", "float32", ("batch", 3, "height", "width")),),
        outputs=(TensorSpec("out", "float32", ("batch", 10)),),
    )
    with pytest.raises(UserError, match=r"--profile image:MIN,OPT,MAX"):
        derive_profiles(sig, CompileSettings(max_seq_len=512))


def test_derive_profiles_uses_override_and_defaults_rest_when_profile_names_one_input():
    overrides = parse_profile_options(["input_ids:1x8,8x128,64x512"])
    (profile,) = derive_profiles(TEXT_SIGNATURE, CompileSettings(max_seq_len=256, profiles=overrides))
    assert profile["input_ids"].max == (64, 512)
    assert profile["attention_mask"].max == (8, 256)


def test_derive_profiles_makes_several_profiles_when_input_named_again():
    overrides = parse_profile_options(
        ["input_ids:1x1,4x64,8x128;attention_mask:1x1,4x64,8x128", "input_ids:1x128,2x512,2x512", "attention_mask:1x128,2x512,2x512"]
    )
    profiles = derive_profiles(TEXT_SIGNATURE, CompileSettings(max_seq_len=512, profiles=overrides))
    assert len(profiles) == 2
    assert profiles[0]["input_ids"].max == (8, 128)
    assert profiles[1]["attention_mask"].min == (1, 128)


def test_derive_profiles_raises_when_override_changes_fixed_axis():
    overrides = parse_profile_options(["input:1x3x16x16,8x3x16x16,8x3x16x16"])
    with pytest.raises(UserError, match="fixed axis 2"):
        derive_profiles(IMAGE_SIGNATURE, CompileSettings(profiles=overrides))


def test_derive_profiles_raises_when_override_names_unknown_input():
    overrides = parse_profile_options(["pixels:1x3x8x8,1x3x8x8,1x3x8x8"])
    with pytest.raises(UserError, match="'pixels', which is not an input"):
        derive_profiles(IMAGE_SIGNATURE, CompileSettings(profiles=overrides))


def test_derive_profiles_raises_when_batch_axis_not_first():
    sig = Signature(
        inputs=(TensorSpec("x", "float32", (3, "batch")),),
        outputs=(TensorSpec("y", "float32", (3, "batch")),),
        batch_axis=1,
    )
    with pytest.raises(UserError, match="batch axis is 1"):
        derive_profiles(sig, CompileSettings())


def test_derive_profiles_pins_batch_axis_to_one_when_max_batch_size_zero():
    (profile,) = derive_profiles(IMAGE_SIGNATURE, CompileSettings(max_batch_size=0))
    assert profile["input"].max == (1, 3, 8, 8)


@pytest.mark.parametrize(
    "value, message",
    [
        ("input_ids", "expected NAME:MIN,OPT,MAX"),
        ("input_ids:1x8,8x128", "three shapes"),
        ("input_ids:1x8,8xa,64x512", "not a shape"),
        ("input_ids:8x8,1x128,64x512", "min <= opt <= max"),
    ],
)
def test_parse_profile_options_raises_one_line_when_value_malformed(value: str, message: str):
    with pytest.raises(UserError, match=message) as info:
        parse_profile_options([value])
    assert "\n" not in str(info.value)


def test_engine_max_batch_takes_min_over_inputs_and_max_over_used_profiles():
    p0 = Profile().add("a", (1, 4), (8, 4), (8, 4)).add("b", (1, 4), (4, 4), (4, 4))
    p1 = Profile().add("a", (1, 4), (16, 4), (16, 4)).add("b", (1, 4), (32, 4), (32, 4))
    assert engine_max_batch((p0, p1)) == 4
    assert engine_max_batch((p0, p1), used=(0, 1)) == 16
    assert engine_max_batch((p0, p1), used=(5,)) == 0
