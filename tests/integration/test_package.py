"""Issue 35: the Debian package CMake's CPack builds (`cpack -G DEB`), installed with dpkg into a
scratch root, runs: the binary answers, the units' command lines (their ExecStart with the
packaged /etc/dais/*.env) start a scheduler, a node and a gateway that join a real etcd."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import requests

from conftest import free_port, wait_for


@pytest.fixture(scope="module")
def package(dais_bin, tmp_path_factory) -> Path:
    build = Path(dais_bin).parents[2]  # <build>/src/cmd/dais
    if not (build / "CPackConfig.cmake").exists():
        pytest.fail(f"{build}/CPackConfig.cmake missing: configure with CMake first")
    out = tmp_path_factory.mktemp("package")
    r = subprocess.run(["cpack", "-G", "DEB", "--config", str(build / "CPackConfig.cmake"),
                        "-B", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    debs = list(out.glob("dais_*_amd64.deb"))
    assert len(debs) == 1, (list(out.iterdir()), r.stdout)
    return debs[0]


@pytest.fixture(scope="module")
def installed(package, tmp_path_factory) -> Path:
    """The package installed by dpkg into a scratch root (its dependencies are this machine's)."""
    root = tmp_path_factory.mktemp("root")
    (root / "var/lib/dpkg/info").mkdir(parents=True)
    (root / "var/lib/dpkg/updates").mkdir()
    (root / "var/lib/dpkg/status").touch()
    r = subprocess.run(["dpkg", f"--root={root}", "--force-depends", "--force-not-root", "-i",
                        str(package)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Setting up dais" in r.stdout, r.stdout + r.stderr
    return root


def test_package_names_its_version_and_real_dependencies(package, dais_bin):
    fields = subprocess.run(["dpkg-deb", "-f", str(package), "Package", "Version", "Depends"],
                            capture_output=True, text=True, check=True).stdout
    version = subprocess.run([str(dais_bin), "--version"], capture_output=True, text=True,
                             check=True).stdout.split()[1]
    assert "Package: dais" in fields and f"Version: {version}" in fields, fields
    assert package.name == f"dais_{version}_amd64.deb"
    depends = re.search(r"Depends: (.*)", fields).group(1)
    names = [d.strip().split()[0] for d in depends.split(",")]
    for lib in ("libgrpc++", "libtorch", "libxgboost", "libstdc++6"):
        assert any(n.startswith(lib) for n in names), f"{lib} not in Depends: {depends}"
    for name in names:  # each names a package that exists (installed here: the build's libraries)
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", name], capture_output=True,
                           text=True)
        assert "install ok installed" in r.stdout, f"Depends names {name}: {r.stdout}{r.stderr}"


def test_installed_files(installed):
    assert subprocess.run([str(installed / "usr/bin/dais"), "--version"], capture_output=True,
                          text=True, check=True).stdout.startswith("dais ")
    units = {p.name for p in (installed / "usr/lib/systemd/system").glob("*.service")}
    assert units == {"dais-node.service", "dais-scheduler.service", "dais-gateway.service",
                     "dais-console.service", "dais-etcd.service"}, units
    conffiles = (installed / "var/lib/dpkg/info/dais.conffiles").read_text().split()
    assert sorted(conffiles) == ["/etc/dais/console.env", "/etc/dais/gateway.env",
                                 "/etc/dais/node.env", "/etc/dais/scheduler.env"]
    assert all((installed / c.lstrip("/")).is_file() for c in conffiles)
    completion = installed / "usr/share/bash-completion/completions/dais"
    assert "complete -o default -F _dais dais" in completion.read_text()
    share = installed / "usr/share/dais"
    assert (share / "prometheus/dais-alerts.yml").is_file()
    assert (installed / "usr/share/doc/dais/cluster.md").is_file()


def unit_command(root: Path, unit: str, env: dict[str, str], ports: dict[str, int]) -> list[str]:
    """The unit's ExecStart as systemd would run it: continuation lines joined, ${VAR} one word,
    $VAR split into words; /usr/bin/dais the installed one; fixed ports made free ones."""
    text = (root / "usr/lib/systemd/system" / unit).read_text().replace("\\\n", " ")
    exec_start = re.search(r"^ExecStart=(.*)$", text, re.M).group(1)
    words = []
    for word in exec_start.split():
        braced = re.fullmatch(r"\$\{(\w+)\}", word)
        if braced:
            words.append(env[braced.group(1)])
        elif word.startswith("$"):
            words.extend(env.get(word[1:], "").split())
        else:
            words.append(word)
    words[0] = str(root / words[0].lstrip("/"))
    for i, w in enumerate(words[:-1]):
        if w in ports:
            words[i + 1] = str(ports[w])
    return words


def read_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines()
                if line and not line.startswith("#"))


def test_the_units_command_lines_start_a_cluster(installed, etcd_server, model_repo, tmp_path):
    etc = installed / "etc/dais"
    port_flags = ("--http-port", "--grpc-port", "--metrics-port")
    procs, ports = [], {}
    try:
        for unit, env_file, extra in (
                ("dais-scheduler.service", "scheduler.env", {}),
                ("dais-node.service", "node.env", {"DAIS_REPOSITORY": str(model_repo)}),
                ("dais-gateway.service", "gateway.env", {}),
                ("dais-console.service", "console.env", {})):
            env = {**read_env(etc / env_file), "DAIS_ETCD": etcd_server.endpoint, **extra}
            unit_ports = ports[unit] = {f: free_port() for f in port_flags}
            cmd = unit_command(installed, unit, env, unit_ports)
            log = open(tmp_path / f"{unit}.log", "wb")
            procs.append((unit, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                 env={**os.environ, "HOME": str(tmp_path)})))
        wait_for(lambda: etcd_server.get_prefix("/dais/scheduler/leader"), 30, "a leader")
        node = read_env(etc / "node.env")["DAIS_NODE_ID"]
        wait_for(lambda: etcd_server.get_prefix(f"/dais/nodes/{node}"), 60, "the node joined")
        gateway = read_env(etc / "gateway.env")["DAIS_GATEWAY_ID"]
        wait_for(lambda: etcd_server.get_prefix(f"/dais/gateways/{gateway}"), 30,
                 "the gateway registered")
        console = f"http://127.0.0.1:{ports['dais-console.service']['--http-port']}"

        def console_sees_the_node():
            try:
                state = requests.get(console + "/api/state", timeout=5).json()
            except requests.RequestException:
                return False
            return [n["node"] for n in state.get("nodes", [])] == [node]
        wait_for(console_sees_the_node, 30, "the console's page showing the node")
    finally:
        for unit, p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)  # the units' KillSignal
        for unit, p in procs:
            try:
                rc = p.wait(45)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = p.wait(10)
            log = (tmp_path / f"{unit}.log").read_text(errors="replace")
            assert rc == 0, f"{unit} exited {rc}:\n{log[-3000:]}"
