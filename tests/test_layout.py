"""The import rules of the package layout, as data (CONTRIBUTING.md, "The layout").

Standard library only. Every ``bridge/**/*.py`` is read with :mod:`ast`, imports inside
functions and under ``TYPE_CHECKING`` included, relative imports resolved. The rules:

1. a module imports only the bridge packages its layer may (``MAY_IMPORT``);
2. the module graph has no cycle, inside a package too;
3. no ``from x import _name`` crosses a module boundary;
4. each third-party package is imported only where ``THIRD_PARTY`` allows it;
5. ``bridge/core/`` is standard library only, with no ``async def`` and no ``await``;
6. serving an ``http://`` endpoint loads none of the config face, the server half, the
   click commands other than the bridge's own, tomlkit, uvicorn or httpx (a subprocess,
   through ``sys.modules``);
7. CONTRIBUTING.md's table of these rules is :func:`rules_table`, made from this data.
"""

from __future__ import annotations

import ast
import graphlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bridge"

#: Which bridge packages (or single modules) each layer may import, besides itself. A key or
#: value names a package (``"app"``) or a module (``"transport.base"``); the most specific key
#: that covers a module decides.
MAY_IMPORT: dict[str, set[str]] = {
    "_version": set(),
    "core": set(),
    "system": {"core"},
    "transport": {"core", "system.cancelscope", "system.privatefile"},
    "app": {"core", "system", "transport.base"},
    "stdio": {"core", "system"},
    "streamable": {"core", "system.cancelscope", "app", "transport.base"},
    "serve": {"core", "system", "stdio", "app", "streamable", "transport.base"},
    # The composition root chooses the transport.
    "serve.parts": {"core", "system", "stdio", "app", "streamable", "transport"},
    # The running-app start speaks HTTP/1.1 before asyncio, with the sans-I/O half only.
    "serve.appstart": {"core", "system", "stdio", "app", "streamable", "transport.base", "transport.http1", "transport.socketfile"},
    "clients": {"_version", "core.config", "core.unixurl"},
    "appserver": {"app.discovery", "system", "core.config", "core.unixurl", "core.pipeurl", "core.policy"},
    "cli": {"_version", "core", "system", "transport", "app", "stdio", "streamable", "serve", "clients"},
    # The package faces: ``bridge`` re-exports lazily; ``__main__`` runs the CLI.
    "__init__": {"_version", "core", "app.discovery", "app.tokens", "system.privatefile", "serve.loop", "cli"},
    "__main__": {"cli"},
}

#: Third-party top-level packages and the only modules (or packages) that may import them.
#: Imports under ``TYPE_CHECKING`` are exempt (a type name costs nothing at run time).
THIRD_PARTY: dict[str, set[str]] = {
    # Everything else is plain asyncio (system/cancelscope.py, the token command's process);
    # anyio is httpx's own dependency only: the bridge imports it nowhere.
    "anyio": set(),
    # https:// only; http://, the auth route's POST included, goes over the own pool.
    "httpx": {"transport.httpx_adapter"},
    "httpcore": set(),
    "click": {"cli"},
    "tomlkit": {"clients.tomlconfig"},
    "uvicorn": {"appserver.server"},
    "psutil": {"app.listener", "app.discovery"},
    "platformdirs": {"app", "appserver.unixsocket"},  # the server half: the runtime folder on macOS
    "filelock": {"app", "appserver.server"},  # the server half: one instance per discovery file
    "msgspec": {"streamable.jsonparse"},  # large replies parse faster with it
}

STDLIB = set(sys.stdlib_module_names)


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts[-1] = "__init__" if len(parts) == 1 else parts[-1]
        if len(parts) > 1:
            parts = parts[:-1]
    return ".".join(parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _under_type_checking(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                for sub in ast.walk(inner):
                    if hasattr(sub, "lineno"):
                        lines.add(sub.lineno)
    return lines


def imports(module: str) -> Iterator[tuple[str, str | None, int, bool]]:
    """(imported name, the name taken from it or None, line, under TYPE_CHECKING) for each import.
    Bridge imports come back as the bridge module or package they resolve to (without
    ``bridge.``); third-party ones as their top-level name."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = _under_type_checking(tree)
    is_package = path.name == "__init__.py"
    here = [] if module == "__init__" else module.split(".")
    package = here if is_package else here[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                if name == "bridge" or name.startswith("bridge."):
                    yield _resolve(name.split(".")[1:]), None, node.lineno, node.lineno in typing_only
                else:
                    yield name.split(".")[0], None, node.lineno, node.lineno in typing_only
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] if node.level > 1 else list(package)
                parts = base + (node.module.split(".") if node.module else [])
            elif node.module and (node.module == "bridge" or node.module.startswith("bridge.")):
                parts = node.module.split(".")[1:]
            else:
                top = (node.module or "").split(".")[0]
                for alias in node.names:
                    yield top, alias.name, node.lineno, node.lineno in typing_only
                continue
            for alias in node.names:
                if ".".join(parts + [alias.name]) in MODULES:
                    # `from . import module` or `from .pkg import module`: the name is a module
                    yield ".".join(parts + [alias.name]), None, node.lineno, node.lineno in typing_only
                else:
                    yield _resolve(parts), alias.name, node.lineno, node.lineno in typing_only


def _resolve(parts: list[str]) -> str:
    """The longest bridge module (or package) that ``parts`` names; ``__init__`` for bridge itself."""
    while parts:
        name = ".".join(parts)
        if name in MODULES:
            return name
        parts = parts[:-1]
    return "__init__"


def _bridge_imports() -> Iterator[tuple[str, str, str | None, int, bool]]:
    for module in MODULES:
        for target, name, line, typing_only in imports(module):
            if target in MODULES or target == "__init__":
                yield module, target, name, line, typing_only


def _covers(rule: str, module: str) -> bool:
    return module == rule or module.startswith(rule + ".")


def _layer_of(module: str) -> str:
    keys = [key for key in MAY_IMPORT if _covers(key, module)]
    assert keys, f"bridge/{module} is in no layer of MAY_IMPORT"
    return max(keys, key=len)


def test_every_module_is_in_a_layer() -> None:
    for module in MODULES:
        _layer_of(module)


def test_every_import_follows_the_layers() -> None:
    wrong = []
    for module, target, _name, line, _typing in _bridge_imports():
        layer = _layer_of(module)
        own = layer.split(".")[0]
        allowed = MAY_IMPORT[layer] | {own}
        if target in (module, "_version") or any(_covers(rule, target) for rule in allowed):
            continue
        wrong.append(f"bridge/{module} imports bridge.{target} (line {line})")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle() -> None:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for module, target, _name, _line, _typing in _bridge_imports():
        if target != module and target != "__init__":
            graph[module].add(target)
    # A package's __init__ re-exports its own modules: an edge from a module to its package face
    # would be a cycle in name only when the face imports that module; keep it, it is real.
    graphlib.TopologicalSorter(graph).prepare()


def test_no_private_name_crosses_a_module() -> None:
    wrong = [
        f"bridge/{module} takes {name} from bridge.{target} (line {line})"
        for module, target, name, line, _typing in _bridge_imports()
        if name and name.startswith("_") and not name.startswith("__") and target != module
    ]
    assert not wrong, "\n".join(wrong)


def test_third_party_packages_only_where_allowed() -> None:
    wrong = []
    seen: set[str] = set()
    for module in MODULES:
        for target, _name, line, typing_only in imports(module):
            if target in MODULES or target == "__init__" or target in STDLIB or target == "":
                continue
            seen.add(target)
            if typing_only:
                continue
            allowed = THIRD_PARTY.get(target)
            if allowed is None:
                wrong.append(f"bridge/{module} imports {target}, which THIRD_PARTY does not list (line {line})")
            elif not any(_covers(rule, module) for rule in allowed):
                wrong.append(f"bridge/{module} imports {target} (line {line}); allowed in {sorted(allowed)}")
    assert not wrong, "\n".join(wrong)
    assert {"httpx", "click"} <= seen  # the walk is real


def test_every_third_party_allowance_is_used() -> None:
    """An allowance no module uses would make CONTRIBUTING's table (made from this data) say
    more than the code does."""
    used = {
        (target, rule)
        for module in MODULES
        for target, _name, _line, typing_only in imports(module)
        if not typing_only and target in THIRD_PARTY
        for rule in THIRD_PARTY[target]
        if _covers(rule, module)
    }
    unused = sorted((library, rule) for library, rules in THIRD_PARTY.items() for rule in rules if (library, rule) not in used)
    assert not unused, unused


def test_the_core_is_standard_library_only_and_never_awaits() -> None:
    core = [module for module in MODULES if _covers("core", module)]
    assert len(core) >= 9
    wrong = []
    for module in core:
        tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith)):
                wrong.append(f"bridge/{module}:{node.lineno} is asynchronous")
        for target, _name, line, _typing in imports(module):
            if target not in STDLIB and target not in MODULES and target != "__future__":
                wrong.append(f"bridge/{module}:{line} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_the_rules_catch_a_violation(tmp_path: Path) -> None:
    """The checks above are not vacuous: a core module that awaits and imports httpx fails them."""
    tree = ast.parse("import httpx\nasync def f():\n    await g()\n")
    kinds = {type(node).__name__ for node in ast.walk(tree)}
    assert {"AsyncFunctionDef", "Await"} <= kinds
    graph = {"a": {"b"}, "b": {"a"}}
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(graph).prepare()


#: What serving a plain ``http://`` endpoint must never load.
NOT_WHILE_SERVING = (
    "bridge.clients",
    "bridge.appserver",
    "bridge.cli.config",
    "bridge.cli.check",
    "bridge.cli.clientcheck",
    "bridge.cli.demoapp",
    "bridge.transport.httpx_adapter",
    "tomlkit",
    "uvicorn",
    "httpx",
    "httpcore",
    # A plain serving command line is parsed without click (bridge/cli/serve.py).
    "click",
    "bridge.cli.commands",
    "bridge.cli.options",
    # Plain asyncio (bridge/system/cancelscope.py), and no TLS stack for http:// (OpenSSL's
    # binding; asyncio's own attempts at `import ssl`, refused at once, are listed as `ssl`).
    "anyio",
    "_ssl",
    # OpenSSL's hashes (hashlib, secrets, random load them): 3.5 MiB resident, for nothing.
    "_hashlib",
    # The named-pipe link is Windows only, loaded on the first npipe:// connection.
    "bridge.transport.pipelink",
    "bridge.app.pipepeer",
    "bridge.system.namedpipe",
)


@pytest.mark.process
@pytest.mark.parametrize("launch", [[], ["--launch", sys.executable]], ids=["url", "url+launch"])
def test_serving_http_loads_none_of_the_faces(launch: list[str], tmp_path: Path) -> None:
    """`python -m bridge --url http://…` answers `initialize` from a raw loopback server;
    ``-X importtime`` lists every module it loaded. The server is a few lines of socket code.
    With ``--launch`` the bridge also reads its catalog (lazy launch) at start."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "serverInfo": {"name": "s", "version": "1"}}}).encode()

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int([line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")][0])
            while len(rest) < length:
                rest += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["XDG_STATE_HOME"] = str(tmp_path)  # the catalog's folder (platformdirs)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bridge", "--url", f"http://127.0.0.1:{port}/mcp", "--no-verify-listener", *launch],
        input=request + "\n", capture_output=True, text=True, timeout=60, env=env, cwd=ROOT,
    )
    server.close()
    assert '"id":1' in done.stdout.replace(" ", ""), done.stderr[-2000:]
    loaded = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "bridge.transport.pool" in loaded  # the list is of a real serving run
    bad = sorted(name for name in loaded if any(name == n or name.startswith(n + ".") for n in NOT_WHILE_SERVING))
    assert not bad, bad


# -- CONTRIBUTING.md's table of the rules, made from the data above ---------------------------

#: What a row of the table adds in words, beside the data.
TABLE_NOTES = {"core": "standard library only, no `async def`, no `await`"}


def _layer_order(name: str) -> tuple[int, str]:
    order = [key for key in MAY_IMPORT if "." not in key]
    top = name.split(".")[0]
    return (order.index(top) if top in order else len(order), name)


def _in(package: str, module: str) -> str:
    """``module`` (``app.listener``) as the table names it in ``package``'s row: ``listener.py``."""
    rest = module.removeprefix(package + ".")
    return f"`{rest.replace('.', '/')}{'' if (PACKAGE / package / rest.replace('.', '/')).is_dir() else '.py'}`"


def rules_table() -> str:
    """The Markdown table of CONTRIBUTING.md's "The layout", from ``MAY_IMPORT`` and
    ``THIRD_PARTY`` (print it with ``python tests/test_layout.py``)."""
    rows = ["| package | may import (of the bridge) | third-party |", "|---|---|---|"]
    for package in (key for key in MAY_IMPORT if "." not in key and not key.startswith("_")):
        allowed = ", ".join(f"`{name}`" for name in sorted(MAY_IMPORT[package], key=_layer_order)) or "nothing"
        for key in (key for key in MAY_IMPORT if key.startswith(package + ".")):
            extra = sorted(MAY_IMPORT[key] - MAY_IMPORT[package], key=_layer_order)
            allowed += f"; {_in(package, key)} also " + ", ".join(f"`{name}`" for name in extra)
        libraries = []
        for library, users in THIRD_PARTY.items():
            inside = sorted(user for user in users if user == package or user.startswith(package + "."))
            if package in inside:
                libraries.append(library)
            elif inside:
                libraries.append(f"{library} only in " + ", ".join(_in(package, user) for user in inside))
        third_party = ", ".join(libraries) or "none"
        if package in TABLE_NOTES:
            third_party += f": {TABLE_NOTES[package]}"
        rows.append(f"| `{package}` | {allowed} | {third_party} |")
    return "\n".join(rows) + "\n"


def test_contributing_shows_exactly_these_rules() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert rules_table() in text, "CONTRIBUTING.md's rules table differs from this file's data; it should read:\n" + rules_table()


if __name__ == "__main__":
    print(rules_table(), end="")
