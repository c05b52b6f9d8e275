"""What a new user coming from gunicorn meets first: SERVER_SOFTWARE in the
environ, gunicorn's short flags and a hint for a mistyped one, a message
that tells a module that cannot be imported from one that has no
application, and a --help that agrees with the README and the discovery."""

import json
import re
import subprocess
import sys

from rawhttp import request
from serverproc import BINARY, REPO, START_TIMEOUT, Server, kill_group, run_to_exit, spawn

sys.path.insert(0, str(REPO / "python"))
from m0serve import __version__  # noqa: E402


def run_in(cwd, args):
    """Run the binary in cwd until it exits: (exit status, stderr text)."""
    proc = spawn(args, cwd=cwd)
    try:
        _, err = proc.communicate(timeout=START_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.communicate()
        raise
    finally:
        kill_group(proc)
    return proc.returncode, err.decode("utf-8", "replace")


# ------------------------------------------------------------ item 14

def test_server_software_names_m0serve_and_its_version(start_server):
    server = start_server("conformance:application")
    env = json.loads(request(server.port, "GET", "/environ").body)
    assert env["SERVER_SOFTWARE"] == "m0serve/" + __version__


# ------------------------------------------------------------ item 15

def test_gunicorn_short_flags_start_a_server(start_server):
    server = Server("conformance:application", "-w", "2", workers=None)
    server.args[server.args.index("--bind")] = "-b"
    start_server.servers.append(server)
    server.start()
    assert re.search(r"\bworkers=2\b", server.banner)
    assert len(server.wait_workers(lambda pids: len(pids) == 2)) == 2
    assert request(server.port, "GET", "/").body == b"ok"


def test_a_mistyped_flag_gets_the_nearest_one():
    status, stderr = run_to_exit(["conformance:application", "--worker", "2"])
    assert status == 2
    assert stderr.strip() == "m0serve: error: unrecognized option '--worker'; did you mean '--workers'?"


def test_threads_on_a_gil_build_exits_78_with_one_line():
    """--threads N (event loops) needs a free-threaded CPython: a GIL build
    would run the loops' Python one at a time. One line says so and names
    what a gunicorn user means by --threads (handler threads)."""
    import sysconfig
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        import pytest
        pytest.skip("this is the free-threaded build: --threads is served (tests/e2e/test_threads.py)")
    for args in (["--threads", "2"], ["--threads=4", "--workers", "2"]):
        status, stderr = run_to_exit(["conformance:application"] + args)
        lines = stderr.strip().splitlines()
        assert status == 78 and len(lines) == 1, (status, stderr)
        assert "free-threaded" in lines[0] and "--blocking-threads" in lines[0] and "--workers" in lines[0], lines
    status, stderr = run_to_exit(["conformance:application", "--threads", "0"])
    assert status == 2 and "--threads" in stderr, stderr
    env_status, env_err = run_to_exit(["conformance:application"], env={"M0_THREADS": "3"})
    assert env_status == 78 and "--threads 3" in env_err, env_err


def test_gunicorn_timeout_flag_is_explained_not_mapped():
    status, stderr = run_to_exit(["conformance:application", "-t", "30"])
    assert status == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("m0serve: error: unrecognized option '-t'; ")
    assert "--request-timeout" in lines[0]


def test_other_servers_flags_get_what_m0serve_does_instead():
    """Flags uvicorn, Granian and gunicorn users type by habit get one line
    on what m0serve does instead, and a near spelling is offered only when
    it is a near meaning (issue 27 item 17: --proxy-headers was offered
    --max-headers, --preload --reload, --root-path --grant-path)."""
    cases = {
        "--proxy-headers": "from the peers in --forwarded-allow-ips",
        "--preload": "nothing to preload",
        "--root-path": "--mount PREFIX=MODULE:ATTR",
        "--timeout-graceful-shutdown": "did you mean '--graceful-timeout'?",
        "--uds": "did you mean '--bind unix:PATH'?",
        "--fd": "LISTEN_FDS",
        "--statsd-host": "--metrics-bind",
        "--ssl-keyfile-password": "did you mean '--keyfile-password-file'?",
        "--ssl-version": "TLS 1.2 and 1.3 only",
        "--ssl-cert-chain": "--certfile, --keyfile",
        "--limit-max-requests": "did you mean '--max-requests'?",
        "--access-log-fmt": "did you mean '--access-log-format'?",
    }
    for flag, want in cases.items():
        status, stderr = run_to_exit(["conformance:application", flag, "x"])
        lines = stderr.strip().splitlines()
        assert status == 2 and len(lines) == 1, (flag, status, stderr)
        assert lines[0].startswith("m0serve: error: unrecognized option '%s'; " % flag), lines[0]
        assert want in lines[0], lines[0]
        for wrong in ("'--max-headers'", "'--reload'", "'--grant-path'"):
            assert wrong not in lines[0], lines[0]


# ------------------------------------------------------------ item 16

def test_a_module_not_on_sys_path_says_so_with_the_directories(tmp_path):
    status, stderr = run_in(tmp_path, ["djangosite", "--bind", "127.0.0.1:0"])
    assert status == 1
    line = next(l for l in stderr.splitlines() if "cannot load the application" in l)
    assert "cannot import 'djangosite': no module named 'djangosite' on sys.path" in line
    assert "current directory %s" % tmp_path in line
    assert "--app-dir %s" % tmp_path in line
    assert "tried" not in line and "Traceback" not in stderr


def test_a_module_not_on_sys_path_names_app_dir_too(tmp_path):
    status, stderr = run_in(tmp_path, ["conformance:application", "--bind", "127.0.0.1:0",
                                       "--app-dir", str(tmp_path / "..")])
    assert status == 1
    assert "cannot import 'conformance': no module named 'conformance' on sys.path" in stderr
    assert "--app-dir %s" % tmp_path.parent in stderr
    assert "Traceback" not in stderr


def test_a_module_without_an_application_says_what_was_tried(tmp_path):
    (tmp_path / "emptymod.py").write_text("VALUE = 1\n")
    status, stderr = run_in(tmp_path, ["emptymod", "--bind", "127.0.0.1:0"])
    assert status == 1
    assert ("module 'emptymod' imports but has none of the applications tried: emptymod.asgi:application, "
            "emptymod.wsgi:application, emptymod:application, emptymod:app, emptymod.main:app") in stderr
    assert "sys.path" not in stderr


def test_a_missing_submodule_names_the_parent_that_was_found(tmp_path):
    (tmp_path / "emptymod.py").write_text("VALUE = 1\n")
    status, stderr = run_in(tmp_path, ["emptymod.sub:app", "--bind", "127.0.0.1:0"])
    assert status == 1
    assert "cannot import 'emptymod': " not in stderr
    assert ("cannot import 'emptymod.sub': 'emptymod' (from %s) imports but has no module 'sub'"
            % (tmp_path / "emptymod.py")) in stderr


# ------------------------------------------------------------ item 17

def lookups_of(text):
    return re.findall(r"MODULE(?:\.\w+)?:\w+", text)


def test_help_readme_and_discovery_list_the_same_lookups(tmp_path):
    usage = subprocess.run([BINARY, "--help"], capture_output=True, text=True, timeout=10).stdout
    help_lookups = lookups_of(" ".join(usage.split("options:")[0].split()))
    assert help_lookups == ["MODULE.asgi:application", "MODULE.wsgi:application", "MODULE:application",
                            "MODULE:app", "MODULE.main:app"]
    readme = (REPO / "README.md").read_text()
    para = next(p for p in readme.split("\n\n") if "A bare `MODULE` is looked up as" in p)
    assert lookups_of(para.replace("`", "")) == help_lookups
    # What discovery tries, in its own error line.
    (tmp_path / "MODULE.py").write_text("")
    _, stderr = run_in(tmp_path, ["MODULE", "--bind", "127.0.0.1:0"])
    assert lookups_of(stderr.split("tried: ", 1)[1].splitlines()[0]) == help_lookups


def test_every_flag_of_help_is_in_the_readme_flag_table():
    """The README's flag table is where a user looks a flag up: each flag
    --help lists has a row (or is named in one), --metrics-bind and
    --metrics-path included (issue 27 item 20)."""
    usage = subprocess.run([BINARY, "--help"], capture_output=True, text=True, timeout=10).stdout
    flags = re.findall(r"^  (?:-\w, )?(--[a-z0-9-]+)", usage.split("options:", 1)[1], re.M)
    assert "--metrics-bind" in flags and "--workers" in flags, flags
    readme = (REPO / "README.md").read_text()
    table = "\n".join(line for line in readme.splitlines() if line.startswith("| `"))
    missing = [f for f in flags if f not in ("--help", "--version")
               and not re.search(re.escape(f) + r"(?![\w-])", table)]
    assert missing == [], missing

def test_banner_of_an_asgi_only_server_has_no_pool(start_server):
    server = start_server("asgi_only:app", workers=None)
    assert "blocking-threads" not in server.banner and "elastic" not in server.banner
    assert "(default topology: 1 worker)" in server.banner


def test_readme_realtime_snippet_defines_every_name_it_uses():
    import ast
    import builtins

    readme = (REPO / "README.md").read_text()
    code = readme.split("```python\n# views.py", 1)[1].split("```", 1)[0]
    tree = ast.parse("# views.py" + code)
    defined = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
            defined.update(a.arg for a in node.args.args)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assert used <= defined, used - defined
    # Every view that names a per-user channel is for signed-in users only.
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        if "user_" in ast.unparse(fn):
            assert "login_required" in [ast.unparse(d) for d in fn.decorator_list], fn.name


# ---------------------------------------------------- application factories

def get_json(server, path="/"):
    response = request(server.port, "GET", path)
    assert response.status == 200, (response.status, response.body)
    return json.loads(response.body)


def test_gunicorn_factory_spec_calls_it_with_literal_arguments(start_server):
    """gunicorn's MODULE:ATTR(...) (issue 27 item 16): was 'module has no
    attribute "create_app()"'."""
    server = start_server("factories:create_app()")
    seen = get_json(server)
    assert (seen["name"], seen["n"], seen["extra"], seen["built"]) == ("default", 1, None, 1), seen
    server = start_server("factories:create_app('prod', n=2, extra={'k': [1, (2, 3)], 'on': True})", workers=2)
    seen = get_json(server)
    assert (seen["name"], seen["n"], seen["extra"]) == ("prod", 2, {"k": [1, [2, 3]], "on": True}), seen
    assert seen["built"] == 1                 # once per worker, not per request
    assert "mounts=/=factories:create_app('prod', n=2" in server.banner
    server = start_server("factories:settings.build()")
    assert get_json(server)["name"] == "from settings"


def test_uvicorn_factory_flag_calls_attr_with_no_arguments(start_server):
    """uvicorn's and Granian's --factory (M0_FACTORY): ATTR() is served, its
    protocol detected from what it returned (here Starlette: ASGI)."""
    server = start_server("factories:make_asgi", "--factory")
    seen = get_json(server)
    assert seen["asgi"] is True
    assert "asgi" in server.stderr.wait_for(re.compile(r"worker booted.*"), 10).group(0)
    server = start_server("factories:create_app", env={"M0_FACTORY": "1"})
    assert get_json(server)["name"] == "default"


def test_factories_in_mounts(start_server):
    """--mount PREFIX=SPEC takes a factory too, and M0_MOUNTS keeps a comma
    inside a call's parentheses or quotes within its item."""
    server = start_server("conformance:application", "--mount", "/api=factories:make_asgi()",
                          "--mount", "/f=factories:create_app('mounted', n=5)")
    assert get_json(server, "/api/")["root_path"] == "/api"
    assert get_json(server, "/f/")["name"] == "mounted"
    server = start_server("conformance:application",
                          env={"M0_MOUNTS": "/a=factories:create_app('x,y', n=3), /b=factories:make_asgi()"})
    seen = get_json(server, "/a/")
    assert (seen["name"], seen["n"]) == ("x,y", 3), seen
    assert get_json(server, "/b/")["asgi"] is True


def test_a_bad_factory_spec_is_one_clear_line():
    cases = [
        ("factories:create_app(os.getcwd())", "the arguments of create_app() must be literals"),
        ("factories:create_app(*['a'])", "the arguments of create_app() must be literals"),
        ("factories:create_app(", "is not an attribute name or a call"),
        ("factories:create_app()()", "is not an attribute name or a call"),
        ("factories:create_app(nope=1)", "create_app() got an unexpected keyword argument 'nope'"),
        ("factories:missing()", "module 'factories' has no attribute 'missing'"),
        ("factories:returns_none()", "returned None, which is not an application"),
        ("factories:handler", "factories:handler takes no arguments, so it is no application: if it is an "
                              "application factory, call it: 'factories:handler()' (or --factory)"),
    ]
    for spec, want in cases:
        status, stderr = run_to_exit([spec, "--bind", "127.0.0.1:0", "--app-dir", str(REPO / "tests" / "apps")])
        assert status == 1, (spec, status, stderr)
        line = next((l for l in stderr.splitlines() if "cannot load the application" in l), stderr)
        assert want in line, (spec, line)
        assert "Traceback" not in stderr, (spec, stderr)
    # An error inside the factory is the application's: its traceback.
    status, stderr = run_to_exit(["factories:broken()", "--bind", "127.0.0.1:0",
                                  "--app-dir", str(REPO / "tests" / "apps")])
    assert status == 1 and "Traceback" in stderr and "the factory failed on purpose" in stderr, stderr


# ------------------------------------------- a virtualenv of another Python

PYENV_PYTHON = "/root/.pyenv/versions/3.11.7/bin/python3"


def test_a_virtualenv_of_the_same_version_from_another_python_exits_78(tmp_path):
    """A venv of the embedded version made from another build of it (pyenv's
    3.11 beside Debian's) passed the version check and every worker died on
    its first compiled module ("No module named '_socket'"): its home leads
    CPython to that build's standard library. One line, exit 78, as for a
    venv of another version (issue 27 item 18)."""
    import os
    import pytest
    if not os.access(PYENV_PYTHON, os.X_OK):
        pytest.skip("%s is not installed" % PYENV_PYTHON)
    built_for = subprocess.run([BINARY, "--version"], capture_output=True, text=True, timeout=10).stdout
    built_for = built_for.splitlines()[0]      # the second line says how libpython is linked
    embedded = os.path.realpath(built_for.rsplit("built for ", 1)[1].rstrip(")"))
    theirs = subprocess.run([PYENV_PYTHON, "-c", "import sys; print('%d.%d' % sys.version_info[:2], sys.prefix)"],
                            capture_output=True, text=True, timeout=30).stdout.split()
    if theirs[0] != "%d.%d" % sys.version_info[:2] or os.path.realpath(theirs[1]) == os.path.dirname(
            os.path.dirname(embedded)):
        pytest.skip("%s is not another build of the embedded Python %d.%d" % ((PYENV_PYTHON,) + sys.version_info[:2]))
    venv = tmp_path / "pyenv-venv"
    subprocess.run([PYENV_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    app = tmp_path / "sockapp.py"
    app.write_text("import socket\n\ndef application(environ, start_response):\n"
                   "    start_response('200 OK', [])\n    return [b'ok']\n")
    status, stderr = run_to_exit(["sockapp", "--bind", "127.0.0.1:0", "--app-dir", str(tmp_path)],
                                 env={"VIRTUAL_ENV": str(venv)})
    lines = stderr.strip().splitlines()
    assert status == 78 and len(lines) == 1, (status, stderr)
    assert lines[0].startswith("m0serve: error: VIRTUAL_ENV=%s was made from another Python of the same version (%s"
                               % (venv, theirs[1])), lines[0]
    assert "but this m0serve embeds %s" % built_for.rsplit("built for ", 1)[1].rstrip(")\n") in lines[0], lines[0]
    assert "pip install" in lines[0], lines[0]
    # A venv of the embedded interpreter itself, through a symlink to it, serves.
    link = tmp_path / "bin"
    link.mkdir()
    (link / "python3").symlink_to(embedded)
    own = tmp_path / "own-venv"
    subprocess.run([str(link / "python3"), "-m", "venv", "--without-pip", str(own)], check=True, timeout=120)
    server = Server("sockapp", app_dir=tmp_path, env={"VIRTUAL_ENV": str(own)})
    try:
        server.start()
        assert request(server.port, "GET", "/").body == b"ok"
    finally:
        server.stop()
