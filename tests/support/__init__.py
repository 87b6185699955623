"""Helpers shared by the tests of several folders (repository builders, moto's S3 server, a headless browser...).

Imported as ``support.<module>``: pytest puts ``tests/`` on ``sys.path`` (``pythonpath`` in pyproject.toml).
"""
