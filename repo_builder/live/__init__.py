"""``validate --live``: load every model into a real tritonserver and hold the offline verdict against it.

A layer above ``validate/`` and ``triton/``: offline validation never imports this package
(``tests/live/test_offline_imports.py``). The codes it reports live below, in ``validate/live_codes.py``,
so the rules' documentation and the reporters know them without it.
"""
