import onnx
import pytest

from repo_builder import dtypes
from repo_builder.errors import UserError


def test_dtypes_onnx_ids_match_onnx_when_compared_with_tensorproto() -> None:
    for d in dtypes.DTYPES:
        assert getattr(onnx.TensorProto, d.onnx) == d.onnx_id, d


def test_dtypes_triton_names_match_model_config_proto_when_compared() -> None:
    from tritonclient.grpc import model_config_pb2

    for d in dtypes.DTYPES:
        assert model_config_pb2.DataType.Value(d.triton) > 0, d


def test_dtypes_round_trip_when_converting_between_every_naming() -> None:
    for d in dtypes.DTYPES:
        assert dtypes.from_numpy(d.numpy) is d
        assert dtypes.from_onnx(d.onnx) is d
        assert dtypes.from_onnx(d.onnx_id) is d
        assert dtypes.from_triton(d.triton) is d
        assert dtypes.from_triton(d.wire) is d
        if d.torch:
            assert dtypes.from_torch(f"torch.{d.torch}") is d


def test_dtypes_raise_user_error_when_name_is_unknown() -> None:
    with pytest.raises(UserError, match="unknown numpy data type 'float7'"):
        dtypes.from_numpy("float7")


def test_dtypes_map_python_strings_to_triton_bytes_when_numpy_name_is_str() -> None:
    assert dtypes.from_numpy("bytes").wire == "BYTES"
    assert dtypes.from_numpy("object").triton == "TYPE_STRING"
