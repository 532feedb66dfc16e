"""Generated client config files for the round-trip differential (tests/clients/test_config_roundtrip.py):
JSONC files as VS Code and Zed users write them, TOML files as Codex users write them.

Each generator takes a ``random.Random`` (the seed fixes the files) and returns a
:class:`ConfigFile`: its text and the comments in it, in order. Every comment holds a
marker of its own (``c17.``), so a test can tell which one was lost or moved.

What varies: line ends (LF, CRLF, now and then both in one file), indentation (tabs, 2 or
4 spaces, none), a BOM, a final line end or none, comments everywhere a comment may go
(own line, end of line, between a key and its value, inside empty objects and tables),
trailing commas, empty objects (``{}``, ``{ }``, on several lines, holding a comment only),
the servers object or table absent, empty, first, last or in between, holding entries
already (on one line or several), out-of-order TOML tables, dotted keys, inline tables,
sub-tables, and strings that look like comments or table headers.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["ConfigFile", "jsonc_file", "toml_file"]


@dataclass
class ConfigFile:
    """One generated file: ``text``, and ``comments``, each comment's text in file order."""

    text: str
    comments: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.comments.sort(key=self.text.index)  # (drawn inside out: put in file order)


class _Writer:
    """Draws the pieces of one file and records its comments in order."""

    def __init__(self, rng: random.Random, newline: str) -> None:
        self.rng, self.newline, self.count = rng, newline, 0
        self.comments: list[str] = []

    def nl(self) -> str:
        if self.newline == "mixed":
            return self.rng.choice(["\n", "\r\n"])
        return self.newline

    def comment(self, style: str) -> str:
        self.count += 1
        words = self.rng.choice(["note", "keep me", "a, b: {c}", 'say "x"', "é ✓", "", "TODO: fix"])
        if style == "line":
            text = f"// c{self.count}. {words}".rstrip()
        elif style == "block":
            text = f"/* c{self.count}. {words} */"
        elif style == "block-lines":
            text = f"/* c{self.count}.{self.nl()} * {words}{self.nl()} */"
        else:  # TOML
            text = f"# c{self.count}. {words}".rstrip()
        self.comments.append(text)
        return text


# -- JSONC (VS Code, Zed) -----------------------------------------------------------------------


def _newline(rng: random.Random) -> str:
    return rng.choices(["\n", "\r\n", "mixed"], weights=[45, 45, 10])[0]


def _indent_unit(rng: random.Random) -> str:
    return rng.choice(["  ", "    ", "\t", "  ", "\t"])


_SCALARS = [
    '"text"',
    "1",
    "-2.5e3",
    "true",
    "false",
    "null",
    '"// not a comment"',
    '"/* nor this */"',
    '"a\\"b"',
    '"é😀"',
]


def jsonc_file(rng: random.Random, servers_key: str) -> ConfigFile:
    """A JSONC settings file as a VS Code (``servers_key="servers"``) or Zed
    (``"context_servers"``) user may have it; VS Code's parser reads every one."""
    out = _Writer(rng, _newline(rng))
    unit = _indent_unit(rng)
    compact = rng.random() < 0.08  # the whole file on one line

    def gap_before(indent: str) -> str:
        """What comes before a member on its own line: blank lines and comments."""
        if compact:
            return out.comment("block") + " " if rng.random() < 0.2 else ""
        text = ""
        if rng.random() < 0.15:
            text += out.nl()
        for _ in range(rng.choice([0, 0, 0, 1, 1, 2])):
            style = rng.choice(["line", "line", "block", "block-lines"])
            text += indent + out.comment(style) + out.nl()
        return text

    def end_of_line() -> str:
        if compact or rng.random() > 0.25:
            return ""
        return " " + out.comment(rng.choice(["line", "line", "block"]))

    def inline_gap() -> str:
        if rng.random() < 0.05:
            return " " + out.comment("block") + " "
        return ""

    def value(indent: str, depth: int) -> str:
        roll = rng.random()
        if depth > 2 or roll < 0.55:
            return rng.choice(_SCALARS)
        if roll < 0.75:
            items = [value(indent, depth + 1) for _ in range(rng.randint(0, 3))]
            return "[" + ", ".join(items) + ("," if items and rng.random() < 0.3 else "") + "]"
        members = {f"k{index}": value(indent + unit, depth + 1) for index in range(rng.randint(0, 3))}
        return obj(members, indent, inline=rng.random() < 0.5)

    def obj(members: dict[str, str], indent: str, *, inline: bool, empty_style: str | None = None) -> str:
        """An object of already rendered ``members`` (key -> value text)."""
        if not members:
            style = empty_style or rng.choice(["{}", "{}", "{ }", "lines", "comment"])
            if compact and style in ("lines", "comment"):
                style = "{}"
            if style == "lines":
                return "{" + out.nl() + indent + "}"
            if style == "comment":
                inner = indent + unit + out.comment(rng.choice(["line", "block"])) + out.nl()
                return "{" + end_of_line() + out.nl() + inner + indent + "}"
            return style
        trailing = rng.random() < 0.35
        if inline or compact:
            parts = [f"{json.dumps(key)}{inline_gap()}:{inline_gap()} {text}{inline_gap()}" for key, text in members.items()]
            return (
                "{"
                + rng.choice(["", " "])
                + inline_gap()
                + ", ".join(parts)
                + ("," if trailing else "")
                + inline_gap()
                + rng.choice(["", " "])
                + "}"
            )
        inner = indent + unit
        lines = []
        keys = list(members)
        for index, key in enumerate(keys):
            comma = "," if index < len(keys) - 1 or trailing else ""
            space = rng.choice([" ", " ", "", "  "])
            before_comma = inline_gap() if comma else ""  # a comment between a value and its comma
            lines.append(
                gap_before(inner)
                + f"{inner}{json.dumps(key)}{inline_gap()}:{inline_gap()}{space}{members[key]}{before_comma}{comma}"
                + end_of_line()
            )
        closing = gap_before(inner) if rng.random() < 0.2 else ""
        return "{" + end_of_line() + out.nl() + out.nl().join(lines) + out.nl() + closing + indent + "}"

    def entry(indent: str, index: int) -> str:
        fields: dict[str, str] = {}
        if servers_key == "context_servers" and rng.random() < 0.3:
            fields["settings"] = "{}"  # an extension's server: no command
        else:
            fields["command"] = json.dumps(rng.choice(["npx", "/usr/bin/tool", "C:\\\\tools\\\\x.exe"]))[0:]
            if rng.random() < 0.6:
                fields["args"] = json.dumps(["-y", f"server-{index}"])
            if rng.random() < 0.3:
                fields["env"] = obj({"TOKEN": '"${input:token}"'}, indent + unit, inline=rng.random() < 0.5)
        if servers_key == "servers" and "command" in fields and rng.random() < 0.5:
            fields = {"type": '"stdio"', **fields}
        return obj(fields, indent, inline=rng.random() < 0.4)

    root_indent = ""
    members: dict[str, str] = {}
    others: list[tuple[str, Callable[[], str]]] = [
        ("editor.fontSize", lambda: "14"),
        ("files.exclude", lambda: obj({"**/.git": "true"}, unit, inline=rng.random() < 0.5)),
        ("inputs", lambda: "[]"),
        ("theme", lambda: '"One Dark"'),
        ("lsp", lambda: value(unit, 1)),
        ("languages", lambda: value(unit, 0)),
    ]
    chosen = rng.sample(others, rng.randint(0, len(others)))
    servers_at = rng.randint(0, len(chosen))
    servers_shape = rng.choices(["absent", "empty", "entries"], weights=[30, 25, 45])[0]
    for index, (key, make) in enumerate(chosen):
        if index == servers_at and servers_shape != "absent":
            members[servers_key] = ""
        members[key] = make()
    if servers_at == len(chosen) and servers_shape != "absent":
        members[servers_key] = ""
    if servers_key in members:
        names = [f"server-{index}" for index in range(rng.randint(1, 3))] if servers_shape == "entries" else []
        members[servers_key] = obj(
            {json_name: entry(unit + unit, index) for index, json_name in enumerate(names)},
            unit,
            inline=rng.random() < 0.1,
        )
    body = obj(members, root_indent, inline=False, empty_style=rng.choice(["{}", "lines", "comment", "{ }"]))
    if rng.random() < 0.04 and chosen:  # a duplicate key first: the last one wins, as in VS Code
        body = "{" + json.dumps(chosen[0][0]) + ": 0, " + body[1:]
    head = ""
    if rng.random() < 0.5:
        head = out.comment(rng.choice(["line", "block-lines", "block"])) + out.nl()
    tail = ""
    if rng.random() < 0.2:
        tail = out.nl() + out.comment(rng.choice(["line", "block"]))
    end = rng.choices(["nl", "", "nl2"], weights=[75, 20, 5])[0]
    text = head + body + tail + {"nl": out.nl(), "": "", "nl2": out.nl() + out.nl()}[end]
    if rng.random() < 0.05:
        text = "\ufeff" + text
    return ConfigFile(text, out.comments)


# -- TOML (Codex) -------------------------------------------------------------------------------


def toml_file(rng: random.Random) -> ConfigFile:
    """A Codex ``config.toml`` as a user may have it; ``tomllib`` reads every one."""
    out = _Writer(rng, _newline(rng))
    indent = rng.choice(["", "", "", "  ", "\t"])  # some indent a table's keys

    def comment_lines(prefix: str = "") -> str:
        return "".join(prefix + out.comment("toml") + out.nl() for _ in range(rng.choice([0, 0, 0, 1, 2])))

    def eol() -> str:
        return (" " + out.comment("toml")) if rng.random() < 0.2 else ""

    def blank() -> str:
        return rng.choices(["", out.nl(), out.nl() + out.nl()], weights=[25, 65, 10])[0]

    def keyvalue(key: str, value: str, pad: str = "") -> str:
        eq = rng.choice([" = ", " = ", "=", "  =  "])
        return comment_lines(pad) + f"{pad}{key}{eq}{value}{eol()}{out.nl()}"

    def server(name: str) -> list[tuple[str, str]]:
        """(header suffix, body) pairs: the entry's table and perhaps its env sub-table."""
        body = keyvalue("command", rng.choice(['"npx"', "'/usr/bin/tool'", '"C:\\\\tools\\\\x.exe"']), indent)
        if rng.random() < 0.6:
            if rng.random() < 0.7:
                args = '["-y", "docs-mcp"]'
            else:  # an array over several lines, with a comment in it
                args = "[" + out.nl() + "  '--x', " + out.comment("toml") + out.nl() + "]"
            body += keyvalue("args", args, indent)
        tables = [(name, body)]
        if rng.random() < 0.3:
            choice = rng.random()
            if choice < 0.5:
                tables[0] = (name, body + keyvalue("env", '{ TOKEN = "x" }', indent))
            else:
                tables.append((f"{name}.env", keyvalue("TOKEN", '"x"', indent)))
        if rng.random() < 0.15:
            tables[0] = (name, tables[0][1] + keyvalue("enabled", "true", indent))
        return tables

    pieces: list[str] = []
    if rng.random() < 0.6:
        pieces.append(comment_lines() or out.comment("toml") + out.nl())
    root_keys = rng.sample(
        [
            ("model", '"gpt-5"'),
            ("approval_policy", '"on-request"'),
            ("model_reasoning_effort", "'high'"),
            ("notify", '["notify-send", "# not a comment"]'),
            ("instructions", '"""\n[mcp_servers.fake]\ncommand = "no"\n"""'),
            ("shell_environment_policy.inherit", '"core"'),
        ],
        rng.randint(0, 4),
    )
    for key, value in root_keys:
        pieces.append(keyvalue(key, value.replace("\n", out.nl())))
    other_tables = rng.sample(
        [
            ("profiles.fast", [("model", '"gpt-5-mini"')]),
            ('projects."/home/me/work"', [("trust_level", '"trusted"')]),
            ("tools", [("web_search", "true")]),
            ("sandbox_workspace_write", [("network_access", "false")]),
            ("tui", []),
        ],
        rng.randint(0, 3),
    )
    shape = rng.choices(
        ["absent", "tables", "empty-table", "table-dotted", "root-dotted", "inline", "tables-split"],
        weights=[25, 35, 10, 8, 5, 7, 10],
    )[0]
    names = [f"server-{index}" for index in range(rng.randint(1, 3))]
    blocks: list[str] = []  # whole tables, in order

    def table(header: str, body: str) -> str:
        return comment_lines() + f"[{header}]{eol()}{out.nl()}" + body

    for header, keys in other_tables:
        blocks.append(table(header, "".join(keyvalue(key, value, indent) for key, value in keys)))
    server_blocks: list[str] = []
    if shape in ("tables", "tables-split"):
        if rng.random() < 0.2:
            server_blocks.append(table("mcp_servers", comment_lines(indent)))
        for name in names:
            for suffix, body in server(name):
                server_blocks.append(table(f"mcp_servers.{suffix}", body))
    elif shape == "empty-table":
        server_blocks.append(table("mcp_servers", comment_lines(indent)))
    elif shape == "table-dotted":
        body = "".join(
            keyvalue(f"{name}.command", '"npx"', indent) + keyvalue(f"{name}.args", '["-y"]', indent) for name in names
        )
        server_blocks.append(table("mcp_servers", body))
    elif shape == "root-dotted":
        pieces.append("".join(keyvalue(f"mcp_servers.{name}.command", '"npx"') for name in names))
    elif shape == "inline":
        entries = ", ".join(f'{name} = {{ command = "npx", args = ["-y"] }}' for name in names)
        pieces.append(keyvalue("mcp_servers", "{ " + entries + " }" if names else "{}"))
    if shape == "tables-split" and blocks and len(server_blocks) > 1:
        at = rng.randint(1, len(server_blocks) - 1)
        blocks = server_blocks[:at] + blocks + server_blocks[at:]
    else:
        where = rng.randint(0, len(blocks))
        blocks = blocks[:where] + server_blocks + blocks[where:]
    text = "".join(pieces)
    for block in blocks:
        text += (blank() if text else "") + block
    if rng.random() < 0.2:
        text += out.nl() + out.comment("toml") + out.nl()
    ending = rng.choices(["keep", "strip", "extra"], weights=[75, 15, 10])[0]
    if ending == "strip":
        text = text.rstrip("\r\n")
    elif ending == "extra":
        text += out.nl()
    return ConfigFile(text, out.comments)
