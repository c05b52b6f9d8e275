"""The Flask example (examples/flask_app) served by m0serve: the links that
url_for generated appear on the index page and can be followed."""

import re
from urllib.parse import urljoin

import pytest
import requests

from serverproc import EXAMPLES_DIR


@pytest.fixture(scope="module")
def server(start_module_server):
    return start_module_server("app:app", app_dir=EXAMPLES_DIR / "flask_app")


@pytest.fixture
def session():
    with requests.Session() as s:
        s.trust_env = False  # never route 127.0.0.1 through a configured proxy
        yield s


@pytest.fixture
def index(server, session):
    response = session.get(server.url("/"), timeout=10)
    assert response.status_code == 200
    return response


def test_index_lists_url_for_links(index):
    links = re.findall(r'<a href="([^"]+)">', index.text)
    assert links == ["/hello/world", "/hello/m0serve", "/pid"]


def test_links_are_followable(index, session):
    bodies = {}
    for link in re.findall(r'<a href="(/hello/[^"]+)">', index.text):
        response = session.get(urljoin(index.url, link), timeout=10)
        assert response.status_code == 200
        bodies[link] = response.text
    assert bodies == {"/hello/world": "Hello, world!", "/hello/m0serve": "Hello, m0serve!"}


def test_external_link_uses_request_host(server, index, session):
    external = re.search(r'<a id="external" href="([^"]+)">', index.text).group(1)
    assert external == server.url("/pid")
    response = session.get(external, timeout=10)
    assert response.status_code == 200
    assert int(response.text) in server.worker_pids()


def test_echo_form_action_echoes_body(index, session):
    action = re.search(r'<form method="post" action="([^"]+)">', index.text).group(1)
    response = session.post(urljoin(index.url, action), data=b"echo \xe2\x9c\x93 body",
                            headers={"Content-Type": "text/plain"}, timeout=10)
    assert response.status_code == 200
    assert response.content == b"echo \xe2\x9c\x93 body"
