# m0serve — one non-recursive GNU Makefile.
#
#   make deps        install the Debian packages the build, tests, demo and bench need
#   make venv        .venv: the e2e suite's and the demo's Python packages (requirements/test.txt)
#   make bench-venv  .venv-bench: the benchmark peers (requirements/bench.txt)
#   make             build ./m0serve (release, -O2)
#   make layers      the layering of src/ (tools/layers.py; part of make test)
#   make test        the layering, C unit tests (cmocka), a short fuzz run, pytest end-to-end suite (in .venv), smoke-deploy
#   make smoke-broker  two m0serve hosts on one Redis (part of make test)
#   make smoke-metrics the Prometheus endpoint: promtool, a real Prometheus scraping two workers (part of make test)
#   make smoke-grip    django-eventstream/gripcontrol over GRIP, no Pushpin (part of make test)
#   make smoke-deploy pip install . in a fresh venv, the systemd unit, nginx in front
#   make smoke-threads the free-threaded build: Python in parallel in one worker (make python-ft once; part of make test)
#   make e2e-debian  the e2e suite against Debian's python3-django/-flask instead
#   make sabotage    undo each guard of tests/sabotage/*.toml in a scratch worktree; its tests must fail
#   make sabotage-list  one line per mutation: its name, the guard, its tests
#   make fuzz        libFuzzer drivers build/fuzz/fuzz_* (clang, ASan+UBSan)
#   make fuzz-smoke  each driver FUZZ_SECONDS (30) over its corpus; fails on a crash
#   make fuzz-run FUZZ=http FUZZ_SECONDS=600   one driver, longer, by hand
#   make sanitize    build/sanitize/m0serve with ASan+UBSan; run the e2e suite
#                    against it with: M0SERVE=build/sanitize/m0serve make e2e
#   make demo        serve the Django example on http://127.0.0.1:8000
#   make hybrid-demo Django at /, Flask at /flask, static files at /static (examples/hybrid)
#   make bench       hello-world benchmark against gunicorn, uWSGI and nginx
#   make bench-NAME  bench/NAME.sh (asgi broker grants grip mixed realtime static stream threads ws)
#   make bench-tools build/bench/hold_client and fanout_floor (bench/realtime.sh, bench/ws.sh)
#   make install PREFIX=/usr/local
#   make python-ft   a free-threaded CPython in build/python/ft-<sha12>/prefix (python-gil: with the GIL)
#   make PYTHON=/path/to/python3.14t   m0serve for another interpreter (build/release-<its tag>)

# The interpreter m0serve embeds: any CPython 3.10 or later, with the GIL or
# free-threaded (make PYTHON=/opt/py/bin/python3.14t). Everything else is
# asked of it: its python-config, LIBDIR (an rpath to it unless a system
# library directory), whether it is free-threaded; its objects go to a build
# directory of its own.
PYTHON_DEFAULT := /usr/bin/python3
PYTHON   ?= $(PYTHON_DEFAULT)
# One run of $(PYTHON) tools/pyinfo.py, memoized: exe ldversion libdir
# rpath(0/1) gil_disabled(0/1) build-tag python-config.
PY_QUERY = $(eval PY_QUERY := $(shell $(PYTHON) tools/pyinfo.py $(PYTHON) 2>/dev/null))$(PY_QUERY)
PY_EXE    = $(word 1,$(PY_QUERY))
PY_LIBDIR = $(word 3,$(PY_QUERY))
PY_RPATH  = $(if $(filter 1,$(word 4,$(PY_QUERY))),-Wl$(comma)-rpath$(comma)$(PY_LIBDIR))
comma := ,
ifeq ($(PYTHON),$(PYTHON_DEFAULT))
PYTHON_CONFIG ?= $(PYTHON)-config
M0_PYTHON_EXE := $(PYTHON)
BUILD    ?= build/release
else
ifeq ($(words $(PY_QUERY)),7)
PYTHON_CONFIG ?= $(word 7,$(PY_QUERY))
M0_PYTHON_EXE := $(PY_EXE)
BUILD    ?= build/release-$(word 6,$(PY_QUERY))
else ifneq ($(filter-out deps clean python-ft python-gil,$(or $(MAKECMDGOALS),all)),)
$(error PYTHON=$(PYTHON): "$(PYTHON) tools/pyinfo.py" failed: not a Python 3 interpreter that runs here?)
endif
endif
PREFIX   ?= /usr/local
VERSION  := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' python/m0serve/__init__.py)
LLHTTP_SRC ?= /usr/share/llhttp
LLHTTP_INC ?= /usr/share/include/llhttp

CC       ?= cc
STD      := -std=gnu11
WARN     := -Wall -Wextra -Werror -Wstrict-prototypes -Wmissing-prototypes \
            -Wundef -Wshadow -Wformat=2 -Wnull-dereference
OPT      ?= -O2 -g
PY_CFLAGS  = $(shell $(PYTHON_CONFIG) --includes 2>/dev/null)
PY_LDFLAGS = $(shell $(PYTHON_CONFIG) --embed --ldflags 2>/dev/null)
# How libpython is linked (issue 29). LINK=auto links it the way $(PYTHON)'s
# own executable is: Debian's /usr/bin/python3.11 carries the static, non-PIC
# libpython3.11.a and is not a PIE, and runs Python 8-20% faster than the
# same code through libpython3.11.so (docs/performance.md, "The interpreter
# link"); so m0serve does the same: the whole archive (extension modules
# may call any of its functions), -no-pie when python3 is not a PIE, its
# C API exported to extension modules (what python3's -Wl,-E does, but only
# Py*/_Py*: tools/libpython.dynlist says why) and the libraries its
# built-in modules need. An interpreter that maps
# libpython*.so itself (a --enable-shared build: make python-ft's, pyenv's,
# uv's), or one whose archive is not installed, gets the shared library;
# LINK=shared asks for it, LINK=static for the archive. tools/pyinfo.py
# decides: "mode archive pie why flags..." (memoized, run only to link).
LINK ?= auto
PY_LINK = $(eval PY_LINK := $(shell $(PYTHON) tools/pyinfo.py $(PYTHON) --link $(LINK) 2>&1))$(PY_LINK)
PY_LINK_MODE = $(word 1,$(PY_LINK))
PY_ARCHIVE   = $(word 2,$(PY_LINK))
PY_NOPIE     = $(if $(filter static,$(PY_LINK_MODE)),$(if $(filter 0,$(word 3,$(PY_LINK))),-no-pie))
PY_LINK_LIBS = $(if $(filter static,$(PY_LINK_MODE)),-Wl$(comma)--dynamic-list=tools/libpython.dynlist \
               -Wl$(comma)--whole-archive $(PY_ARCHIVE) \
               -Wl$(comma)--no-whole-archive $(wordlist 5,$(words $(PY_LINK)),$(PY_LINK)),$(PY_LDFLAGS))
PY_NOPIE_CC  = $(if $(PY_NOPIE),-fno-pie)
PY_LINK_RPATH = $(if $(filter static,$(PY_LINK_MODE)),,$(PY_RPATH))
PY_LINK_WHY  = $(word 4,$(PY_LINK))
# One line, for the build's output and m0serve --version.
PY_LINK_SAY  = $(if $(filter static,$(PY_LINK_MODE)),static $(notdir $(PY_ARCHIVE))$(if $(PY_NOPIE),$(comma) non-PIE),shared \
               $(patsubst -l%,lib%.so,$(firstword $(filter -lpython%,$(PY_LDFLAGS)))))$(comma) $(PY_LINK_WHY_$(PY_LINK_WHY))
PY_LINK_WHY_as-python     = as $(PY_EXE_REAL) is linked
PY_LINK_WHY_python-shared = as $(PY_EXE_REAL) is linked (it loads libpython*.so)
PY_LINK_WHY_no-archive    = $(PY_EXE_REAL) is linked statically but its $(notdir $(PY_ARCHIVE)) is not installed
PY_LINK_WHY_asked         = LINK=$(LINK)
PY_EXE_REAL = $(realpath $(M0_PYTHON_EXE))
DEFS     := -DM0_VERSION='"$(VERSION)"' -DM0_PYTHONDIR='"$(PREFIX)/share/m0serve/python"' \
            -DM0_PYTHON_EXE='"$(M0_PYTHON_EXE)"' -D_GNU_SOURCE
CPPFLAGS := -Iinclude -I$(LLHTTP_INC) $(DEFS)
LDLIBS    = $(PY_LINK_LIBS) -lhiredis -lnats -lssl -lcrypto -ljansson -lpthread

SRCS     := $(wildcard src/*/*.c)
# Sources are in one folder per layer (docs/architecture.md; make layers).
# Modules with no Python in them: linked into the C unit tests and the fuzzers.
PURE     := src/base/buf.c src/base/log.c src/base/log_text.c src/base/timer.c src/proto/accesslog.c src/proto/base64.c src/proto/body.c src/proto/broker_reply.c src/proto/commit.c \
            src/proto/epcp.c src/proto/grip.c src/proto/grip_item.c src/proto/http.c src/proto/jwt.c src/proto/natsjs.c src/proto/origin.c src/proto/percent.c src/proto/proxy.c src/proto/pubreq.c \
            src/proto/request.c src/proto/response.c src/proto/sse.c src/proto/woh.c src/proto/ws.c src/core/config.c src/core/grant.c src/core/keyfile.c \
            src/core/metrics_text.c src/core/notify.c src/core/target.c src/core/tls_server.c src/event/job.c src/event/lane.c src/event/loop.c \
            src/realtime/broker_url.c src/realtime/bus.c src/realtime/order.c src/realtime/registry.c src/realtime/rt.c src/http/health_json.c \
            src/core/fork.c src/realtime/presence.c src/realtime/presence_announce.c \
            src/http/mime.c src/http/static.c src/http/static_rules.c src/master/cli.c src/master/cli_hint.c
PURE     += src/realtime/broker_seen.c
LLHTTP   := api.c http.c llhttp.c

OBJS     := $(SRCS:src/%.c=$(BUILD)/%.o)
LLOBJS   := $(LLHTTP:%.c=$(BUILD)/llhttp/%.o)

ifeq ($(V),)
Q := @
else
Q :=
endif

.SECONDARY:
.PHONY: FORCE all deps venv bench-venv bench-tools test layers unit e2e e2e-sanitize e2e-debian sanitize demo demo-fastapi bench install clean \
        smoke-core smoke-pool smoke-django-realtime smoke-asgi smoke-broker smoke-streaming fuzz fuzz-smoke fuzz-run fuzz-seeds fuzz-merge smoke-hybrid hybrid-demo smoke-django-realtime-ws smoke-chat-browser smoke-fastapi-browser smoke-deploy smoke-metrics smoke-grip smoke-grip-browser smoke-woh-browser smoke-grants smoke-grants-browser smoke-tls smoke-tls-browser smoke-room-browser \
        python-ft python-gil tsan smoke-threads smoke-threads-run sabotage sabotage-list sabotage-fast sabotage-check print-build

all: m0serve

# Replace by rename: a running ./m0serve never blocks a rebuild. Compared,
# not dated: ./m0serve is the build of the PYTHON of the last make, and
# another interpreter's build may be the older file.
m0serve: $(BUILD)/m0serve FORCE
	$(Q)cmp -s $< $@ || { cp $< $@.tmp && mv -f $@.tmp $@; }

$(BUILD)/m0serve: $(OBJS) $(LLOBJS) $(BUILD)/link.txt tools/libpython.dynlist
	@echo "  LD      $@ (libpython: $(PY_LINK_SAY))"
	$(Q)$(CC) $(LDFLAGS) $(PY_NOPIE) -o $@ $(OBJS) $(LLOBJS) $(LDLIBS) $(PY_LINK_RPATH)

# The link decision, rewritten only when it changes (so a LINK= or an
# interpreter change relinks, and --version's line is recompiled).
$(BUILD)/link.txt: FORCE
	@mkdir -p $(@D)
	$(Q)case "$(PY_LINK_MODE)" in static|shared) ;; *) echo "m0serve: $(PY_LINK)" >&2; exit 2 ;; esac
	$(Q)echo '$(PY_LINK_SAY)' | cmp -s - $@ || echo '$(PY_LINK_SAY)' > $@
# Our objects are compiled as the executable is linked: -fno-pie for a
# non-PIE one (0.5% fewer instructions per hello request, callgrind).
$(OBJS) $(LLOBJS): $(BUILD)/link.txt
$(BUILD)/master/main.o: M0_LINK_DEF = -DM0_PY_LINK='"$(PY_LINK_SAY)"'

FORCE:

$(BUILD)/%.o: src/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(STD) $(WARN) $(OPT) $(PY_NOPIE_CC) $(M0_CFLAGS) $(CFLAGS) $(PY_CFLAGS) $(CPPFLAGS) $(M0_LINK_DEF) -MMD -MP -c -o $@ $<

# Vendored parser: compiled with its own relaxed flags, never our -Werror.
# Strict mode: CRLF after chunk data, no control bytes in the target
# (request-smuggling primitives otherwise; RFC 9112 §7.1, §3.2).
LLHTTP_FLAGS := -DLLHTTP_STRICT_MODE=1
$(BUILD)/llhttp/%.o: $(LLHTTP_SRC)/%.c
	@mkdir -p $(@D)
	@echo "  CC      llhttp/$(<F)"
	$(Q)$(CC) -O2 -g -w $(PY_NOPIE_CC) $(LLHTTP_FLAGS) $(M0_CFLAGS) -I$(LLHTTP_INC) -c -o $@ $<

-include $(OBJS:.o=.d)

# ---------------------------------------------------------------- sanitize
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
sanitize:
	$(Q)$(MAKE) --no-print-directory BUILD=build/sanitize OPT="-O1 -g" \
	    M0_CFLAGS="$(SAN)" LDFLAGS="$(SAN)" build/sanitize/m0serve

# ThreadSanitizer, for the free-threaded build above all (make tsan
# PYTHON=$$(cat build/python/ft.python)): a build directory of its own;
# run the e2e harness with M0SERVE=<it> and
# TSAN_OPTIONS="suppressions=$(CURDIR)/tools/tsan.supp" (what CPython's own
# uninstrumented synchronization makes TSAN report; the file says why).
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
TSAN_BUILD  = build/tsan$(if $(filter-out $(PYTHON_DEFAULT),$(PYTHON)),-$(word 6,$(PY_QUERY)))
tsan:
	$(Q)$(MAKE) --no-print-directory BUILD=$(TSAN_BUILD) OPT="-O1 -g" \
	    M0_CFLAGS="$(TSAN_FLAGS)" LDFLAGS="$(TSAN_FLAGS)" $(TSAN_BUILD)/m0serve

# ------------------------------------------------------------------- tests
UNIT_TESTS := $(patsubst tests/unit/%.c,build/unit/%,$(wildcard tests/unit/test_*.c))
UNIT_OBJS  := $(PURE:src/%.c=build/unit/obj/%.o) $(LLHTTP:%.c=build/unit/llhttp/%.o) build/unit/obj/cases.o

build/unit/obj/%.o: src/%.c
	@mkdir -p $(@D)
	@echo "  CC      $< (unit)"
	$(Q)$(CC) $(STD) $(WARN) -O1 -g $(SAN) $(CPPFLAGS) -MMD -MP -c -o $@ $<

build/unit/obj/cases.o: tests/unit/cases.c tests/unit/cases.h
	@mkdir -p $(@D)
	$(Q)$(CC) $(STD) $(WARN) -Wno-missing-prototypes -O1 -g $(SAN) -Itests/unit -c -o $@ $<

build/unit/llhttp/%.o: $(LLHTTP_SRC)/%.c
	@mkdir -p $(@D)
	$(Q)$(CC) -O1 -g -w $(LLHTTP_FLAGS) $(SAN) -I$(LLHTTP_INC) -c -o $@ $<

build/unit/%: tests/unit/%.c $(UNIT_OBJS)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(STD) $(WARN) -Wno-missing-prototypes -O1 -g $(SAN) $(CPPFLAGS) -Itests/unit -o $@ $^ -lcmocka -lhiredis -lssl -lcrypto -ljansson

# The serving core's unit test (conn, h1, hold, wshold over a socketpair):
# the http layer's files with the Python entry points stubbed.
SERVE_CORE := src/core/metrics.c src/http/conn.c src/http/conn_slots.c src/http/endpoint.c src/http/grip_hold.c \
              src/http/grip_hold_link.c \
              src/http/h1.c src/http/hold.c src/http/loops.c src/http/server.c src/http/static_http.c \
              src/http/wsframes.c src/http/wshold.c src/http/wshold_mailbox.c src/http/wshold_open.c src/http/wshold_woh.c
build/unit/test_serve: tests/unit/test_serve.c tests/unit/serve_stubs.c $(UNIT_OBJS) $(SERVE_CORE:src/%.c=build/unit/obj/%.o)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(STD) $(WARN) -Wno-missing-prototypes -O1 -g $(SAN) $(CPPFLAGS) -Itests/unit -o $@ $^ -lcmocka -lhiredis -lssl -lcrypto -ljansson

-include $(wildcard build/unit/obj/*/*.d)

# The folders of src/ are the layers (docs/architecture.md): no file includes
# a header of a layer above its own, and files reach each other (includes,
# m0_* names) only within one module. tools/layers.py holds the order.
layers:
	$(Q)$(PYTHON) tools/layers.py . -v

unit: $(UNIT_TESTS)
	$(Q)set -e; for t in $(UNIT_TESTS); do echo "  UNIT    $$t"; (cd tests/unit && ../../$$t); done

# The WebSocket decoder's libFuzzer driver (tests/fuzz/fuzz_ws.c, clang).
# The suite runs with the venv's python; tests/e2e/serverproc.py hands the
# venv to every m0serve it starts (VIRTUAL_ENV), so the served apps import
# the venv's Django and Flask.
E2E_ARGS ?=
e2e: m0serve venv
	$(Q)$(VPY) -m pytest tests/e2e -q $(E2E_ARGS)

# The end-to-end suite against the ASan+UBSan binary (leak checks off: the
# embedded interpreter keeps its objects until exit by design).
e2e-sanitize: sanitize venv
	$(Q)M0SERVE=$(CURDIR)/build/sanitize/m0serve ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1 $(VPY) -m pytest tests/e2e -q $(E2E_ARGS)

# Second leg, not part of `make test`: the same suite run by Debian's
# python3-pytest against Debian's python3-django (3.2) and python3-flask (2.2),
# no virtualenv.
DEB_PKGS_DEBIAN_LEG := python3-pytest python3-django python3-flask python3-requests
e2e-debian: deps
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="$(DEB_PKGS_DEBIAN_LEG)"
	$(Q)$(MAKE) --no-print-directory m0serve
	$(Q)env -u VIRTUAL_ENV M0_E2E_LEG=debian $(PYTHON) -m pytest tests/e2e -q $(E2E_ARGS)

# make test runs every test once: the e2e suite but for the two files
# smoke-deploy runs, then smoke-deploy.
SMOKE_DEPLOY_E2E := tests/e2e/test_proxy_headers.py tests/e2e/test_lifecycle.py
test: deps
	$(Q)$(MAKE) --no-print-directory layers
	$(Q)$(MAKE) --no-print-directory sabotage-check
	$(Q)$(MAKE) --no-print-directory m0serve unit
	$(Q)$(MAKE) --no-print-directory fuzz-smoke
	$(Q)$(MAKE) --no-print-directory e2e E2E_ARGS="$(E2E_ARGS) $(SMOKE_DEPLOY_E2E:%=--ignore=%)"
	$(Q)$(MAKE) --no-print-directory smoke-deploy
	$(Q)if [ -n "$(PYTHON_TARBALL)" ] || [ -f build/python/ft.python ] || \
	    ls "$(PYTHON_SHARED)"/Python-*.tar.* >/dev/null 2>&1; then \
	    $(MAKE) --no-print-directory smoke-threads; \
	else \
	    echo "  SKIP    smoke-threads: no CPython source tarball in $(PYTHON_SHARED) to build a free-threaded"; \
	    echo "          interpreter from (make smoke-threads PYTHON_TARBALL=path/Python-3.13.X.tar.xz)"; \
	fi
	$(Q)$(MAKE) --no-print-directory sabotage-fast SABOTAGE_ARGS="--no-baseline $(SABOTAGE_ARGS)"

# The free-threaded smoke (issue 17; make test runs it when there is a CPython
# source tarball to build from — ../shared/python beside a checkout of the
# project, or PYTHON_TARBALL — and says SKIP otherwise): make python-ft once per clone (cached
# by the tarball's hash), m0serve built for it in its own build directory,
# a virtualenv of it with requirements/threads.txt (only what the test
# needs, all installable on a free-threaded CPython), tests/e2e/test_threads.py
# and tests/e2e/test_freethreaded_build.py (M0_PYTHON_FT: the interpreter).
THREADS_VENV := build/venv-threads
smoke-threads:
	$(Q)$(MAKE) --no-print-directory python-ft
	$(Q)$(MAKE) --no-print-directory PYTHON="$$(cat build/python/ft.python)" smoke-threads-run

smoke-threads-run: $(BUILD)/m0serve
	$(call mkvenv,$(THREADS_VENV),requirements/threads.txt)
	$(Q)M0SERVE=$(CURDIR)/$(BUILD)/m0serve M0_PYTHON_FT=$(PYTHON) PY=$(THREADS_VENV)/bin/python smoke/threads.sh

smoke-core: m0serve venv
	$(Q)PY=$(VPY) smoke/core.sh

smoke-pool: m0serve venv
	$(Q)PY=$(VPY) smoke/pool.sh

smoke-django-realtime: m0serve venv
	$(Q)PY=$(VPY) smoke/django-realtime.sh

smoke-asgi: m0serve venv
	$(Q)PY=$(VPY) smoke/asgi.sh

smoke-streaming: m0serve venv
	$(Q)PY=$(VPY) smoke/streaming.sh

# Two m0serve "hosts" on one redis-server the test starts itself (make test
# runs it as part of e2e).
smoke-broker: m0serve venv
	$(Q)PY=$(VPY) smoke/broker.sh

# The metrics endpoint (issue 21): promtool check metrics, and Debian's
# prometheus started by the test on an ephemeral port, scraping two workers
# (make test runs it as part of e2e).
smoke-metrics: m0serve venv
	$(Q)PY=$(VPY) smoke/metrics.sh

# ---------------------------------------------------------------- sabotage
# Tests that prove themselves (tests/sabotage/README.md): each mutation of
# the table undoes one guard in a scratch worktree (build/sabotage/wt, never
# the checkout), rebuilds what changed, runs the tests it names and reports
# caught or SURVIVED; a survivor, a stale edit or a broken build fails.
# make test runs the mutations tagged fast, without the baseline run (the
# suite it ran first is the baseline): a sample of a few per table file and
# per issue, each caught in about 2.5 s or less, about 2 minutes in all (a
# budget: make test must end within CI's 25 minutes); sabotage-check below
# keeps the whole table applying, make sabotage runs all of it;
# mutations of --threads code run when make smoke-threads has built the
# free-threaded interpreter and its venv (else SKIPPED). SABOTAGE_ARGS:
# --only NAME,... --keep --no-baseline.
SABOTAGE_ARGS ?=
sabotage: m0serve venv
	$(Q)$(VPY) tools/sabotage.py $(SABOTAGE_ARGS)

sabotage-fast: m0serve venv
	$(Q)$(VPY) tools/sabotage.py --tag fast $(SABOTAGE_ARGS)

# Every mutation of the table still applies (read-only, seconds): make test
# checks the whole table here and runs only the fast subset at its end.
sabotage-check:
	$(Q)$(PYTHON) tools/sabotage.py --check

sabotage-list:
	$(Q)$(PYTHON) tools/sabotage.py --list

# The build directory of $(PYTHON) (tools/sabotage.py builds the free-threaded
# binary of its scratch tree there).
print-build:
	@echo $(BUILD)

# -------------------------------------------------------------------- fuzz
# libFuzzer drivers (tests/fuzz/README.md) over the pure modules only, built
# with clang: the modules and llhttp get coverage instrumentation
# (fuzzer-no-link), the drivers link libFuzzer's main. The linker takes from
# the archive only the modules a driver calls. Work corpora, crash artifacts
# and logs stay under build/fuzz; the committed corpora are only read, except
# by fuzz-merge.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ_TIMEOUT ?= 10
FUZZ         ?= http
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# clang's -Wformat=2 also flags the va_list vsnprintf in log.c, which gcc accepts.
FUZZ_WARN    := $(WARN) -Wno-format-nonliteral
FUZZ_DRIVERS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS    := $(FUZZ_DRIVERS:%=build/fuzz/fuzz_%)
FUZZ_OBJS    := $(PURE:src/%.c=build/fuzz/obj/%.o) $(LLHTTP:%.c=build/fuzz/llhttp/%.o)

fuzz: $(FUZZ_BINS)

build/fuzz/obj/%.o: src/%.c
	@mkdir -p $(@D)
	@echo "  CC      $< (fuzz)"
	$(Q)$(FUZZ_CC) $(STD) $(FUZZ_WARN) -O1 -g -fsanitize=fuzzer-no-link $(FUZZ_SAN) $(CPPFLAGS) -MMD -MP -c -o $@ $<

build/fuzz/llhttp/%.o: $(LLHTTP_SRC)/%.c
	@mkdir -p $(@D)
	$(Q)$(FUZZ_CC) -O1 -g -w $(LLHTTP_FLAGS) -fsanitize=fuzzer-no-link $(FUZZ_SAN) -I$(LLHTTP_INC) -c -o $@ $<

build/fuzz/libm0pure.a: $(FUZZ_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^

build/fuzz/drv/%.o: tests/fuzz/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(FUZZ_CC) $(STD) $(FUZZ_WARN) -O1 -g -fsanitize=fuzzer-no-link $(FUZZ_SAN) $(CPPFLAGS) -MMD -MP -c -o $@ $<

build/fuzz/fuzz_%: build/fuzz/drv/fuzz_%.o build/fuzz/libm0pure.a
	@echo "  LD      $@"
	$(Q)$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $^ -lhiredis -lssl -lcrypto -ljansson -lpthread

-include $(wildcard build/fuzz/obj/*/*.d build/fuzz/drv/*.d)

# One driver: new inputs go to build/fuzz/work/NAME (listed first), the
# committed corpus is read; a crash leaves build/fuzz/artifacts/NAME/crash-*.
FUZZ_CMD = mkdir -p build/fuzz/work/$(1) build/fuzz/artifacts/$(1) && \
	build/fuzz/fuzz_$(1) -max_total_time=$(2) -timeout=$(FUZZ_TIMEOUT) -rss_limit_mb=2048 \
	    -print_final_stats=1 -artifact_prefix=build/fuzz/artifacts/$(1)/ \
	    $$(test -f tests/fuzz/$(1).dict && echo -dict=tests/fuzz/$(1).dict) \
	    build/fuzz/work/$(1) tests/fuzz/corpus/$(1) $$(test -d build/fuzz/seeds/$(1) && echo build/fuzz/seeds/$(1))

fuzz-smoke: $(FUZZ_BINS) fuzz-seeds
	$(Q)set -e; for d in $(FUZZ_DRIVERS); do \
	    echo "  FUZZ    $$d ($(FUZZ_SECONDS)s)"; \
	    $(call FUZZ_CMD,$$d,$(FUZZ_SECONDS)) > build/fuzz/$$d.log 2>&1 || { tail -n 60 build/fuzz/$$d.log; exit 1; }; \
	    grep -E '#[0-9]+[[:space:]]+DONE' build/fuzz/$$d.log | tail -n 1 | sed 's/^/          /'; \
	done

fuzz-run: build/fuzz/fuzz_$(FUZZ)
	$(Q)$(call FUZZ_CMD,$(FUZZ),$(FUZZ_SECONDS))

# The hand-written seeds (tests/fuzz/seeds.py), for fuzz-merge to fold in;
# fuzz-smoke makes them first and runs each driver over them too, so a seed
# file that no longer runs fails make test.
fuzz-seeds:
	$(Q)rm -rf build/fuzz/seeds && $(PYTHON) tests/fuzz/seeds.py build/fuzz/seeds

# Fold the seeds (if made) and what fuzz-run found into the committed
# corpus, minimized: -merge=1 keeps the smallest inputs that together cover
# every feature seen. Past FUZZ_CORPUS_MAX files, cap_corpus.py keeps a
# greedy cover of the coverage edges instead (tests/fuzz/README.md).
FUZZ_CORPUS_MAX ?= 199
fuzz-merge: build/fuzz/fuzz_$(FUZZ)
	$(Q)rm -rf build/fuzz/merge/$(FUZZ) build/fuzz/cap/$(FUZZ) build/fuzz/merge-$(FUZZ).ctl && \
	    mkdir -p build/fuzz/merge/$(FUZZ) \
	    build/fuzz/work/$(FUZZ) build/fuzz/artifacts/$(FUZZ) tests/fuzz/corpus/$(FUZZ)
	$(Q)build/fuzz/fuzz_$(FUZZ) -merge=1 -merge_control_file=build/fuzz/merge-$(FUZZ).ctl \
	    -artifact_prefix=build/fuzz/artifacts/$(FUZZ)/ \
	    build/fuzz/merge/$(FUZZ) tests/fuzz/corpus/$(FUZZ) build/fuzz/work/$(FUZZ) \
	    $(wildcard build/fuzz/seeds/$(FUZZ)) > build/fuzz/merge-$(FUZZ).log 2>&1 || \
	    { tail -n 40 build/fuzz/merge-$(FUZZ).log; exit 1; }
	$(Q)src=build/fuzz/merge/$(FUZZ); \
	if [ $$(ls $$src | wc -l) -gt $(FUZZ_CORPUS_MAX) ]; then \
	    $(PYTHON) tests/fuzz/cap_corpus.py build/fuzz/fuzz_$(FUZZ) build/fuzz/merge-$(FUZZ).ctl \
	        $(FUZZ_CORPUS_MAX) build/fuzz/cap/$(FUZZ) || exit 1; \
	    src=build/fuzz/cap/$(FUZZ); \
	fi; \
	[ -n "$$(ls $$src)" ] || { echo "fuzz-merge: nothing merged" >&2; exit 1; }; \
	rm -rf tests/fuzz/corpus/$(FUZZ) && cp -r $$src tests/fuzz/corpus/$(FUZZ)
	@echo "  MERGE   tests/fuzz/corpus/$(FUZZ): $$(ls tests/fuzz/corpus/$(FUZZ) | wc -l) files"


# Mounts and static files (issue 11): Django at /, Flask at /flask, static
# files at /static in one server (tests/e2e/hybridserver.py), one suite for
# each; part of `make test` through tests/e2e.
# GRIP (issue 19): django-eventstream, django-grip and gripcontrol against
# --grip-key-file/--grip-control, no Pushpin (make test runs it as part of e2e).
smoke-grip: m0serve venv
	$(Q)PY=$(VPY) smoke/grip.sh

# The django-eventstream project's page in headless Chromium receiving
# send_event's events through m0serve's GRIP holds (smoke/grip_browser.py);
# not part of `make test` (it installs Debian's chromium first).
smoke-grip-browser: deps
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="chromium"
	$(Q)$(MAKE) --no-print-directory m0serve venv
	$(Q)mkdir -p build && $(VPY) smoke/grip_browser.py --screenshot build/grip.png

# django-grip's WebSocket chat and echo views (tests/apps/gripws) in headless
# Chromium over --ws-over-http, a gripcontrol ws-message reaching the pages
# (smoke/woh_browser.py); not part of `make test` (it installs chromium).
smoke-woh-browser: deps
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="chromium"
	$(Q)$(MAKE) --no-print-directory m0serve venv
	$(Q)mkdir -p build && $(VPY) smoke/woh_browser.py --screenshot build/woh.png

# docs/realtime.md's page examples (history, who's here, grant refresh) as
# a Django project (tests/apps/roomproj) in headless Chromium
# (smoke/room_browser.py); not part of `make test` (it installs chromium).
smoke-room-browser: deps
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="chromium"
	$(Q)$(MAKE) --no-print-directory m0serve venv
	$(Q)$(VPY) smoke/room_browser.py

smoke-hybrid: m0serve venv
	$(Q)PY=$(VPY) smoke/hybrid.sh

# The demo's chat page in headless Chromium, driven over the DevTools
# protocol (smoke/chat_browser.py). Not part of `make test`: it installs
# Debian's chromium, a large package, first.
smoke-chat-browser: deps
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="chromium"
	$(Q)$(MAKE) --no-print-directory m0serve venv
	$(Q)mkdir -p build && $(VPY) smoke/chat_browser.py --screenshot build/chat.png

# The FastAPI example's page (JSON, a stream, a held SSE stream, a WebSocket)
# in headless Chromium (smoke/fastapi_browser.py); not part of `make test`,
# for the same reason.
smoke-fastapi-browser: deps
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="chromium"
	$(Q)$(MAKE) --no-print-directory m0serve venv
	$(Q)mkdir -p build && $(VPY) smoke/fastapi_browser.py --screenshot build/fastapi.png

# WebSocket holds (issue 10); part of `make test` through e2e.
smoke-django-realtime-ws: m0serve venv
	$(Q)PY=$(VPY) smoke/django-realtime-ws.sh
# Signed stream grants (issue 18); part of `make test` through e2e.
smoke-grants: m0serve venv
	$(Q)PY=$(VPY) smoke/grants.sh

smoke-tls: m0serve venv
	$(Q)PY=$(VPY) smoke/tls.sh

# EventSource and WebSockets over https:// and wss:// in headless Chromium
# (smoke/tls_browser.py); installs Debian's chromium first, like the other
# browser smokes.
smoke-tls-browser: deps
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="chromium"
	$(Q)$(MAKE) --no-print-directory m0serve venv
	$(Q)$(VPY) smoke/tls_browser.py

# A cross-origin EventSource with a grant in headless Chromium
# (smoke/grants_browser.py); not part of `make test`, like the other browser
# smokes: it installs Debian's chromium first.
smoke-grants-browser: deps
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="chromium"
	$(Q)$(MAKE) --no-print-directory m0serve venv
	$(Q)$(VPY) smoke/grants_browser.py

# Production (docs/deploy.md): pip install . into a fresh virtualenv by the
# README's own line (pip's cache is reused; skipped, saying so, only when PyPI
# is unreachable), deploy/'s unit and socket under systemd-socket-activate
# with a notify socket, nginx in front (root: its workers run as www-data),
# proxy headers, --max-requests under load, --reload.
smoke-deploy: m0serve venv
	$(Q)PY=$(VPY) smoke/deploy.sh

# ---------------------------------------------------- free-threaded CPython
# make python-ft   a free-threaded CPython (--disable-gil, shared libpython,
#                  an rpath to it) in build/python/ft-<sha12>/prefix, built
#                  once per source tarball (tools/python-build.sh); then
#                  make PYTHON=$(cat build/python/ft.python)
# make python-gil  the same version with the GIL: the benchmark's baseline
# The tarball: PYTHON_TARBALL=path, else the newest in PYTHON_SHARED (a
# clone's ../shared/python, checked against its SHA256SUMS), else Debian's
# source package when apt has deb-src lines for a python3.13 or later.
PYTHON_SHARED  ?= $(abspath $(CURDIR)/../shared/python)
PYTHON_TARBALL ?=
PYTHON_DEB_PKGS := gcc make libc6-dev pkg-config xz-utils libssl-dev zlib1g-dev libffi-dev libbz2-dev \
                   liblzma-dev libsqlite3-dev libreadline-dev uuid-dev

# PYTHON_OPT=1: configured as a distribution ships it (--enable-optimizations
# --with-lto; PGO makes it ~30 min instead of ~4 on 2 cores, so opt-in;
# tools/python-build.sh, docs/performance.md).
PYTHON_OPT ?= 0
python-ft python-gil: python-%:
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="$(PYTHON_DEB_PKGS)"
	$(Q)PYTHON_OPT="$(PYTHON_OPT)" tools/python-build.sh $* $(CURDIR)/build/python "$(PYTHON_SHARED)" "$(PYTHON_TARBALL)"

# -------------------------------------------------------------------- deps
# Every Debian package the build, the tests, the demo and the benchmarks use.
# Python packages (pytest, Django, Flask, gunicorn, uvicorn, ...) come from
# PyPI into the venvs below; python3-venv is what makes those. clang and
# libclang-rt-14-dev build the libFuzzer drivers (make fuzz).
DEB_PKGS := gcc make python3-dev python3-venv node-llhttp libssl-dev libcmocka-dev libhiredis-dev libjansson-dev redis-server redis-sentinel \
            libnats-dev nats-server \
            uwsgi-core uwsgi-plugin-python3 nginx-light wrk \
            procps util-linux curl iproute2 clang libclang-rt-14-dev systemd prometheus

deps:
	$(Q)missing=; for p in $(DEB_PKGS); do \
	    dpkg-query -W -f='$${db:Status-Status}' $$p 2>/dev/null | grep -qx installed || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    echo "  DEPS   $$missing"; \
	    SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# ------------------------------------------------------------------- venvs
# Virtualenvs made from $(PYTHON), the interpreter m0serve embeds, with the
# pinned packages of a requirements file.  Its .stamp holds the sha256 of that
# file and the interpreter's tag: while both match, nothing is done; when
# either changed, the venv is made afresh (no stale packages survive).
VENV       := .venv
BENCH_VENV := .venv-bench
VPY        := $(VENV)/bin/python
# --use-pep517: a package with only a setup.py (pubcontrol, gripcontrol,
# django-grip) is built into a wheel by setuptools in an isolated build
# environment, as every other one is, not installed by the legacy
# `setup.py install` that pip announces with a DEPRECATION warning each.
PIP_INSTALL := -m pip install -q --disable-pip-version-check --no-input --use-pep517

# $(call mkvenv,DIR,REQUIREMENTS)
define mkvenv
	$(Q)want="$$(sha256sum < $(2) | cut -d' ' -f1) $$($(PYTHON) -c 'import sys; print(sys.implementation.cache_tag + sys.abiflags)')"; \
	if [ -x $(1)/bin/python ] && [ "$$(cat $(1)/.stamp 2>/dev/null)" = "$$want" ]; then exit 0; fi; \
	echo "  VENV    $(1) <- $(2)"; \
	rm -rf $(1) && $(PYTHON) -m venv $(1) && \
	$(1)/bin/python $(PIP_INSTALL) -r $(2) && \
	echo "$$want" > $(1)/.stamp
endef

venv: deps
	$(call mkvenv,$(VENV),requirements/test.txt)

# bjoern (requirements/bench.txt) is built by pip against libev.
BENCH_DEB_PKGS := libev-dev
bench-venv: deps
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="$(BENCH_DEB_PKGS)"
	$(call mkvenv,$(BENCH_VENV),requirements/bench.txt)

# -------------------------------------------------------------------- demo
# Like test, demo and bench build in a sub-make once deps has run: on a fresh
# machine this make read python3-config and looked for llhttp's sources
# before they were installed.
demo: deps
	$(Q)$(MAKE) --no-print-directory m0serve venv
	VIRTUAL_ENV=$(CURDIR)/$(VENV) ./m0serve rtsite.wsgi:application --app-dir examples/django_realtime \
	    --bind 127.0.0.1:8000 --workers 2 --realtime --access-log

demo-fastapi: deps
	$(Q)$(MAKE) --no-print-directory m0serve venv
	VIRTUAL_ENV=$(CURDIR)/$(VENV) ./m0serve main:app --app-dir examples/fastapi_app \
	    --bind 127.0.0.1:8001 --workers 2 --realtime --access-log

# Django at /, Flask at /flask, Starlette at /api, static files at /static (issue 11).
hybrid-demo: deps
	$(Q)$(MAKE) --no-print-directory m0serve venv
	VIRTUAL_ENV=$(CURDIR)/$(VENV) ./m0serve hybridsite --app-dir examples/hybrid --mount /flask=flaskapp \
	    --mount /api=apiapp --static /static=examples/hybrid/static --bind 127.0.0.1:8000 --workers 2 --realtime --access-log

bench: deps
	$(Q)$(MAKE) --no-print-directory m0serve bench-venv
	bash bench/run.sh

# One make target per benchmark script (bench/README.md): make bench-realtime
# runs bench/realtime.sh with its defaults (BENCH_ARGS="--duration 5" to pass
# options). Each prints its table; none is part of make test.
BENCH_SCRIPTS := asgi broker grants grip mixed presence realtime static stream threads tls ws
BENCH_ARGS ?=
.PHONY: $(BENCH_SCRIPTS:%=bench-%)
$(BENCH_SCRIPTS:%=bench-%): bench-%: deps
	$(Q)$(MAKE) --no-print-directory m0serve bench-venv bench-tools
	bash bench/$*.sh $(BENCH_ARGS)

# The C bench tools: an epoll client that holds 100,000 SSE streams or
# WebSockets (bench/hold_client.c) and the bare send() fan-out floor
# (bench/fanout_floor.c). bench/realtime.sh and bench/ws.sh build them too.
BENCH_TOOLS := build/bench/hold_client build/bench/fanout_floor
bench-tools: $(BENCH_TOOLS)
build/bench/%: bench/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(STD) -O2 -g -Wall -Wextra -Werror -o $@ $< -lm

# ----------------------------------------------------------------- install
install: m0serve
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/m0serve/python/m0serve
	install -m 755 m0serve $(DESTDIR)$(PREFIX)/bin/m0serve
	install -m 644 python/*.py $(DESTDIR)$(PREFIX)/share/m0serve/python/ 2>/dev/null || true
	install -m 644 python/m0serve/*.py $(DESTDIR)$(PREFIX)/share/m0serve/python/m0serve/

clean:
	rm -rf build m0serve
