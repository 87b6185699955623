"""Finding and running a real tritonserver, loading models into it, and synthesizing requests.

The library entry points are ``start_server`` (a server for as long as a ``with`` block lasts; see
``repo_builder.triton.server``) and ``serve`` (a server on a repository, ready once every model is loaded,
refused when one is not unless ``allow_unavailable``; see ``repo_builder.triton.serving``)::

    with start_server(repository, mode="explicit") as server:
        server.load("name")
        outputs = server.infer("name", {"INPUT": array})
"""

from __future__ import annotations

from repo_builder.triton.arguments import ServerOptions
from repo_builder.triton.errors import ModelLoadError, ServerError
from repo_builder.triton.server import TritonServer, start_server
from repo_builder.triton.serving import ServeSettings, Serving, serve

__all__ = [
    "ModelLoadError",
    "ServeSettings",
    "ServerError",
    "ServerOptions",
    "Serving",
    "TritonServer",
    "serve",
    "start_server",
]
