"""Broker credentials: one user and a random password per run or per deployment, and mosquitto's
password file for them, written here rather than by ``mosquitto_passwd``.

Every broker meshcast starts refuses anonymous and wrong-password logins: the processes runtime's
mosquitto, a processes deployment's, a containers run's and a containers deployment's broker
container. Each gets a password file holding one entry, in the form ``mosquitto_passwd`` writes by
default (mosquitto 2: ``user:$7$iterations$salt$hash``, PBKDF2-HMAC-SHA512 with a 12-byte salt,
both base64). Writing it in Python keeps ``mosquitto_passwd`` off the list of what a host needs: a
containers run's broker runs in a container, and the host may have no mosquitto at all.

The clients (nodes and coordinators) get the credentials as ``MESHCAST_MQTT_USER`` and
``MESHCAST_MQTT_PASSWORD`` (:meth:`Credentials.env`; read by ``node.transport.mqtt.parse_broker``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["BROKER_USER", "PBKDF2_ITERATIONS", "Credentials", "password_entry", "write_password_file"]

BROKER_USER: Final = "meshcast"
PBKDF2_ITERATIONS: Final = 101
"""mosquitto_passwd's default: the passwords are random 128-bit tokens, so more rounds would only
slow down the broker's check of every node's login (hundreds of them at a run's start)."""
SALT_BYTES: Final = 12
"""The salt length ``mosquitto_passwd`` uses."""
HASH_BYTES: Final = 64
"""SHA-512's digest length: the derived key length mosquitto checks against."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """The one user and password of a broker meshcast starts."""

    user: str
    password: str

    @classmethod
    def generate(cls) -> Credentials:
        """:data:`BROKER_USER` with a fresh random password (128 bits, URL-safe)."""
        return cls(BROKER_USER, secrets.token_urlsafe(16))

    def env(self) -> dict[str, str]:
        """The clients' environment that carries these credentials."""
        return {"MESHCAST_MQTT_USER": self.user, "MESHCAST_MQTT_PASSWORD": self.password}


def password_entry(
    user: str, password: str, *, salt: bytes | None = None, iterations: int = PBKDF2_ITERATIONS
) -> str:
    """One line of a mosquitto 2 password file (no newline): ``user:$7$iterations$salt$hash``,
    PBKDF2-HMAC-SHA512 of ``password`` (``salt``: random unless given, for tests)."""
    if ":" in user or "\n" in user or not user:
        raise ValueError(f"MQTT user {user!r}: no ':' or newline, not empty")
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    key = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations, HASH_BYTES)
    b64 = base64.b64encode
    return f"{user}:$7${iterations}${b64(salt).decode()}${b64(key).decode()}"


def write_password_file(path: Path, credentials: Credentials) -> Path:
    """Write ``credentials`` as mosquitto's password file at ``path``, readable by its owner only
    (mode 0600, also when it existed before); ``path``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password_entry(credentials.user, credentials.password) + "\n")
    return path
