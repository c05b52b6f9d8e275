"""The Django example (examples/django_site) served by m0serve: a template
page, a CSRF-protected form, and the worker pid."""

import re

import django
import pytest
import requests

from serverproc import EXAMPLES_DIR

TOKEN_RE = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture(scope="module")
def server(start_module_server):
    return start_module_server("djangosite.wsgi:application", app_dir=EXAMPLES_DIR / "django_site")


@pytest.fixture
def session():
    with requests.Session() as s:
        s.trust_env = False  # never route 127.0.0.1 through a configured proxy
        yield s


def test_template_page_renders_context_and_worker_pid(server, session):
    response = session.get(server.url("/"), timeout=10)
    assert response.status_code == 200
    assert "<h1>Hello from Django on m0serve</h1>" in response.text
    pid = int(re.search(r'<span id="pid">(\d+)</span>', response.text).group(1))
    assert pid in server.worker_pids()


def test_pid_route(server, session):
    response = session.get(server.url("/pid"), timeout=10)
    assert response.status_code == 200
    assert int(response.text) in server.worker_pids()


def test_form_post_with_csrf_token_echoes_name(server, session):
    page = session.get(server.url("/form"), timeout=10)
    assert page.status_code == 200
    assert "csrftoken" in session.cookies
    token = TOKEN_RE.search(page.text).group(1)
    response = session.post(server.url("/form"), data={"csrfmiddlewaretoken": token, "name": "Ada <m0>"},
                            timeout=10)
    assert response.status_code == 200
    assert '<p id="echo">Hello, Ada &lt;m0&gt;!</p>' in response.text


def test_form_post_without_csrf_token_is_403(server, session):
    assert session.get(server.url("/form"), timeout=10).status_code == 200
    response = session.post(server.url("/form"), data={"name": "Ada"}, timeout=10)
    assert response.status_code == 403


def test_form_post_with_the_pages_origin_passes_a_foreign_origin_is_403(server, session):
    """A browser's POST carries Origin; Django >= 4.0 checks it against the
    scheme and Host m0serve passes in the environ."""
    page = session.get(server.url("/form"), timeout=10)
    token = TOKEN_RE.search(page.text).group(1)
    data = {"csrfmiddlewaretoken": token, "name": "Ada"}
    response = session.post(server.url("/form"), data=data, headers={"Origin": server.url("")}, timeout=10)
    assert response.status_code == 200
    assert '<p id="echo">Hello, Ada!</p>' in response.text
    if int(django.__version__.split(".")[0]) >= 4:
        response = session.post(server.url("/form"), data=data, headers={"Origin": "http://elsewhere.example"},
                                timeout=10)
        assert response.status_code == 403


def test_the_wsgi_module_alone_is_found_as_gunicorn_finds_it(start_server, session):
    """`m0serve djangosite.wsgi`, as Django's docs spell it for gunicorn: the
    module's `application` (gunicorn's default attribute), on the pool."""
    server = start_server("djangosite.wsgi", app_dir=EXAMPLES_DIR / "django_site")
    assert server.stderr.wait_for(re.compile(r"/ -> djangosite\.wsgi:application \(wsgi, pool\)"), 10)
    r = session.get("http://127.0.0.1:%d/" % server.port, timeout=10)
    assert r.status_code == 200
