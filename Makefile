# m0serve — one non-recursive GNU Makefile.
#
#   make deps        install the Debian packages the build, tests, demo and bench need
#   make venv        .venv: the e2e suite's and the demo's Python packages (requirements/test.txt)
#   make bench-venv  .venv-bench: the benchmark peers (requirements/bench.txt)
#   make             build ./m0serve (release, -O2)
#   make test        C unit tests (cmocka) + pytest end-to-end suite (in .venv) + smoke-deploy
#   make smoke-deploy pip install . in a fresh venv, the systemd unit, nginx in front
#   make e2e-debian  the e2e suite against Debian's python3-django/-flask instead
#   make sanitize    build/sanitize/m0serve with ASan+UBSan; run the e2e suite
#                    against it with: M0SERVE=build/sanitize/m0serve make e2e
#   make demo        serve the Django example on http://127.0.0.1:8000
#   make bench       hello-world benchmark against gunicorn, uWSGI and nginx
#   make install PREFIX=/usr/local

PYTHON   ?= /usr/bin/python3
PYTHON_CONFIG ?= $(PYTHON)-config
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
DEFS     := -DM0_VERSION='"$(VERSION)"' -DM0_PYTHONDIR='"$(PREFIX)/share/m0serve/python"' \
            -DM0_PYTHON_EXE='"$(PYTHON)"' -D_GNU_SOURCE
CPPFLAGS := -Iinclude -I$(LLHTTP_INC) $(DEFS)
LDLIBS   := $(PY_LDFLAGS) -lcrypto -lpthread

SRCS     := $(wildcard src/*.c)
# Modules with no Python in them: linked into the C unit tests.
PURE     := src/buf.c src/http.c src/response.c src/body.c src/log.c src/timer.c src/cli.c \
            src/sse.c src/registry.c src/bus.c src/order.c src/health.c src/target.c \
            src/accesslog.c src/proxy.c src/notify.c
LLHTTP   := api.c http.c llhttp.c

BUILD    ?= build/release
OBJS     := $(SRCS:src/%.c=$(BUILD)/%.o)
LLOBJS   := $(LLHTTP:%.c=$(BUILD)/llhttp/%.o)

ifeq ($(V),)
Q := @
else
Q :=
endif

.SECONDARY:
.PHONY: all deps venv bench-venv test unit e2e e2e-sanitize e2e-debian sanitize demo bench install clean smoke-core smoke-pool smoke-django-realtime smoke-deploy

all: m0serve

# Replace by rename: a running ./m0serve never blocks a rebuild.
m0serve: $(BUILD)/m0serve
	$(Q)cp $< $@.tmp && mv -f $@.tmp $@

$(BUILD)/m0serve: $(OBJS) $(LLOBJS)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: src/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(STD) $(WARN) $(OPT) $(M0_CFLAGS) $(CFLAGS) $(PY_CFLAGS) $(CPPFLAGS) -MMD -MP -c -o $@ $<

# Vendored parser: compiled with its own relaxed flags, never our -Werror.
# Strict mode: CRLF after chunk data, no control bytes in the target
# (request-smuggling primitives otherwise; RFC 9112 §7.1, §3.2).
LLHTTP_FLAGS := -DLLHTTP_STRICT_MODE=1
$(BUILD)/llhttp/%.o: $(LLHTTP_SRC)/%.c
	@mkdir -p $(@D)
	@echo "  CC      llhttp/$(<F)"
	$(Q)$(CC) -O2 -g -w $(LLHTTP_FLAGS) $(M0_CFLAGS) -I$(LLHTTP_INC) -c -o $@ $<

-include $(OBJS:.o=.d)

# ---------------------------------------------------------------- sanitize
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
sanitize:
	$(Q)$(MAKE) --no-print-directory BUILD=build/sanitize OPT="-O1 -g" \
	    M0_CFLAGS="$(SAN)" LDFLAGS="$(SAN)" build/sanitize/m0serve

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
	$(Q)$(CC) $(STD) $(WARN) -Wno-missing-prototypes -O1 -g $(SAN) $(CPPFLAGS) -Itests/unit -o $@ $^ -lcmocka

-include $(wildcard build/unit/obj/*.d)

unit: $(UNIT_TESTS)
	$(Q)set -e; for t in $(UNIT_TESTS); do echo "  UNIT    $$t"; (cd tests/unit && ../../$$t); done

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
	$(Q)$(MAKE) --no-print-directory m0serve unit
	$(Q)$(MAKE) --no-print-directory e2e E2E_ARGS="$(E2E_ARGS) $(SMOKE_DEPLOY_E2E:%=--ignore=%)"
	$(Q)$(MAKE) --no-print-directory smoke-deploy

smoke-core: m0serve venv
	$(Q)$(VPY) -m pytest tests/e2e -q -k "conformance or malformed or django or flask"

smoke-pool: m0serve venv
	$(Q)$(VPY) -m pytest tests/e2e/test_pool.py tests/e2e/test_matrix.py -q

smoke-django-realtime: m0serve venv
	$(Q)$(VPY) -m pytest tests/e2e/test_realtime.py tests/e2e/test_realtime_edges.py -q

# Production (docs/deploy.md): pip install . into a fresh virtualenv by the
# README's own line (pip's cache is reused; skipped, saying so, only when PyPI
# is unreachable), deploy/'s unit and socket under systemd-socket-activate
# with a notify socket, nginx in front (root: its workers run as www-data),
# proxy headers, --max-requests under load, --reload.
smoke-deploy: m0serve venv
	$(Q)$(VPY) -m pytest tests/deploy $(SMOKE_DEPLOY_E2E) -q

# -------------------------------------------------------------------- deps
# Every Debian package the build, the tests, the demo and the benchmarks use.
# Python packages (pytest, Django, Flask, gunicorn, uvicorn, ...) come from
# PyPI into the venvs below; python3-venv is what makes those.
DEB_PKGS := gcc make python3-dev python3-venv node-llhttp libssl-dev libcmocka-dev \
            uwsgi-core uwsgi-plugin-python3 nginx-light wrk \
            procps util-linux curl iproute2 systemd

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
PIP_INSTALL := -m pip install -q --disable-pip-version-check --no-input

# $(call mkvenv,DIR,REQUIREMENTS)
define mkvenv
	$(Q)want="$$(sha256sum < $(2) | cut -d' ' -f1) $$($(PYTHON) -c 'import sys; print(sys.implementation.cache_tag)')"; \
	if [ -x $(1)/bin/python ] && [ "$$(cat $(1)/.stamp 2>/dev/null)" = "$$want" ]; then exit 0; fi; \
	echo "  VENV    $(1) <- $(2)"; \
	rm -rf $(1) && $(PYTHON) -m venv $(1) && \
	$(1)/bin/python $(PIP_INSTALL) -r $(2) && \
	echo "$$want" > $(1)/.stamp
endef

venv: deps
	$(call mkvenv,$(VENV),requirements/test.txt)

bench-venv: deps
	$(call mkvenv,$(BENCH_VENV),requirements/bench.txt)

# -------------------------------------------------------------------- demo
# Like test, demo and bench build in a sub-make once deps has run: on a fresh
# machine this make read python3-config and looked for llhttp's sources
# before they were installed.
demo: deps
	$(Q)$(MAKE) --no-print-directory m0serve venv
	VIRTUAL_ENV=$(CURDIR)/$(VENV) ./m0serve rtsite.wsgi:application --app-dir examples/django_realtime \
	    --bind 127.0.0.1:8000 --workers 2 --realtime --access-log

bench: deps
	$(Q)$(MAKE) --no-print-directory m0serve bench-venv
	bash bench/run.sh

# ----------------------------------------------------------------- install
install: m0serve
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/m0serve/python/m0serve
	install -m 755 m0serve $(DESTDIR)$(PREFIX)/bin/m0serve
	install -m 644 python/*.py $(DESTDIR)$(PREFIX)/share/m0serve/python/ 2>/dev/null || true
	install -m 644 python/m0serve/*.py $(DESTDIR)$(PREFIX)/share/m0serve/python/m0serve/

clean:
	rm -rf build m0serve
