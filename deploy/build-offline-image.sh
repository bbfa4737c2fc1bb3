#!/bin/sh
# Build meshcast's container image without any registry.
#
# 1. a Debian root filesystem (mmdebstrap, from this host's own apt sources) with python3,
#    python3-venv and mosquitto, `docker import`ed as $BASE_IMAGE (a name no public image has);
# 2. the project's wheels and its dependencies', built on the host (`pip wheel`) into
#    deploy/wheels/ (the build context);
# 3. deploy/Dockerfile FROM that base, installing with `pip --no-index` (no network in the build).
#
# Usage: deploy/build-offline-image.sh [--rebuild-base]
#   env: MESHCAST_BASE_IMAGE (default meshcast-local/debian-base:bookworm)
#        MESHCAST_IMAGE      (default meshcast-local/meshcast:latest)
#        SUITE (default bookworm), PYTHON (default .venv/bin/python or python3)
#        EXTRA_WHEELS: space-separated plug-in projects or wheels (e.g. examples/meshcast-example-plugin)
#                      built and installed into the image, so its nodes run third-party algorithms
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
BASE_IMAGE=${MESHCAST_BASE_IMAGE:-meshcast-local/debian-base:bookworm}
IMAGE=${MESHCAST_IMAGE:-meshcast-local/meshcast:latest}
SUITE=${SUITE:-bookworm}
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$root/.venv/bin/python" ]; then PYTHON="$root/.venv/bin/python"; else PYTHON=python3; fi
fi

need() { command -v "$1" >/dev/null 2>&1 || { echo "error: $1 not found; $2" >&2; exit 1; }; }
need docker "install Docker Engine (apt-get install docker.io)"

if [ "${1:-}" = "--rebuild-base" ] || ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    need mmdebstrap "apt-get update && apt-get install -y mmdebstrap"
    # The host's own apt sources (deb822 or one-line format), so the mirror is one this host reaches.
    sources=""
    for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
        [ -s "$f" ] && grep -qE '^(deb |URIs:)' "$f" && grep -q debian "$f" && sources="$sources $f"
    done
    [ -n "$sources" ] || { echo "error: no Debian apt sources found in /etc/apt" >&2; exit 1; }
    echo "building $BASE_IMAGE from a $SUITE rootfs (sources:$sources)" >&2
    start=$(date +%s)
    # shellcheck disable=SC2086  # several source files are several arguments
    mmdebstrap --variant=minbase --include=python3,python3-venv,mosquitto,ca-certificates \
        --aptopt='Acquire::Languages "none"' \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        "$SUITE" - $sources \
      | docker import \
          -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
          -c 'CMD ["/bin/sh"]' - "$BASE_IMAGE" >/dev/null
    echo "base image $BASE_IMAGE ready in $(( $(date +%s) - start )) s" >&2
fi

echo "building wheels into deploy/wheels" >&2
rm -f "$here"/wheels/*.whl
mkdir -p "$here/wheels"
"$PYTHON" -m pip wheel --quiet --wheel-dir "$here/wheels" "$root"
rm -rf "$here/wheels/extra"
mkdir -p "$here/wheels/extra"
for extra in ${EXTRA_WHEELS:-}; do  # plug-ins: their own wheel in extra/, their dependencies beside
    echo "adding plug-in $extra" >&2
    "$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$here/wheels/extra" "$extra"
done

echo "building $IMAGE" >&2
DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0} docker build --pull=false \
    --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$IMAGE" -f "$here/Dockerfile" "$root"
# The code volumes node containers read their Python from on fuse-overlayfs/vfs engines
# (docs/deploy.md, "Code volumes"): filled now, not at the start of the first run.
(cd "$root" && "$PYTHON" -m coordinator.runtimes.codevolumes "$IMAGE") >&2 \
    || echo "note: code volumes not filled now (needs the project's venv: PYTHON=.venv/bin/python);" \
            "the first containers run fills them" >&2
echo "done: $IMAGE (broker: run it with MESHCAST_BROKER_IMAGE=$IMAGE, it has mosquitto)" >&2
