#!/usr/bin/env bash
# Fetch kafka-streams (and its own dependencies, e.g. RocksDB; not
# kafka-clients or slf4j, which the cluster's jars provide) of one Kafka
# version from Maven Central into $SLUICE_CACHE/kafka-<version>/streams-libs
# (default cache: ~/.cache/sluice), for the Streams test application. Skips
# the download when a completed fetch of the same version and pom is there.
# The last line on stdout is the directory.
#
# Usage: scripts/kafka/fetch-streams.sh [--kafka-version X]
#   version: --kafka-version, else $SLUICE_KAFKA_VERSION, else the default
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
source "$SCRIPT_DIR/versions.sh"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
KAFKA_VERSION="${SLUICE_KAFKA_VERSION:-$SLUICE_KAFKA_DEFAULT_VERSION}"
POM="$SCRIPT_DIR/streams-pom.xml"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --kafka-version) KAFKA_VERSION="${2:?--kafka-version needs a value}"; shift 2 ;;
    -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fetch-streams.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
kafka_require_version "$KAFKA_VERSION" fetch-streams.sh
DEST="$(kafka_cache_dir "$KAFKA_VERSION")"
LIBS="$DEST/streams-libs"
MARKER="$DEST/.fetch-streams-complete"
pom_sum="$( { sha256sum "$POM" | cut -d' ' -f1; echo "$KAFKA_VERSION"; } | sha256sum | cut -d' ' -f1)"

is_complete() {
  [[ -f "$MARKER" && -d "$LIBS" && "$(cat "$MARKER")" == "$pom_sum" ]]
}
if is_complete; then
  echo "$LIBS"
  exit 0
fi

mkdir -p "$DEST"
exec 9>"$DEST/.fetch-streams.lock"
if ! flock -w "${SLUICE_FETCH_LOCK_TIMEOUT:-900}" 9; then
  echo "fetch-streams.sh: another fetch still holds $DEST/.fetch-streams.lock" >&2
  exit 1
fi
if is_complete; then
  echo "$LIBS"
  exit 0
fi
command -v mvn >/dev/null 2>&1 || { echo "fetch-streams.sh: mvn not found (apt-get install maven)" >&2; exit 1; }

rm -f "$MARKER"
tmp="$(mktemp -d "$DEST/streams-libs.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-streams.sh: fetching kafka-streams $KAFKA_VERSION into $LIBS" >&2
mvn -q -B -Dstyle.color=never -f "$POM" "$DEP_PLUGIN:copy-dependencies" \
  -Dkafka.version="$KAFKA_VERSION" -DincludeScope=runtime \
  -DoutputDirectory="$tmp" 2>&1 | sed $'s/\e\\[[0-9;]*m//g' >&2
if [[ ! -f "$tmp/kafka-streams-$KAFKA_VERSION.jar" ]]; then
  echo "fetch-streams.sh: kafka-streams-$KAFKA_VERSION.jar missing after copy" >&2
  exit 1
fi
rm -rf "$LIBS"
mv "$tmp" "$LIBS"
trap - EXIT
echo "$pom_sum" > "$MARKER"
echo "$LIBS"
