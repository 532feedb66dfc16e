"""Which PyInstaller unpack folders a run removes (bridge/system/unpacksweep.py), on real folders,
locks and processes; the frozen executable under the clients' kill patterns is in
test_frozen.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.system import unpacksweep
from bridge.system.unpacksweep import LOCK_NAME, bootloader_pid, hold_own_folder, sweep_dead_folders

pytestmark = pytest.mark.posix_only("flock and POSIX permissions")
# mypy --platform reads this too: the rest of the module is POSIX code.
if sys.platform == "win32":
    pytest.skip('flock and POSIX permissions', allow_module_level=True)


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def unpack_folder(parent: Path, pid: int, suffix: str = "AbC123", files: tuple[str, ...] = ("libpython.so", "lib/a.so")) -> Path:
    folder = parent / f"_MEI{pid:08x}{suffix}"
    folder.mkdir(mode=0o700)
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"x" * 1000)
    return folder


def age(folder: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(folder, (then, then))


@pytest.fixture
def tmp(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "tmp"
    folder.mkdir(mode=0o700)
    yield folder
    for top in folder.iterdir():  # pytest's own clean-up of old runs recurses: no deep chain is left to it
        if top.is_dir() and not top.is_symlink():
            remove_chain(top)


def remove_chain(top: Path) -> None:
    """Remove a chain ``top/d/d/…`` one level at a time, without recursion (shutil.rmtree
    and pytest's clean-up of old temporary folders recurse, and 1,200 levels pass Python's
    recursion limit)."""
    link = top / "d"
    while link.is_dir() and not link.is_symlink():
        inner = link / "d"
        if inner.is_dir() and not inner.is_symlink():
            os.rename(inner, top / "next")
            shutil.rmtree(link)
            os.rename(top / "next", link)
        else:
            shutil.rmtree(link)


@pytest.fixture
def own(tmp: Path) -> Path:
    """This run's folder: its bootloader (here: the test process) is alive."""
    return unpack_folder(tmp, os.getpid(), "Own123")


def test_names_carry_the_bootloader_pid() -> None:
    assert bootloader_pid("_MEI0000a1b2XyZ123") == 0xA1B2
    assert bootloader_pid("_MEIXyZ123") is None  # PyInstaller before 6.22.1: no pid
    assert bootloader_pid("_MEI0000a1b2XyZ12") is None
    assert bootloader_pid("_MEI0000a1b2XyZ.23") is None
    assert bootloader_pid("_MEI0000A1B2XyZ123") is None
    assert bootloader_pid("_MEI00000000XyZ123") is None
    assert bootloader_pid("xMEI0000a1b2XyZ123") is None


@pytest.mark.process
def test_a_dead_runs_folder_with_a_free_lock_is_removed_and_a_held_one_is_kept(tmp: Path, own: Path) -> None:
    dead = unpack_folder(tmp, dead_pid(), "Dead01")
    (dead / LOCK_NAME).touch()
    orphan = unpack_folder(tmp, dead_pid(), "Held01")
    # Its Python process outlived its bootloader and still runs: it holds the lock.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from bridge.system.unpacksweep import hold_own_folder; "
         "assert hold_own_folder(sys.argv[1]) is not None; print('held', flush=True); time.sleep(60)", str(orphan)],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert sweep_dead_folders(str(own)) == [dead.name]
        assert not dead.exists() and orphan.exists() and own.exists()
    finally:
        holder.kill()
        holder.wait()
    assert sweep_dead_folders(str(own)) == [orphan.name]  # the kernel dropped its lock


@pytest.mark.process
def test_a_live_bootloaders_folder_is_kept_even_without_a_lock(tmp: Path, own: Path) -> None:
    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        unpacking = unpack_folder(tmp, sibling.pid, "Live01")
        age(unpacking, 3600)
        assert sweep_dead_folders(str(own)) == []
        assert unpacking.exists()
    finally:
        sibling.kill()
        sibling.wait()


@pytest.mark.process
def test_a_folder_killed_while_unpacking_goes_after_the_grace_period(tmp: Path, own: Path) -> None:
    partial = unpack_folder(tmp, dead_pid(), "Part01", files=("libpython.so",))
    assert sweep_dead_folders(str(own)) == []  # it may be a live start whose bootloader alone died
    age(partial, unpacksweep.GRACE_SECONDS + 1)
    assert sweep_dead_folders(str(own)) == [partial.name]


@pytest.mark.process
def test_an_empty_folder_of_a_gone_bootloader_goes_at_once(tmp: Path, own: Path) -> None:
    """A run emptied its own folder, and Codex's SIGKILL came between the bootloader's
    removal of the lock file and its rmdir: nothing can start from an empty folder."""
    empty = unpack_folder(tmp, dead_pid(), "Empt01", files=())
    assert sweep_dead_folders(str(own)) == [empty.name]
    assert not empty.exists()
    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        starting = unpack_folder(tmp, sibling.pid, "Live02", files=())  # its bootloader is about to unpack
        assert sweep_dead_folders(str(own)) == [] and starting.exists()
    finally:
        sibling.kill()
        sibling.wait()


@pytest.mark.process
def test_a_run_empties_its_own_folder_but_its_lock_and_the_next_sweep_takes_the_rest_at_once(tmp: Path, own: Path) -> None:
    ending = unpack_folder(tmp, dead_pid(), "Endg01", files=("libpython.so", "lib/a.so", "lib/deep/b.so"))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from bridge.system.unpacksweep import empty_own_folder, hold_own_folder; "
         "lock = hold_own_folder(sys.argv[1]); empty_own_folder(sys.argv[1]); print('emptied', flush=True); sys.stdin.read()",
         str(ending)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"emptied\n"
        assert sorted(path.name for path in ending.iterdir()) == [LOCK_NAME]
        assert sweep_dead_folders(str(own)) == []  # its Python process still holds the lock
    finally:
        holder.kill()  # as Codex's SIGKILL: the bootloader (dead here) never cleans up
        holder.wait()
    assert sweep_dead_folders(str(own)) == [ending.name]  # no grace period to wait
    assert not ending.exists()


@pytest.mark.process
def test_another_programs_folder_without_our_lock_is_never_removed(tmp: Path, own: Path) -> None:
    other = unpack_folder(tmp, dead_pid(), "Othr01", files=("libpython.so", "their_app.so"))
    age(other, 3600)
    assert sweep_dead_folders(str(own)) == []
    assert (other / "their_app.so").exists()


@pytest.mark.process
def test_links_open_folders_and_unsafe_parents_are_left_alone(tmp: Path, own: Path, tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.mkdir()
    (target / LOCK_NAME).touch()
    (target / "keep").write_text("mine")
    link = tmp / f"_MEI{dead_pid():08x}Link01"
    link.symlink_to(target)
    inner_link = unpack_folder(tmp, dead_pid(), "Inln01")
    (inner_link / LOCK_NAME).symlink_to(target / LOCK_NAME)
    open_folder = unpack_folder(tmp, dead_pid(), "Open01")
    (open_folder / LOCK_NAME).touch()
    open_folder.chmod(0o755)
    assert sweep_dead_folders(str(own)) == []
    assert (target / "keep").read_text() == "mine" and inner_link.exists() and open_folder.exists()

    dead = unpack_folder(tmp, dead_pid(), "Dead02")
    (dead / LOCK_NAME).touch()
    tmp.chmod(0o777)  # anyone could swap entries here: nothing is trusted
    try:
        assert sweep_dead_folders(str(own)) == []
        tmp.chmod(0o1777)  # sticky, like /tmp: only the owner renames its entries
        assert sweep_dead_folders(str(own)) == [dead.name]
    finally:
        tmp.chmod(0o700)


@pytest.mark.process
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_another_users_folder_is_left_alone(tmp: Path, own: Path) -> None:
    theirs = unpack_folder(tmp, dead_pid(), "User01")
    (theirs / LOCK_NAME).touch()
    os.chown(theirs, 65534, 65534)
    assert sweep_dead_folders(str(own)) == []
    assert theirs.exists()


@pytest.mark.process
def test_the_own_lock_is_held_and_not_inherited(own: Path) -> None:
    fd = hold_own_folder(str(own))
    assert fd is not None
    try:
        assert not os.get_inheritable(fd)
        assert (own / LOCK_NAME).stat().st_mode & 0o777 == 0o600
        probe = subprocess.run(
            [sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY)\n"
             "try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError: sys.exit(7)", str(own / LOCK_NAME)],
        )
        assert probe.returncode == 7
    finally:
        os.close(fd)


def test_a_link_put_in_place_of_a_checked_folder_is_never_followed(tmp_path: Path) -> None:
    """Between the sweep's checks and the removal, the folder is replaced by a symbolic link
    to a victim folder: nothing in the victim is deleted (the removal opens the folder without
    following links and only goes on when it is the one checked)."""
    parent = tmp_path / "tmp"
    parent.mkdir(mode=0o700)
    dead = parent / "_MEI00000001abcdef"
    dead.mkdir(mode=0o700)
    (dead / "file").write_text("x")
    checked = os.lstat(dead)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep")
    moved = parent / "elsewhere"
    dead.rename(moved)
    dead.symlink_to(victim)
    assert not unpacksweep._remove(str(dead), checked)
    assert (victim / "precious").read_text() == "keep"
    assert dead.is_symlink()



def _sweep_in_thread(own: Path) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(sweep_dead_folders(str(own)))
        except BaseException as exc:  # noqa: BLE001 (the test reports it)
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(30)
    return worker, outcome


def _unblock(fifo: Path, worker: threading.Thread) -> None:
    """Let an open stuck on ``fifo`` return (so the test run can end)."""
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)


@pytest.mark.process
def test_a_fifo_in_place_of_the_lock_file_does_not_stall_the_sweep(tmp: Path, own: Path) -> None:
    """A plain open of a FIFO waits for a writer for ever: the sweep stopped there."""
    trap = unpack_folder(tmp, dead_pid(), "Fifo01")
    os.mkfifo(trap / LOCK_NAME, 0o600)
    dead = unpack_folder(tmp, dead_pid(), "Dead02")
    (dead / LOCK_NAME).touch()
    worker, outcome = _sweep_in_thread(own)
    try:
        assert not worker.is_alive(), "the sweep is stuck opening the FIFO"
        assert outcome == [[dead.name]]
        assert trap.exists()  # a lock file that is not a regular file: not a folder of ours
    finally:
        _unblock(trap / LOCK_NAME, worker)


def deep_folder(top: Path, depth: int) -> Path:
    """``top`` with ``depth`` folders nested in it (``top/d/d/…``), made relative to each
    other so that no path passes PATH_MAX."""
    descriptor = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", 0o700, dir_fd=descriptor)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=descriptor)
            os.close(descriptor)
            descriptor = inner
    finally:
        os.close(descriptor)
    return top


@pytest.mark.process
@pytest.mark.parametrize("with_lock", [True, False], ids=["dead-run", "no-lock"])
def test_a_folder_nested_1200_deep_does_not_break_the_sweep(tmp: Path, own: Path, with_lock: bool) -> None:
    """Recursion into 1,200 levels raised RecursionError out of the sweep ("never raises"),
    and the folders after it were not swept."""
    deep = deep_folder(unpack_folder(tmp, dead_pid(), "Deep01"), 1200)
    if with_lock:
        (deep / LOCK_NAME).touch()
    age(deep, 3600)
    dead = unpack_folder(tmp, dead_pid(), "Dead03")
    (dead / LOCK_NAME).touch()
    worker, outcome = _sweep_in_thread(own)
    assert not worker.is_alive()
    assert outcome == [[dead.name]]
    assert deep.exists()  # deeper than the sweep looks: kept (best effort), never followed down
    if not with_lock:
        assert (deep / "libpython.so").exists()  # not taken for a folder of this bundle


@pytest.mark.process
def test_the_switch_interval_is_restored_when_the_sweep_ends_however_it_ends(
    tmp: Path, own: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = sys.getswitchinterval()
    trap = unpack_folder(tmp, dead_pid(), "Fifo02")
    os.mkfifo(trap / LOCK_NAME, 0o600)
    deep_folder(unpack_folder(tmp, dead_pid(), "Deep02"), 1200)
    thread = unpacksweep.start_sweep(str(own))
    thread.join(30)
    try:
        assert not thread.is_alive(), "the sweep is stuck"
        assert sys.getswitchinterval() == before
    finally:
        _unblock(trap / LOCK_NAME, thread)
        sys.setswitchinterval(before)

    def fail(*args: object, **kwargs: object) -> list[str]:
        raise MemoryError

    monkeypatch.setattr(unpacksweep, "sweep_dead_folders", fail)
    errors: list[object] = []
    monkeypatch.setattr(threading, "excepthook", errors.append)
    unpacksweep.start_sweep(str(own)).join(30)
    assert sys.getswitchinterval() == before
    assert errors == []  # no traceback at start-up
