"""Pure facts that validation rules share, derived from a scanned ``Repository`` (no rules here).

Each module answers one question Triton answers while loading (which versions load, which backend
runs a model, what auto-complete fills in, how an ensemble's tensors connect, what an ONNX graph
declares); rule modules import these and the registry, never each other.
"""
