#!/usr/bin/env bash
# Installs what the Slurm integration tests (tests/jobs/test_taskprolog.py, tests/slurm_cluster.py)
# need: Debian's Slurm 22.05 (slurmctld, slurmd, client commands), munge, and slurmdbd with its
# MySQL/MariaDB storage plugin (accounting: `sacct --json`). Idempotent: exits at once when all of
# it is installed. Starts no service: the tests start their own private munged, slurmctld, slurmd
# and slurmdbd in a scratch directory (see tests/slurm_cluster.py) and stop them again.
#
# The accounting part also needs a MariaDB/MySQL server on 127.0.0.1:3306 where root may log in
# without a password; this script does not install or start one (pass --with-mariadb to install
# the package; starting it is left to the caller).
#
# Usage: bash .ci/install-slurm.sh [--with-mariadb]
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-slurm: not root and no sudo" >&2; exit 1; }
  SUDO="sudo"
fi

# command to check -> package that provides it
declare -A NEEDED=(
  [/usr/sbin/slurmctld]=slurm-wlm
  [/usr/sbin/slurmd]=slurm-wlm
  [/usr/bin/sbatch]=slurm-wlm
  [/usr/sbin/munged]=munge
  [/usr/bin/munge]=munge
  [/usr/sbin/slurmdbd]=slurmdbd
  [/usr/sbin/slurmrestd]=slurmrestd
  [/usr/bin/mysql]=mariadb-client
  [/usr/lib/x86_64-linux-gnu/slurm-wlm/accounting_storage_mysql.so]=slurm-wlm-mysql-plugin
)
if [ "${1:-}" = "--with-mariadb" ]; then
  NEEDED[/usr/sbin/mariadbd]=mariadb-server
fi

# Multi-arch path of the storage plugin: look it up for this machine.
ARCH_TRIPLET=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")
if [ "$ARCH_TRIPLET" != x86_64-linux-gnu ]; then
  unset 'NEEDED[/usr/lib/x86_64-linux-gnu/slurm-wlm/accounting_storage_mysql.so]'
  NEEDED[/usr/lib/$ARCH_TRIPLET/slurm-wlm/accounting_storage_mysql.so]=slurm-wlm-mysql-plugin
fi

missing=()
for path in "${!NEEDED[@]}"; do
  [ -e "$path" ] || missing+=("${NEEDED[$path]}")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-slurm: already installed ($(/usr/sbin/slurmctld -V 2>/dev/null || echo slurm), $(/usr/sbin/munged --version 2>&1 | head -n1))"
  exit 0
fi
# de-duplicate
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "install-slurm: installing ${missing[*]}"

# Keep the packages' maintainer scripts from starting munge/slurm services: a policy-rc.d that
# refuses every start, only for the duration of this install, and only if there is none already.
POLICY=/usr/sbin/policy-rc.d
OUR_POLICY=""
if [ ! -e "$POLICY" ]; then
  $SUDO sh -c "printf '#!/bin/sh\nexit 101\n' > $POLICY && chmod 755 $POLICY"
  OUR_POLICY=1
fi
cleanup() { if [ -n "$OUR_POLICY" ]; then $SUDO rm -f "$POLICY"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"

/usr/sbin/slurmctld -V
# (`slurmdbd -V` needs a slurmdbd.conf; ask dpkg instead.)
dpkg-query -W -f='${Package} ${Version}\n' slurmdbd munge
