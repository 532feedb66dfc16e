"""How ``--launch`` and ``--token-command`` are split into a program and its arguments
(``bridge/cli/buildconfig.split_command``): as a POSIX shell splits words, and on Windows as
Windows programs read their command line (``CommandLineToArgvW``), so that a program under
``C:\\Program Files`` starts (a newcomer's reading found that the quotes stayed in the
program's name, which Windows then cannot find)."""

from __future__ import annotations

import pytest

from bridge.cli.buildconfig import split_command


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (r'"C:\Program Files\MyApp\MyApp.exe" --background', [r"C:\Program Files\MyApp\MyApp.exe", "--background"]),
        (r"C:\Users\me\AppData\Local\MyApp\MyApp.exe", [r"C:\Users\me\AppData\Local\MyApp\MyApp.exe"]),
        (r'app.exe --name="my app" x', ["app.exe", "--name=my app", "x"]),
        (r'app.exe "a b"  c', ["app.exe", "a b", "c"]),
        (r'app.exe a\\"b c"', ["app.exe", r"a\b c"]),  # 2n backslashes before a quote: n, and the quote groups
        (r'app.exe a\"b', ["app.exe", 'a"b']),  # 2n+1: n and a literal quote
        (r'app.exe C:\dir\ x', ["app.exe", "C:\\dir\\", "x"]),  # backslashes elsewhere are literal
        ('app.exe ""', ["app.exe", ""]),  # an empty argument
        ('"app.exe" "say ""hi"""', ["app.exe", 'say "hi"']),  # "" inside quotes: a literal quote
    ],
)
def test_windows_command_lines_split_as_windows_programs_read_them(line: str, words: list[str]) -> None:
    assert split_command(line, windows=True) == words


def test_posix_command_lines_split_as_a_shell_splits_words() -> None:
    assert split_command("'/opt/My App/myapp' --background \"a b\"", windows=False) == ["/opt/My App/myapp", "--background", "a b"]
    with pytest.raises(ValueError):
        split_command("myapp 'unclosed", windows=False)


@pytest.mark.parametrize("windows", [True, False])
def test_an_empty_command_is_refused(windows: bool) -> None:
    with pytest.raises(ValueError, match="empty"):
        split_command("   ", windows=windows)
