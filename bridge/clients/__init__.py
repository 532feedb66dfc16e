"""Getting an AI client to start the bridge (public): each client's configuration file and
format, and the entry that starts the bridge. Loaded only by the ``config`` commands."""

from .clienttable import (
    CLIENT_INFO,
    CLIENTS,
    ClientConfigError,
    ClientInfo,
    ServerEntry,
    app_entry,
    config_path,
    entry_document,
    entry_object,
    read_servers,
)
from .command import split_secrets
from .files import install_entry, uninstall_entry

__all__ = [
    "CLIENTS",
    "CLIENT_INFO",
    "ClientConfigError",
    "ClientInfo",
    "ServerEntry",
    "app_entry",
    "config_path",
    "entry_document",
    "entry_object",
    "install_entry",
    "read_servers",
    "split_secrets",
    "uninstall_entry",
]
