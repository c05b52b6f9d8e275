"""FastAPI hello world for bench/asgi.sh: the 13-byte text/plain body of
bench/hello.py from an async path operation, through FastAPI's routing,
dependency resolution and response class (FastAPI from the bench venv).
"""

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

app = FastAPI()


@app.get("/", response_class=PlainTextResponse)
async def hello():
    return PlainTextResponse("Hello, World!")
