"""Finding and running a real tritonserver, loading models into it, and synthesizing requests.

The library entry point is ``start_server`` (see ``repo_builder.triton.server``)::

    with start_server(repository, mode="explicit") as server:
        server.load("name")
        outputs = server.infer("name", {"INPUT": array})
"""

from __future__ import annotations

from repo_builder.triton.server import ModelLoadError, ServerError, ServerOptions, TritonServer, start_server

__all__ = ["ModelLoadError", "ServerError", "ServerOptions", "TritonServer", "start_server"]
