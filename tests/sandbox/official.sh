#!/usr/bin/env bash
# The official engine's sandbox: a Debian 13 root file system (glibc 2.41, GCC 14's libstdc++,
# which the PyPI `tritonserver` bindings need) with a CPython 3.12 and the rig installed in it,
# entered with chroot. Built once and cached outside the repository; later runs reuse it.
#
#   bash tests/sandbox/official.sh                 # build if needed, run the official tests
#   bash tests/sandbox/official.sh -- -k soak      # extra pytest arguments after --
#   bash tests/sandbox/official.sh --shell         # a shell inside, the rig's venv first on PATH
#   bash tests/sandbox/official.sh --run CMD ...   # one command inside (e.g. --run rig doctor)
#   bash tests/sandbox/official.sh --rebuild       # throw the cached tree away first
#
# Where the sandbox cannot be built (not root, no chroot, no CPython 3.12 on the host, no access
# to Debian's packages) it prints why and exits 0: the official tests are then skipped, never
# failed, for that reason. A test that runs and fails exits non-zero.
#
# Environment: RIG_SANDBOX (the tree; default ~/.cache/triton-soak-rig-sandbox/trixie),
# RIG_SANDBOX_PYTHON (a CPython 3.12 on the host; default: pyenv's, or python3.12 on PATH),
# RIG_SANDBOX_MIRROR (a Debian mirror; default: the host's apt source, else deb.debian.org).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SANDBOX="${RIG_SANDBOX:-$HOME/.cache/triton-soak-rig-sandbox/trixie}"
RIG_CACHE="${RIG_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/triton-soak-rig}"
VENV=/opt/rig-venv
# Bump when the recipe changes: a tree built by an older recipe is rebuilt.
RECIPE=3
PACKAGES=ca-certificates,libffi8,libssl3t64,zlib1g,libnuma1,libarchive13t64,libre2-11,libb64-0d,libgomp1,gcc,libc6-dev,procps,binutils

mode=test
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --shell) mode=shell; shift ;;
    --run) mode=run; shift; args=("$@"); break ;;
    --rebuild) rebuild=1; shift ;;
    --build-only) mode=build; shift ;;
    --) shift; args=("$@"); break ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "official.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

skip() {  # the sandbox cannot be had here: say why; the official tests are skipped, not failed
  echo "SKIPPED official-engine tests: $*"
  exit 0
}

[ "$(id -u)" = 0 ] || skip "the sandbox needs root (chroot and bind mounts); run as root"
command -v chroot >/dev/null || skip "no chroot command on this host"
[ "$(uname -m)" = x86_64 ] || skip "the tritonserver wheels are for x86-64 only"

# One run at a time per tree. The venv inside is an editable install of one checkout: a run from
# another checkout reinstalls it, and a run still going would then test that checkout's code
# (and the first to finish would unmount the other's binds). The lock is this script's alone:
# the commands inside do not inherit it, so nothing they leave behind can hold it.
mkdir -p "$(dirname "$SANDBOX")"
if command -v flock >/dev/null; then
  exec 9>"$SANDBOX.lock"
  if ! flock -n 9; then
    echo "official.sh: another run is using $SANDBOX; waiting for it to finish ..." >&2
    flock 9
  fi
fi

find_python312() {
  local cand
  for cand in "${RIG_SANDBOX_PYTHON:-}" "$(command -v pyenv >/dev/null && pyenv prefix 3.12 2>/dev/null | head -1)/bin/python3.12" \
              "$(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | tail -1)" "$(command -v python3.12 || true)"; do
    [ -n "$cand" ] && [ -x "$cand" ] && "$cand" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null \
      && { echo "$cand"; return 0; }
  done
  return 1
}
PY312="$(find_python312)" || skip "no CPython 3.12 on the host to copy in (Debian 13 ships 3.13 only): pyenv install 3.12, or set RIG_SANDBOX_PYTHON"
PY_PREFIX="$("$PY312" -c 'import sys; print(sys.base_prefix)')"
case "$PY_PREFIX" in /usr|/usr/local|/) skip "the CPython 3.12 at $PY_PREFIX is installed into the system tree; a self-contained one (pyenv's) is needed" ;; esac

mirror() {
  local m="${RIG_SANDBOX_MIRROR:-}"
  if [ -z "$m" ]; then
    m=$(grep -h -E '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
        | grep -v security | head -1 | awk '{print ($1=="deb") ? $2 : $2}') || true
  fi
  echo "${m:-http://deb.debian.org/debian}"
}

MOUNTS=()
unmount_all() {
  local i
  for ((i=${#MOUNTS[@]}-1; i>=0; i--)); do
    umount "${MOUNTS[$i]}" 2>/dev/null || umount -l "${MOUNTS[$i]}" 2>/dev/null || true
  done
  MOUNTS=()
}
trap unmount_all EXIT INT TERM

# Never delete a tree while anything is bound inside it: with the host's /dev bound there,
# rm -rf would delete the host's device nodes.
safe_remove() {
  local tree="$1"
  [ -e "$tree" ] || return 0
  if grep -q " $(realpath "$tree")/" /proc/mounts; then
    echo "official.sh: $tree still has mounts inside (see /proc/mounts); not deleting it" >&2
    exit 3
  fi
  rm -rf --one-file-system "$tree"
}

bind() {  # bind SRC at the same path (or DEST) inside the tree
  local src="$1" dest="$SANDBOX${2:-$1}"
  mkdir -p "$dest"
  mount --bind "$src" "$dest"
  MOUNTS+=("$dest")
}

build() {
  command -v mmdebstrap >/dev/null || {
    echo "installing mmdebstrap ..."
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap; } >/dev/null 2>&1 \
      || skip "mmdebstrap is not installed and apt-get could not install it"
  }
  local tmp="$SANDBOX.tmp.$$" m
  m="$(mirror)"
  safe_remove "$tmp"
  mkdir -p "$(dirname "$SANDBOX")"
  echo "building the Debian 13 sandbox in $SANDBOX (from $m) ..."
  if ! mmdebstrap --quiet --variant=minbase --include="$PACKAGES" trixie "$tmp" "$m" >"$tmp.log" 2>&1; then
    tail -5 "$tmp.log" >&2
    safe_remove "$tmp"
    skip "mmdebstrap could not build Debian 13 from $m (no access to Debian's packages?)"
  fi
  rm -f "$tmp.log"
  # The host's CA bundle and pip settings, so pip inside reaches the same registry.
  cp /etc/ssl/certs/ca-certificates.crt "$tmp/etc/ssl/certs/ca-certificates.crt" 2>/dev/null || true
  [ -f /etc/pip.conf ] && cp /etc/pip.conf "$tmp/etc/pip.conf"
  cp /etc/resolv.conf "$tmp/etc/resolv.conf" 2>/dev/null || true
  # CPython 3.12 at the same path as on the host (its prefix is compiled in).
  mkdir -p "$tmp$(dirname "$PY_PREFIX")"
  cp -a "$PY_PREFIX" "$tmp$PY_PREFIX"
  echo "$RECIPE $PY_PREFIX" > "$tmp/.rig-sandbox"
  safe_remove "$SANDBOX"
  mv "$tmp" "$SANDBOX"
}

[ -n "${rebuild:-}" ] && safe_remove "$SANDBOX"
if [ ! -f "$SANDBOX/.rig-sandbox" ] || [ "$(cat "$SANDBOX/.rig-sandbox")" != "$RECIPE $PY_PREFIX" ]; then
  safe_remove "$SANDBOX"
  build
fi

mkdir -p "$RIG_CACHE"
bind /proc
bind /dev
bind /dev/shm   # /dev is bound without its submounts: the backend's shared memory lives here
bind "$REPO"
bind "$RIG_CACHE"
[ -d /opt/wheels ] && bind /opt/wheels

inside() {
  chroot "$SANDBOX" /usr/bin/env -i HOME="$HOME" LANG=C.UTF-8 TERM="${TERM:-dumb}" \
    PATH="$VENV/bin:/usr/local/bin:/usr/bin:/bin" VIRTUAL_ENV="$VENV" \
    ${RIG_HOME:+RIG_HOME="$RIG_HOME"} ${CI:+CI="$CI"} \
    $(env | grep -E '^PIP_' | grep -v PIP_CONSTRAINT | tr '\n' ' ') \
    bash -c "cd '$REPO' && $1" 9>&-
}

# The rig and its test extra in a venv inside; reinstalled when pyproject.toml changes, or for
# another checkout (an editable install points at one folder).
stamp="$(cat "$REPO/pyproject.toml" <(echo "$REPO") | sha256sum | cut -c1-16)"
if [ "$(cat "$SANDBOX$VENV/.rig-installed" 2>/dev/null)" != "$stamp" ]; then
  echo "installing the rig with its official and test extras into the sandbox ..."
  inside "{ [ -x $VENV/bin/python ] || '$PY312' -m venv $VENV; } \
          && $VENV/bin/pip install -q --disable-pip-version-check -e '.[official,test]' \
          && echo $stamp > $VENV/.rig-installed"
fi

case "$mode" in
  build) inside "rig doctor" ;;
  shell) inside "bash -i" ;;
  run) inside "$(printf '%q ' "${args[@]}")" ;;
  test)
    echo "running the official engine's tests inside the Debian 13 sandbox ..."
    inside "python -m pytest -q -p no:cacheprovider -m official $(printf '%q ' "${args[@]}")" ;;
esac
