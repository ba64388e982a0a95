"""A second "node" for multi-node tests: a real OpenSSH server (Debian openssh-server) on a
loopback port with a throwaway host key and a generated client key; nothing leaves 127.0.0.0/8."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def available() -> str | None:
    """None when a test sshd can start here, else why not."""
    if not Path(SSHD).is_file():
        return "no sshd (Debian package openssh-server; .ci/run installs it)"
    if not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        return "no ssh client (Debian package openssh-client)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SshNode:
    """``with SshNode(tmp) as n:`` n.port, n.key, n.user; the server ends with the block."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.port = free_port()
        self.user = os.environ.get("USER") or __import__("pwd").getpwuid(os.getuid()).pw_name
        self.key = self.root / "id_ed25519"
        self.proc = None

    def __enter__(self):
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        for name in ("host_ed25519", "id_ed25519"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / name)], check=True)
        shutil.copy(self.root / "id_ed25519.pub", self.root / "authorized_keys")
        os.chmod(self.root / "authorized_keys", 0o600)
        cfg = self.root / "sshd_config"
        cfg.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.root / 'host_ed25519'}\n"
            f"PidFile {self.root / 'sshd.pid'}\nAuthorizedKeysFile {self.root / 'authorized_keys'}\n"
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nAllowTcpForwarding no\n"
            "X11Forwarding no\nPrintMotd no\nLogLevel ERROR\nMaxStartups 50\nMaxSessions 50\n")
        if os.getuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdout=subprocess.DEVNULL,
                                     stderr=open(self.root / "sshd.log", "ab"))
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        raise RuntimeError(f"sshd did not start: {(self.root / 'sshd.log').read_text(errors='replace')[-500:]}")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
