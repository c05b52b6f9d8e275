"""A Litestar hello world (issue 27, item 7): every Litestar application's
lifespan runs its event emitter, a task it stops only at shutdown.

  /            "Hello, world!"
  /slow?s=S    logs "litestar: slow started", sleeps S s (default 1), logs
               "litestar: slow done", answers "slow"

on_shutdown logs "litestar: on_shutdown".
"""

import asyncio
import sys

from litestar import Litestar, get


def _log(line):
    sys.stderr.write("litestar: %s\n" % line)
    sys.stderr.flush()


@get("/")
async def hello() -> str:
    return "Hello, world!"


@get("/slow")
async def slow(s: float = 1.0) -> str:
    _log("slow started")
    await asyncio.sleep(s)
    _log("slow done")
    return "slow"


app = Litestar(route_handlers=[hello, slow], on_shutdown=[lambda: _log("on_shutdown")])
