"""Credential files by OpenSSH's rules, and the log file (``bridge/system/privatefile.py``, ``bridge/system/logsink.py``).

What another local user could do to the bridge's files: point a symbolic link at another
of the user's secrets, own the file, or own (or be allowed to write) a folder above it and
swap the file. Each case is refused with a message that says which rule and how to fix it,
and never holds the file's content.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.app.discovery import DiscoveryError, read_discovery_file, write_discovery_file
from bridge.app.tokens import TokenSourceError
from bridge.app.tokens import read_credential as read_token_file
from bridge.system.logsink import open_log_file
from bridge.system.privatefile import UnsafeFileError, read_private_file, write_private_file

pytestmark = pytest.mark.posix_only("POSIX ownership and modes")
# mypy --platform reads this too: the rest of the module is POSIX code.
if sys.platform == "win32":
    pytest.skip("POSIX ownership and modes", allow_module_level=True)
as_root = pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="needs root to give a file to another uid")
OTHER_UID = 54_321
SECRET = "tok-PLACEHOLDER-0123456789"


@pytest.fixture
def private(tmp_path: Path) -> Path:
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    return folder


def secret_file(folder: Path, name: str = "token", mode: int = 0o600, text: str = SECRET) -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_symlinked_token_file_is_refused_and_its_target_never_read(private: Path) -> None:
    other_secret = secret_file(private, "id_ed25519", text="OTHER-SECRET-abcdef")
    link = private / "token"
    link.symlink_to(other_secret)
    with pytest.raises(TokenSourceError, match="symbolic link") as caught:
        read_token_file(link, "token file")
    assert "OTHER-SECRET" not in str(caught.value)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_secret_files_any_other_may_read_get_openssh_s_message(private: Path, mode: int) -> None:
    path = secret_file(private, mode=mode)
    with pytest.raises(UnsafeFileError, match=rf"Permissions {mode:04o} for '{path}' are too open.*chmod 600"):
        read_private_file(path, "secret file")


@as_root
def test_a_token_file_owned_by_another_user_is_refused(private: Path) -> None:
    path = secret_file(private)
    os.chown(path, OTHER_UID, -1)
    with pytest.raises(UnsafeFileError, match=f"bad ownership for the token file '{path}': it belongs to uid {OTHER_UID}"):
        read_private_file(path, "token file")


@pytest.mark.parametrize("level", [0, 1])
def test_a_folder_above_the_file_that_others_may_write_is_refused(tmp_path: Path, level: int) -> None:
    outer = tmp_path / "outer"
    inner = outer / "inner"
    inner.mkdir(parents=True)
    path = secret_file(inner)
    open_folder = inner if level == 0 else outer
    open_folder.chmod(0o777)
    with pytest.raises(UnsafeFileError, match=f"bad ownership or modes for directory {open_folder} \\(mode 0777"):
        read_private_file(path, "token file")


@as_root
def test_a_folder_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    path = secret_file(folder)
    os.chown(folder, OTHER_UID, -1)
    with pytest.raises(UnsafeFileError, match=f"bad ownership or modes for directory {folder} \\(owned by uid {OTHER_UID}"):
        read_private_file(path, "token file")


def test_a_sticky_world_writable_folder_is_accepted(tmp_path: Path) -> None:
    """Like /tmp: nobody else may rename or delete this user's entries there."""
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o1777)
    assert read_private_file(secret_file(folder), "token file") == SECRET.encode()


def test_a_fifo_is_refused_without_hanging(private: Path) -> None:
    fifo = private / "token"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(UnsafeFileError, match="not a regular file"):
        read_private_file(fifo, "token file")


def test_discovery_files_the_same_rules_plus_a_token_must_not_be_readable(private: Path, tmp_path: Path) -> None:
    path = private / "mcp-endpoint.json"
    write_discovery_file(path, url="http://127.0.0.1:1/mcp", token=SECRET)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    with pytest.raises(DiscoveryError, match="Permissions 0644 .* it holds a token") as caught:
        read_discovery_file(path)
    assert SECRET not in str(caught.value)
    write_discovery_file(path, url="http://127.0.0.1:1/mcp")  # no token: readable is fine
    path.chmod(0o644)
    assert read_discovery_file(path).url == "http://127.0.0.1:1/mcp"
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(DiscoveryError, match="symbolic link"):
        read_discovery_file(link)
    private.chmod(0o777)
    with pytest.raises(DiscoveryError, match="bad ownership or modes for directory"):
        read_discovery_file(path)


def test_write_private_file_is_atomic_0600_and_refuses_an_open_folder(private: Path, tmp_path: Path) -> None:
    path = private / "state" / "secret"
    write_private_file(path, b"one")
    write_private_file(path, b"two")
    assert path.read_bytes() == b"two" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["secret"]
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    with pytest.raises(UnsafeFileError, match="bad ownership or modes"):
        write_private_file(open_folder / "secret", b"x")
    assert not (open_folder / "secret").exists()


# -- --log-file --------------------------------------------------------------------------


def test_a_new_log_file_is_0600_and_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "bridge.log"
    with open_log_file(path) as handle:
        handle.write(b"one\n")
    with open_log_file(path) as handle:
        handle.write(b"two\n")
    assert path.read_bytes() == b"one\ntwo\n" and stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.process
def test_the_bridge_refuses_a_log_file_that_is_a_symlink_and_leaves_the_target_alone(tmp_path: Path) -> None:
    target = tmp_path / "bashrc"
    target.write_text("# the user's file\n")
    link = tmp_path / "bridge.log"
    link.symlink_to(target)
    result = subprocess.run(
        [sys.executable, "-m", "bridge", "--url", "http://127.0.0.1:9/mcp", "--log-file", str(link)],
        input=b"", capture_output=True, timeout=60,
    )
    assert result.returncode != 0 and b"symbolic link" in result.stderr, result.stderr[-2000:]
    assert result.stdout == b""
    assert target.read_text() == "# the user's file\n"


@pytest.mark.process
def test_the_bridge_creates_its_log_file_0600(tmp_path: Path) -> None:
    path = tmp_path / "bridge.log"
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode() + b"\n"
    subprocess.run(
        [sys.executable, "-m", "bridge", "--url", "http://127.0.0.1:9/mcp", "--log-file", str(path), "--log-level", "info"],
        input=ping, capture_output=True, timeout=60,
    )
    assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.posix_only("the umask")
@pytest.mark.parametrize("umask", [0o002, 0o022, 0o000])
def test_missing_folders_are_created_0700_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    """Ubuntu's and Fedora's 0002 umask made the parents 0775, which the folder check
    then refused."""
    from bridge.system.privatefile import write_private_file

    path = tmp_path / "a" / "b" / "c" / "mcp-endpoint.json"
    old = os.umask(umask)
    try:
        write_private_file(path, b"{}")
    finally:
        os.umask(old)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_state_file_digest_is_stable_and_spreads_keys() -> None:
    """The launch lock's and the catalog's file names: 16 hex digits, the same for the same
    key in every process (bridges of one app share the lock), different for different keys."""
    from bridge.system.privatefile import state_file_digest

    assert state_file_digest("app|http://127.0.0.1:1/mcp") == state_file_digest("app|http://127.0.0.1:1/mcp")
    assert state_file_digest("app|http://127.0.0.1:1/mcp") == "b42b1043f6634a9b"  # BLAKE2b, 8 bytes, any platform
    names = {state_file_digest(f"app|http://127.0.0.1:{port}/mcp") for port in range(1000, 3000)}
    assert len(names) == 2000
    assert all(len(name) == 16 and int(name, 16) >= 0 for name in names)


def _crc_adler_twins(prefix: str, suffix: str = "") -> tuple[str, str]:
    """Two texts ``prefix + …`` whose keys (``prefix`` and ``suffix`` around them) have the
    same CRC-32 and the same Adler-32: made in milliseconds, as issue 41 found. Each block
    "bccb" → "cbbc" keeps both Adler-32 sums (the byte sum, and the sum weighted by place)
    and flips the lowest bit of 4 bytes, a linear change of the CRC-32; 40 blocks give a
    set whose changes cancel (Gaussian elimination over GF(2))."""
    import zlib

    blocks = 40
    head, tail = (prefix).encode(), suffix.encode()
    size = len(head) + 4 * blocks + len(tail)
    zero = zlib.crc32(bytes(size))
    basis: dict[int, tuple[int, int]] = {}
    chosen = 0
    for block in range(blocks):
        mask = bytearray(size)
        mask[len(head) + 4 * block : len(head) + 4 * block + 4] = b"\x01" * 4
        change, combo = zlib.crc32(bytes(mask)) ^ zero, 1 << block
        for bit in sorted(basis, reverse=True):
            if change >> bit & 1:
                change, combo = change ^ basis[bit][0], combo ^ basis[bit][1]
        if change == 0:
            chosen = combo
            break
        basis[change.bit_length() - 1] = (change, combo)
    assert chosen
    twin = "".join("cbbc" if chosen >> block & 1 else "bccb" for block in range(blocks))
    return prefix + "bccb" * blocks, prefix + twin


def test_two_endpoints_never_share_a_catalog_or_a_launch_lock() -> None:
    """Issue 41, 6: two URLs with the same CRC-32 + Adler-32 name were found in
    milliseconds; each then overwrote the other's catalog and took its launch lock."""
    import zlib

    from bridge.app.launcher import default_lock_path
    from bridge.app.servedcatalog import default_catalog_path

    one, two = _crc_adler_twins("mcp-app-bridge\0http://127.0.0.1:8000/mcp?x=")
    assert one != two and zlib.crc32(one.encode()) == zlib.crc32(two.encode()) and zlib.adler32(one.encode()) == zlib.adler32(two.encode())
    url_one, url_two = one.split("\0", 1)[1], two.split("\0", 1)[1]
    assert default_catalog_path("mcp-app-bridge", url_one) != default_catalog_path("mcp-app-bridge", url_two)
    assert default_lock_path(one) != default_lock_path(two)
