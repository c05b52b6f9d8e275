"""Application factories (issue 27 item 16), as gunicorn and uvicorn users
write them.

  create_app(name="default", n=1, extra=None)  a Flask app; GET / answers
                                               {"name", "n", "extra", "pid", "built"} as JSON
  make_asgi()                                  a Starlette app (ASGI); GET / answers {"asgi": true, "pid"}
  handler                                      a plain function of no argument (a factory not called)
  broken()                                     raises inside the factory (its traceback is shown)
  returns_none()                               returns None
  settings                                     an object with an attribute factory: settings.build()

"built" counts the factory calls in the process: one per worker.
"""

import os

_built = []


def create_app(name="default", n=1, extra=None):
    from flask import Flask, jsonify

    _built.append(name)
    app = Flask(__name__)

    @app.route("/")
    def index():
        return jsonify(name=name, n=n, extra=extra, pid=os.getpid(), built=len(_built))

    return app


def make_asgi():
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def index(request):
        return JSONResponse({"asgi": True, "pid": os.getpid(), "root_path": request.scope.get("root_path", "")})

    return Starlette(routes=[Route("/", index)])


def handler():
    return "not an application"


def broken():
    raise RuntimeError("the factory failed on purpose")


def returns_none():
    return None


class _Settings:
    @staticmethod
    def build(name="from settings"):
        return create_app(name)


settings = _Settings()
