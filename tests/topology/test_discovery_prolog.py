"""deploy/slurm/belvedere-discovery.sh, the node Prolog that reports Slingshot NICs to the portal.

The script runs for real (dash as /bin/sh, and bash) against a fake sysfs tree in tmp_path; the
POST goes to pytest-django's live server, so the token check, the discovery endpoint and the
database are the real ones.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from apps.topology.models import Node, TopologyRevision

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "slurm" / "belvedere-discovery.sh"
HOSTNAME = "nid000001"
XNAME = "x1000c0s1b0n0"
# Algorithmic MACs of group 0, switches 0-3, port 0: one NIC per switch, as on a GH200 node.
MACS = {f"hsn{i}": f"02:00:00:00:00:{0x40 * i:02x}" for i in range(4)}
SHELLS = [shell for shell in ("sh", "bash") if shutil.which(shell)]


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def node_tree(tmp_path):
    """A fake /sys with hsn0-3, an eth0 to ignore, and 4 GPUs bound to the nvidia driver."""
    sysfs = tmp_path / "sys"
    for name, mac in {**MACS, "eth0": "aa:bb:cc:dd:ee:ff"}.items():
        (sysfs / "class" / "net" / name).mkdir(parents=True)
        (sysfs / "class" / "net" / name / "address").write_text(mac + "\n")
    driver = sysfs / "bus" / "pci" / "drivers" / "nvidia"
    driver.mkdir(parents=True)
    for control in ("bind", "unbind", "new_id", "remove_id", "uevent"):
        (driver / control).write_text("")
    # GH200 GPUs sit in PCI domains 0009, 0019, 0029, 0039, not 0000.
    for domain in ("0009", "0019", "0029", "0039"):
        (driver / f"{domain}:01:00.0").mkdir()
        (driver / f"{domain}:01:00.0" / "class").write_text("0x030200\n")
    # An NVSwitch is bound by the same driver on HGX boards; it is not a GPU.
    (driver / "0000:c1:00.0").mkdir()
    (driver / "0000:c1:00.0" / "class").write_text("0x068000\n")
    xname_file = tmp_path / "xname"
    xname_file.write_text(XNAME + "\n")
    return tmp_path


def script_env(tree: Path, **overrides) -> dict:
    """A minimal environment, as slurmd gives a Prolog; no BELVEDERE_* from the caller's shell."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tree),
        "LC_ALL": "C",
        "BELVEDERE_LOG_STDERR": "1",
        "BELVEDERE_DISCOVERY_CONFIG": str(tree / "discovery.env"),
        "BELVEDERE_SYSFS": str(tree / "sys"),
        "BELVEDERE_XNAME_FILE": str(tree / "xname"),
        "BELVEDERE_DISCOVERY_STAMP_DIR": str(tree / "stamp"),
        "BELVEDERE_TOKEN_FILE": str(tree / "discovery.token"),
        "BELVEDERE_HOSTNAME": HOSTNAME,
        "BELVEDERE_GPU_MODEL": "GH200",
        "BELVEDERE_DISCOVERY_JITTER": "0",
        "BELVEDERE_TIMEOUT": "20",
    }
    env.update(overrides)
    return {key: value for key, value in env.items() if value is not None}


def run(tree: Path, *args: str, shell: str = "sh", timeout: float = 60, **overrides) -> subprocess.CompletedProcess:
    return subprocess.run([shell, str(SCRIPT), *args], env=script_env(tree, **overrides),
                          capture_output=True, text=True, timeout=timeout)


def write_token(tree: Path, user) -> None:
    from rest_framework.authtoken.models import Token

    token_file = tree / "discovery.token"
    token_file.write_text(Token.objects.create(user=user).key + "\n")
    token_file.chmod(0o600)


def stored_nics(hostname: str) -> list[tuple]:
    node = Node.objects.get(hostname=hostname)
    return sorted((nic.name, nic.mac, nic.switch.group.number, nic.switch.index, nic.port)
                  for nic in node.nics.select_related("switch__group"))


EXPECTED_NICS = [(name, mac, 0, switch, 0) for switch, (name, mac) in enumerate(MACS.items())]


def wait_for(predicate, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


# ---------------------------------------------------------------------------------------------
# --print: the body, from the node's own files
# ---------------------------------------------------------------------------------------------
def test_the_script_is_an_executable_posix_script():
    assert os.access(SCRIPT, os.X_OK), "a Prolog must be executable"
    assert SCRIPT.read_text().startswith("#!/bin/sh\n")


@pytest.mark.parametrize("shell", SHELLS)
def test_print_builds_the_record_from_sysfs_and_the_xname_file(node_tree, shell):
    result = run(node_tree, "--print", shell=shell)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body == {
        "hostname": HOSTNAME, "xname": XNAME, "gpus": 4, "gpu_model": "GH200",
        "nics": [{"name": name, "mac": mac} for name, mac in MACS.items()],
    }
    assert "eth0" not in result.stdout


def test_print_omits_gpus_without_an_nvidia_driver_and_drops_bad_nics(node_tree):
    shutil.rmtree(node_tree / "sys" / "bus")
    # A NIC without its fabric address yet (burned-in MAC) and one with a hostile "MAC".
    (node_tree / "sys" / "class" / "net" / "hsn2" / "address").write_text("00:40:a6:83:12:34\n")
    (node_tree / "sys" / "class" / "net" / "hsn3" / "address").write_text('02:00:00:00:00:c0"},{"x":"\n')
    result = run(node_tree, "--print", BELVEDERE_GPU_MODEL="")
    body = json.loads(result.stdout)
    assert "gpus" not in body and "gpu_model" not in body
    assert body["nics"] == [{"name": "hsn0", "mac": MACS["hsn0"]}, {"name": "hsn1", "mac": MACS["hsn1"]}]
    assert "hsn2 MAC 00:40:a6:83:12:34 (not a Slingshot algorithmic MAC" in result.stderr
    assert "hsn3 MAC" in result.stderr


@pytest.mark.parametrize("hostname", ['nid0001"; rm -rf /', "nid0001\nevil", "nid0001 x", "-n", "../etc"])
def test_a_hostile_hostname_is_refused_and_never_printed(node_tree, hostname):
    result = run(node_tree, "--print", BELVEDERE_HOSTNAME=hostname)
    assert result.returncode == 0
    assert result.stdout == ""
    # Logged in a harmless form: one line, and no quote, blank or newline of the value in it.
    logged = re.fullmatch(r"belvedere-discovery: not reporting: (.*) is not a valid host name\n", result.stderr)
    assert logged, result.stderr
    assert not set(logged.group(1)) & set('"; \n')


def test_the_slurm_node_name_is_the_default_hostname(node_tree):
    result = run(node_tree, "--print", BELVEDERE_HOSTNAME=None, SLURMD_NODENAME="nid000042")
    assert json.loads(result.stdout)["hostname"] == "nid000042"


def test_a_hostile_xname_is_dropped_and_the_rest_is_sent(node_tree):
    (node_tree / "xname").write_text('x1000c0s1b0n0","hostname":"nid999999\n')
    result = run(node_tree, "--print")
    body = json.loads(result.stdout)
    assert body["hostname"] == HOSTNAME and "xname" not in body
    assert "nid999999" not in result.stdout
    assert "(not a node xname)" in result.stderr


def test_the_config_file_is_parsed_not_run_and_the_environment_wins(node_tree, tmp_path):
    canary = tmp_path / "ran"
    (node_tree / "discovery.env").write_text(
        "# site settings\n"
        "export BELVEDERE_HOSTNAME=nid000002\n"
        'BELVEDERE_GPU_MODEL="GH200 120GB"\n'
        f"touch {canary}\n"
        f"BELVEDERE_XNAME_FILE=$(touch {canary})\n"
        "PATH=/nowhere\n"
    )
    result = run(node_tree, "--print", BELVEDERE_HOSTNAME=None, BELVEDERE_GPU_MODEL=None, BELVEDERE_XNAME_FILE=None)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["hostname"] == "nid000002" and body["gpu_model"] == "GH200 120GB"
    assert "xname" not in body  # the file named "$(touch ...)" does not exist
    assert not canary.exists()
    assert "unknown config setting PATH" in result.stderr

    overridden = run(node_tree, "--print", BELVEDERE_HOSTNAME="nid000003", BELVEDERE_GPU_MODEL=None)
    assert json.loads(overridden.stdout)["hostname"] == "nid000003"


def test_without_belvedere_url_the_prolog_exits_silently(node_tree):
    result = run(node_tree, BELVEDERE_URL=None)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


# ---------------------------------------------------------------------------------------------
# Against the real portal (live server)
# ---------------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_foreground_creates_the_node_then_skips_an_unchanged_record(node_tree, live_server, make_user):
    write_token(node_tree, make_user("svc", is_staff=True))

    first = run(node_tree, "--foreground", BELVEDERE_URL=live_server.url)
    assert first.returncode == 0, first.stderr
    assert f"reported {HOSTNAME}: 4 NICs, {XNAME}, 4 GPUs" in first.stderr and "HTTP 200, changed" in first.stderr
    node = Node.objects.get(hostname=HOSTNAME)
    assert (node.xname, node.gpus, node.gpu_model) == (XNAME, 4, "GH200")
    assert stored_nics(HOSTNAME) == EXPECTED_NICS
    assert TopologyRevision.objects.count() == 1
    stamp = node_tree / "stamp" / "discovery.sha256"
    assert len(stamp.read_text().strip()) == 64

    second = run(node_tree, "--foreground", BELVEDERE_URL=live_server.url)
    assert second.returncode == 0, second.stderr
    assert f"skipped {HOSTNAME}" in second.stderr and "unchanged since the last report" in second.stderr
    assert TopologyRevision.objects.count() == 1

    # --force sends anyway; the portal sees nothing new and records no revision either.
    forced = run(node_tree, "--foreground", "--force", BELVEDERE_URL=live_server.url)
    assert forced.returncode == 0, forced.stderr
    assert "HTTP 200, unchanged" in forced.stderr
    assert TopologyRevision.objects.count() == 1

    # A changed record (a NIC moved to another switch) is sent again.
    (node_tree / "sys" / "class" / "net" / "hsn3" / "address").write_text("02:00:00:00:01:00\n")
    moved = run(node_tree, "--foreground", BELVEDERE_URL=live_server.url)
    assert moved.returncode == 0 and "HTTP 200, changed" in moved.stderr
    assert stored_nics(HOSTNAME)[3] == ("hsn3", "02:00:00:00:01:00", 0, 4, 0)
    assert TopologyRevision.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_token_without_the_permission_fails_in_foreground_only(node_tree, live_server, make_user):
    from django.contrib.auth.models import Permission

    service = make_user("svc-discovery")
    write_token(node_tree, service)

    refused = run(node_tree, "--foreground", BELVEDERE_URL=live_server.url)
    assert refused.returncode == 22, refused.stderr  # curl --fail(-with-body) on HTTP >= 400
    assert "HTTP 403" in refused.stderr and "topology.add_node" in refused.stderr
    assert not Node.objects.filter(hostname=HOSTNAME).exists()
    assert not (node_tree / "stamp" / "discovery.sha256").exists()  # retried at the next job

    # The Prolog mode exits 0 at once whatever happens, even with nothing listening.
    started = time.monotonic()
    prolog = run(node_tree, BELVEDERE_URL="http://127.0.0.1:9")
    assert prolog.returncode == 0 and prolog.stdout == ""
    assert time.monotonic() - started < 10  # generous; the point is that it does not wait

    # The documented set-up: a service account holding topology.add_node.
    service.user_permissions.add(Permission.objects.get(codename="add_node", content_type__app_label="topology"))
    allowed = run(node_tree, "--foreground", BELVEDERE_URL=live_server.url)
    assert allowed.returncode == 0, allowed.stderr
    assert stored_nics(HOSTNAME) == EXPECTED_NICS


@pytest.mark.django_db(transaction=True)
def test_the_prolog_mode_sends_from_a_detached_process_that_survives_slurmd_cleanup(node_tree, live_server, make_user):
    write_token(node_tree, make_user("svc", is_staff=True))
    # slurmd starts the Prolog in its own process group and kills that group once the Prolog
    # exits; the sender must have left it (setsid) to survive.
    prolog = subprocess.Popen(["sh", str(SCRIPT)], env=script_env(node_tree, BELVEDERE_URL=live_server.url),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    stdout, stderr = prolog.communicate(timeout=10)
    try:
        os.killpg(prolog.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    assert prolog.returncode == 0 and stdout == "", stderr
    assert wait_for(lambda: Node.objects.filter(hostname=HOSTNAME).exists()), "the background POST never arrived"
    assert stored_nics(HOSTNAME) == EXPECTED_NICS
    assert wait_for(lambda: (node_tree / "stamp" / "discovery.sha256").exists(), 5)


def test_an_unusable_stamp_directory_is_not_trusted(node_tree):
    # World-writable (as a user could make /var/tmp/belvedere): root must not write into it.
    stamp = node_tree / "stamp"
    stamp.mkdir()
    stamp.chmod(0o777)
    (node_tree / "discovery.token").write_text("0123456789abcdef0123456789abcdef01234567\n")
    result = run(node_tree, "--foreground", BELVEDERE_URL="http://127.0.0.1:9", BELVEDERE_TIMEOUT="2")
    assert result.returncode == 7, result.stderr  # curl: could not connect
    assert "stamp directory" in result.stderr and "unusable" in result.stderr
    assert "no HTTP answer" in result.stderr
    assert list(stamp.iterdir()) == []
