#!/usr/bin/env bash
# Smoke-test a running cluster started by cluster.sh: for each listener
# (PLAINTEXT, SASL_PLAINTEXT with SCRAM-SHA-512 admin, SSL with client.pem)
# create a topic, produce 10 records with the console producer and consume
# them back with the console consumer. Also checks that super.users works
# (SCRAM admin may create topics) and that an ACL-less user may not.
#
# The tools are those of the cluster's Kafka version (its cluster.env).
#
# Usage: scripts/kafka/smoke.sh --name NAME [--state-dir DIR]
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
source "$SCRIPT_DIR/versions.sh"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
NAME="" STATE_DIR=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --name) NAME="${2:?}"; shift 2 ;;
    --state-dir) STATE_DIR="${2:?}"; shift 2 ;;
    *) echo "smoke.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
[[ -n "$NAME" ]] || { echo "smoke.sh: --name is required" >&2; exit 2; }
STATE_DIR="${STATE_DIR:-${SLUICE_STATE_DIR:-$REPO_ROOT/.sluice}}"
ENV_FILE="$STATE_DIR/clusters/$NAME/cluster.env"
[[ -f "$ENV_FILE" ]] || { echo "smoke.sh: $ENV_FILE missing: is cluster '$NAME' running?" >&2; exit 1; }
# shellcheck source=/dev/null
source "$ENV_FILE"
export SLUICE_KAFKA_LIBS
KAFKA_VERSION="${SLUICE_KAFKA_VERSION:-$(kafka_libs_version "$SLUICE_KAFKA_LIBS")}"
echo "smoke: cluster '$NAME', Kafka $KAFKA_VERSION"
TOOL="$SCRIPT_DIR/tool.sh"
TOOL_TIMEOUT=60
RUN_ID="$(date +%s)-$$"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
passed=0 failed=0

ok() { echo "ok: $*"; passed=$((passed + 1)); }
not_ok() { echo "FAILED: $*"; failed=$((failed + 1)); }

# round_trip LABEL BOOTSTRAP CONFIG_FILE_OR_EMPTY
round_trip() {
  local label="$1" bootstrap="$2" config="$3" topic="smoke-$1-$RUN_ID"
  local cfg=() pcfg=() ccfg=()
  if [[ -n "$config" ]]; then
    cfg=(--command-config "$config")
    pcfg=("$(kafka_console_config_option "$KAFKA_VERSION" producer)" "$config")
    ccfg=("$(kafka_console_config_option "$KAFKA_VERSION" consumer)" "$config")
  fi
  if ! timeout "$TOOL_TIMEOUT" "$TOOL" topics --bootstrap-server "$bootstrap" "${cfg[@]}" \
      --create --topic "$topic" --partitions 3 >"$WORK/$label.create" 2>&1; then
    not_ok "$label: create topic $topic"; cat "$WORK/$label.create"; return
  fi
  seq 1 10 | sed "s/^/$label-record-/" > "$WORK/$label.in"
  if ! timeout "$TOOL_TIMEOUT" "$TOOL" console-producer --bootstrap-server "$bootstrap" \
      "${pcfg[@]}" --topic "$topic" --producer-property acks=all \
      < "$WORK/$label.in" >"$WORK/$label.produce" 2>&1; then
    not_ok "$label: produce"; cat "$WORK/$label.produce"; return
  fi
  if ! timeout "$TOOL_TIMEOUT" "$TOOL" console-consumer --bootstrap-server "$bootstrap" \
      "${ccfg[@]}" --topic "$topic" --from-beginning --max-messages 10 \
      --timeout-ms 30000 --group "smoke-$label-$RUN_ID" \
      >"$WORK/$label.out" 2>"$WORK/$label.consume"; then
    not_ok "$label: consume"; cat "$WORK/$label.consume"; return
  fi
  if diff <(sort "$WORK/$label.in") <(sort "$WORK/$label.out") >/dev/null; then
    ok "$label: 10 records produced and consumed on $topic"
  else
    not_ok "$label: records differ"; diff <(sort "$WORK/$label.in") <(sort "$WORK/$label.out") || true
  fi
}

round_trip plaintext "$SLUICE_BOOTSTRAP_PLAINTEXT" ""
round_trip scram512-admin "$SLUICE_BOOTSTRAP_SASL_PLAINTEXT" "$SLUICE_CLIENT_CONFIG_SCRAM512_ADMIN"

# User:client has no super user rights: grant it what the round trip needs.
topic="smoke-mtls-client-$RUN_ID"
if timeout "$TOOL_TIMEOUT" "$TOOL" acls --bootstrap-server "$SLUICE_BOOTSTRAP_SSL" \
    --command-config "$SLUICE_CLIENT_CONFIG_SSL_ADMIN" --add --allow-principal User:client \
    --operation All --topic "$topic" --group "smoke-mtls-client-$RUN_ID" >"$WORK/acl" 2>&1; then
  ok "sluice-admin (mTLS super user) granted ACLs to User:client"
else
  not_ok "adding ACLs as sluice-admin"; cat "$WORK/acl"
fi
round_trip mtls-client "$SLUICE_BOOTSTRAP_SSL" "$SLUICE_CLIENT_CONFIG_SSL_CLIENT"

# No ACLs for basic: creating a topic must be refused.
if timeout "$TOOL_TIMEOUT" "$TOOL" topics --bootstrap-server "$SLUICE_BOOTSTRAP_SASL_PLAINTEXT" \
    --command-config "$SLUICE_CLIENT_CONFIG_SCRAM256_BASIC" --create \
    --topic "smoke-denied-$RUN_ID" >"$WORK/denied" 2>&1; then
  not_ok "basic (no ACLs) could create a topic"
elif grep -q "TopicAuthorizationException\|not authorized" "$WORK/denied"; then
  ok "basic (no ACLs) is refused topic creation"
else
  not_ok "basic create failed for another reason"; cat "$WORK/denied"
fi

echo "smoke: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
