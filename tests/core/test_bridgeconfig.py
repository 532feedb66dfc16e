"""BridgeConfig as a value (bridge/core/config.py): built by keyword, frozen, compared and
hashed by its values, the token and callables out of its repr; and no ``dataclasses`` (with
``inspect`` and ``ast``) loaded to build it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bridge.core.config import BridgeConfig, ConfigError, config_defaults

URL = "http://127.0.0.1:8765/mcp"


def test_values_and_defaults() -> None:
    config = BridgeConfig(url=URL, request_timeout_seconds=5.0)
    assert config.url == URL and config.request_timeout_seconds == 5.0
    defaults = config_defaults()
    assert set(defaults) == set(BridgeConfig.__slots__)
    for name in BridgeConfig.__slots__:
        if name not in ("url", "request_timeout_seconds"):
            assert getattr(config, name) == defaults[name], name
    with pytest.raises(TypeError):
        BridgeConfig(URL)  # type: ignore[call-arg]  # by keyword only


def test_frozen() -> None:
    config = BridgeConfig(url=URL)
    with pytest.raises(AttributeError):
        config.url = "http://127.0.0.1:1/mcp"
    with pytest.raises(AttributeError):
        del config.url
    with pytest.raises(AttributeError):
        config.other = 1


def test_equal_and_hashed_by_values() -> None:
    one, same, other = BridgeConfig(url=URL), BridgeConfig(url=URL), BridgeConfig(url=URL, app_name="Other")
    assert one == same and hash(one) == hash(same)
    assert one != other and len({one, same, other}) == 2
    assert one != object()


def test_repr_leaves_out_the_token_and_the_callables() -> None:
    def start() -> None:
        pass

    config = BridgeConfig(url=URL, token="s3cret-token", ensure_running=start, discovery_file=Path("/x/d.json"))
    shown = repr(config)
    assert shown.startswith("BridgeConfig(url='http://127.0.0.1:8765/mcp', discovery_file=")
    assert "s3cret" not in shown and "token=" not in shown and "ensure_running" not in shown and "start" not in shown


def test_replace_makes_a_checked_copy() -> None:
    config = BridgeConfig(url=URL, token="s3cret-token")
    other = config.replace(request_timeout_seconds=2.0, launch_policy="never")
    assert other.request_timeout_seconds == 2.0 and other.launch_policy == "never" and other.token == "s3cret-token"
    assert config.request_timeout_seconds == 300.0  # unchanged
    with pytest.raises(ConfigError):
        config.replace(max_concurrent_requests=0)
    with pytest.raises(TypeError):
        config.replace(no_such_value=1)


def test_still_checked() -> None:
    with pytest.raises(ConfigError):
        BridgeConfig()
    with pytest.raises(ConfigError):
        BridgeConfig(url=URL, max_concurrent_requests=0)


@pytest.mark.process
def test_building_one_loads_no_dataclasses() -> None:
    code = "import sys; from bridge.core.config import BridgeConfig; BridgeConfig(url='http://127.0.0.1:1/mcp'); " \
           "print(sorted({'dataclasses', 'inspect', 'ast'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_every_default_app_name_is_the_one_constant() -> None:
    """Every ``app_name`` parameter in the package defaults to ``DEFAULT_APP_NAME`` by name,
    and the name's text is written once (bridge/core/config.py): a second ``"The app"``
    would drift the first time the default's wording changes."""
    import ast

    from bridge.core.config import DEFAULT_APP_NAME

    package = Path(__file__).resolve().parents[2] / "bridge"
    literal, by_value = [], []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == DEFAULT_APP_NAME and path.name != "config.py":
                literal.append(f"{path.relative_to(package)}:{node.lineno}")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                arguments = node.args.args + node.args.kwonlyargs
                defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults + node.args.kw_defaults
                for argument, default in zip(arguments, defaults, strict=True):
                    if argument.arg == "app_name" and default is not None and ast.unparse(default) not in ("DEFAULT_APP_NAME", "None"):
                        by_value.append(f"{path.relative_to(package)}:{node.lineno} {ast.unparse(default)}")
    assert not literal and not by_value, (literal, by_value)
