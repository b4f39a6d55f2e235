"""The Spark catalog plugin's control plane over HTTP: ``POST /lakekv/v1/spark-control``.

The body is one control-plane request (``{"op": ..., "args": {...}}``, see
:mod:`catalog.spark.control`) and the answer is its JSON answer, with HTTP
200 whether the catalog accepted it or not (the answer's ``ok`` says which;
the plugin turns ``{"ok": false}`` into Spark's exceptions). So one protocol
serves the no-server child process and a shared ``lakekv serve``
(catalog options ``uri`` and ``token``).

Data files are read and written by the Spark tasks themselves. When the
server's store is a local directory, ``hello`` reports it as a ``file:``
root with the store's id: a plugin that finds the same store id there (the
same machine, or a shared mount at the same path) uses Spark's own Parquet
reader and writer on it, as with a local control plane. Otherwise (another
machine, S3) the tasks go through the Python source with the lakehouse URL
``hello`` reports.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from service.codec import read_json
from service.errors import ApiError
from service.routing import route

PATH = "/lakekv/v1/spark-control"


def _plane(request: Request) -> Any:
    state = request.app.state
    plane = getattr(state, "spark_control", None)
    if plane is None:
        try:
            from catalog.spark.control import ControlPlane, data_root
        except ImportError as exc:  # pyspark (the spark extra) is not installed here
            raise ApiError(501, "NotImplemented", f"the Spark control plane needs the spark extra: {exc}") from exc
        lake = state.iceberg.lake
        plane = state.spark_control = ControlPlane(lake, data_root=data_root(lake))
    return plane


async def spark_control(request: Request) -> JSONResponse:
    body = await read_json(request)
    plane = _plane(request)
    answer = await run_in_threadpool(plane.handle, body)
    return JSONResponse(answer)


ROUTES = [route(PATH, spark_control, "POST")]
