#!/usr/bin/env python3
"""make layers: the source tree keeps its layers (docs/architecture.md).

usage: tools/layers.py [ROOT] [-v]

The folders of src/ are the layers, bottom to top (LAYERS below). A file's
layer is its folder's; a header in include/m0/ has the layer of the source
file that owns it (NAME.h and NAME_*.h belong to NAME.c; the few headers
without a source file are in HEADER_LAYERS). The rules, all checked:

  1. No file includes a header of a layer above its own (the .c files of
     src/ and the headers of include/m0/ and src/ alike).
  2. No two files reach each other — through #include lines or through the
     public m0_* names one defines and the other uses — unless they are
     files of one module (NAME.c, NAME_*.c and the files MODULES lists):
     every strongly connected set of files is one module.
  3. No m0_* name is used from a higher layer: a function or object
     defined in a source file is named only by files of its layer or above
     (a lower header that declares an upper file's function — metrics.h
     declaring the http layer's, config.h the CLI's — is a violation too,
     even though its #include lines pass rule 1).
  4. Every source file has a header of its own (NAME.h in include/m0/ for
     what other modules call, or beside it in src/LAYER/ when it is private
     to its module), but the program's entry (main.c).
  5. One owner of the socket: conn.c alone calls recv, send, sendfile,
     writev or shutdown (or their msg/v relatives) on a client socket,
     through the slot's transport (conn.h: struct m0_xprt_ops; the TLS one
     is xprt_tls.c, listed in TRANSPORTS). In src/http
     (the layer of the connections) no other file calls them at all, but
     for the sockets listed in SOCKET_OWNERS (not clients'); anywhere in
     src/, none is called on a connection's descriptor (c->fd).

Prints each violation and exits 1 if there is one; -v prints the layers,
the largest knot and the edge count as well.
"""
import os
import re
import sys

LAYERS = ["base", "proto", "core", "event", "realtime", "python", "http", "master"]

# Headers no source file owns: forward declarations, interfaces, protocols.
HEADER_LAYERS = {
    "types": "base",       # forward declarations, status codes
    "runner": "python",    # the runner interface (wsgi.c and asgi.c implement it)
    "control": "master",   # the master/worker control protocol
}

# Files of one module beyond the NAME.c / NAME_*.c rule.
MODULES = {
    "request": "http",          # the request object of the HTTP/1.1 parser
    "static_rules": "static",
    "mime": "static",
    "resize": "master",         # behind master_int.h
    "m0mod": "wsgi",            # wsgi.h's built-in module
}

# Sources without a header: the program's entry point (rule 4).
NO_HEADER = {"main"}

# src/http files that call the send/recv family on a socket that is not a
# client's, and why (rule 3).
SOCKET_OWNERS = {
    "conn": "the client sockets, through the transports (conn.h)",
    "xprt_tls": "the client sockets of the TLS transport (conn.h's second struct m0_xprt_ops): a peek at the first byte, "
                "a plain 400 and a lingering close for plain HTTP, the FIN after close_notify",
    "handoff": "the loops' inboxes: SCM_RIGHTS messages between a worker's loops",
}
# The files that are a connection's transport (conn.h: struct m0_xprt_ops):
# conn.c's plain one and the TLS one; they alone touch c->fd (rule 5).
TRANSPORTS = {"conn", "xprt_tls"}
SOCKET_CALL = re.compile(r"\b(recv|recvfrom|recvmsg|recvmmsg|send|sendto|sendmsg|sendmmsg|sendfile|sendfile64|"
                         r"writev|readv|shutdown|splice)\s*\(")
CONN_FD_CALL = re.compile(r"\b(?:recv\w*|send\w*|writev|readv|read|write|shutdown|splice|poll)\s*\(\s*c->fd\b")

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+\.h)"', re.M)
DEFINE = re.compile(r'^(?:[A-Za-z_][\w \t\*]*?[\s\*])?(m0_\w+)\s*(?:\(|=|\[|;)', re.M)
TOKEN = re.compile(r"\bm0_\w+\b")
COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def module_of(stem):
    if stem in MODULES:
        return MODULES[stem]
    return stem.split("_")[0]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    verbose = "-v" in sys.argv
    root = args[0] if args else "."
    src = os.path.join(root, "src")
    sources = {}                  # stem -> (path, layer)
    headers = {}                  # header basename -> path
    problems = []
    for layer in sorted(os.listdir(src)):
        d = os.path.join(src, layer)
        if not os.path.isdir(d):
            continue
        if layer not in LAYERS:
            problems.append("src/%s: a folder that is not a layer (tools/layers.py LAYERS)" % layer)
            continue
        for f in sorted(os.listdir(d)):
            if f.endswith(".c"):
                sources[f[:-2]] = (os.path.join(d, f), layer)
            elif f.endswith(".h"):
                headers[f] = os.path.join(d, f)
    for f in os.listdir(src):
        if f.endswith((".c", ".h")):
            problems.append("src/%s: outside the layer folders" % f)
    inc = os.path.join(root, "include", "m0")
    for f in sorted(os.listdir(inc)):
        if f.endswith(".h"):
            headers[f] = os.path.join(inc, f)

    def owner(h):
        """The source stem that owns header basename h, or None."""
        s = h[:-2]
        while s:
            if s in sources:
                return s
            if "_" not in s:
                return None
            s = s.rsplit("_", 1)[0]
        return None

    def header_layer(h):
        o = owner(h)
        if o is not None:
            return sources[o][1]
        return HEADER_LAYERS.get(h[:-2])

    for h, path in sorted(headers.items()):
        if header_layer(h) is None:
            problems.append("%s: no source file owns it and HEADER_LAYERS has no layer for it" % os.path.relpath(path, root))

    # Rule 1: includes go down (or sideways), never up.
    files = [(p, l) for p, l in sources.values()]
    files += [(p, header_layer(os.path.basename(p))) for p in headers.values()]
    texts = {}
    for path, layer in files:
        text = open(path, errors="replace").read()
        texts[path] = text
        if layer is None:
            continue
        for h in INCLUDE.findall(text):
            base = os.path.basename(h)
            if base not in headers:
                continue
            hl = header_layer(base)
            if hl is not None and LAYERS.index(hl) > LAYERS.index(layer):
                problems.append("%s (%s) includes %s (%s): a layer above its own"
                                % (os.path.relpath(path, root), layer, h, hl))

    # Rule 2: knots only inside a module.
    graph = {s: set() for s in sources}
    defined = {}
    for s, (path, _) in sources.items():
        text = texts[path]
        for m in DEFINE.finditer(text):
            line = text[m.start():text.find("\n", m.start())]
            if line.startswith(("static", "extern", "#", " ", "\t", "return", "typedef")):
                continue
            defined.setdefault(m.group(1), s)
    for s, (path, _) in sources.items():
        text = texts[path]
        for h in INCLUDE.findall(text):
            o = owner(os.path.basename(h))
            if o is not None and o != s:
                graph[s].add(o)
        for name in set(TOKEN.findall(COMMENTS.sub(" ", text))):
            o = defined.get(name)
            if o is not None and o != s:
                graph[s].add(o)
    index, low, on, stack, knots, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                knots.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    # Rule 3: no m0_* name from a higher layer, in a source or a header.
    for path, layer in files:
        if layer is None:
            continue
        code = COMMENTS.sub(" ", texts[path])
        for name in sorted(set(TOKEN.findall(code))):
            o = defined.get(name)
            if o is not None and LAYERS.index(sources[o][1]) > LAYERS.index(layer):
                problems.append("%s (%s) names %s, defined by %s.c (%s): a layer above its own"
                                % (os.path.relpath(path, root), layer, name, o, sources[o][1]))

    # Rule 4: a header per source.
    for s_, (path, layer) in sorted(sources.items()):
        if s_ not in NO_HEADER and s_ + ".h" not in headers:
            problems.append("%s: no header of its own (%s.h in include/m0/, or beside it when private)"
                            % (os.path.relpath(path, root), s_))

    # Rule 5: conn.c alone touches a client socket.
    for s_, (path, layer) in sorted(sources.items()):
        code = COMMENTS.sub(" ", texts[path])
        rel = os.path.relpath(path, root)
        if s_ not in TRANSPORTS:
            for m in CONN_FD_CALL.finditer(code):
                problems.append("%s:%d: %s on a connection's socket: only conn.c reads and writes it (its transport)"
                                % (rel, code.count("\n", 0, m.start()) + 1, m.group(0).split("(")[0].strip()))
        if layer == "http" and s_ not in SOCKET_OWNERS:
            for m in SOCKET_CALL.finditer(code):
                if code[max(0, m.start() - 1)] in "._>":
                    continue            # a member or a longer name
                problems.append("%s:%d: %s(): only conn.c calls it on a client socket (through conn.h's transport); "
                                "another socket of the http layer is listed in SOCKET_OWNERS"
                                % (rel, code.count("\n", 0, m.start()) + 1, m.group(1)))

    for k in knots:
        if len({module_of(s) for s in k}) > 1:
            problems.append("knot of %d files across modules: %s" % (len(k), " ".join(s + ".c" for s in k)))

    if verbose:
        for layer in LAYERS:
            print("%-9s %s" % (layer + ":", " ".join(sorted(s for s, (_, l) in sources.items() if l == layer))))
        largest = max((len(k) for k in knots), default=1)
        print("layers: %d source files, %d file edges, largest knot %d file(s)%s"
              % (len(sources), sum(len(v) for v in graph.values()), largest,
                 "".join("; %s" % " ".join(k) for k in sorted(knots, key=len, reverse=True))))
    for p in problems:
        print("layers: " + p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
