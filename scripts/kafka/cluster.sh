#!/usr/bin/env bash
# Start, stop and inspect a local Apache Kafka KRaft cluster for Sluice's
# tests (combined broker+controller nodes, run from the Maven jars).
#
# Usage:
#   cluster.sh start      --name NAME --nodes N --base-port B [--state-dir DIR]
#                         [--kafka-version X] [--reauth-ms MS]
#   cluster.sh stop       --name NAME [--state-dir DIR] [--purge]
#   cluster.sh status     --name NAME [--state-dir DIR]
#   cluster.sh kill-node  --name NAME --node ID [--state-dir DIR]
#   cluster.sh start-node --name NAME --node ID [--state-dir DIR] [--no-wait]
#
# Node i (0-based) has node.id i+1, broker.rack az-(i+1) and these ports:
#   B+10i   PLAINTEXT       (ANONYMOUS, a super user)
#   B+10i+1 SASL_PLAINTEXT  (SCRAM-SHA-256/512 and PLAIN: admin/admin-secret, basic/basic-secret)
#   B+10i+2 SSL             (mTLS, ssl.client.auth=required, principal = certificate CN)
#   B+10i+3 CONTROLLER      (SSL, broker certificate)
#   B+10i+4 INTERNAL        (SSL, inter-broker, broker certificate => User:broker)
#   B+10i+5 RELAY           (only with SLUICE_KAFKA_RELAY_LISTENER=1; see below)
#
# --kafka-version X: the Kafka version of the cluster (default
# $SLUICE_KAFKA_VERSION, else 4.4.0; 3.9.x and 4.x); the other commands use
# the version the cluster was started with.
#
# State: ${SLUICE_STATE_DIR:-<repo>/.sluice}/clusters/NAME (see README.md here).
# Environment:
#   SLUICE_STATE_DIR            default state dir
#   SLUICE_KAFKA_VERSION        default Kafka version of start
#   SLUICE_DEVTOOLS             a built sluice-devtools binary (else cargo builds it)
#   SLUICE_KAFKA_START_TIMEOUT  seconds to wait for the cluster (default 120)
#   SLUICE_KAFKA_HEAP_OPTS      broker heap (default "-Xmx1g -Xms256m")
#   SLUICE_KAFKA_JVM_OPTS       extra broker JVM options
#   SLUICE_KAFKA_LOG_LEVEL      broker log level (default INFO)
#   SLUICE_KAFKA_JMX_BASE_PORT  opt-in remote JMX: node i listens on this port + i
#                               (127.0.0.1 only, no authentication, no TLS; for
#                               scripts/bench). Unset (the default): no JMX port.
#   SLUICE_KAFKA_RELAY_LISTENER 1: node i also has a listener RELAY (PLAINTEXT,
#                               ANONYMOUS) on B+10i+5, advertised as B+10i+6, where
#                               scripts/bench runs a bare TCP relay to B+10i+5: a
#                               client bootstrapping from B+10i+6 reaches every
#                               broker through a relay. Unset (the default): none.
#
# --reauth-ms MS sets connections.max.reauth.ms (KIP-368) on every node: SASL
# sessions last MS, clients re-authenticate before then. It cannot be changed
# on a running cluster (Kafka refuses it as a dynamic config, and the
# per-listener form is accepted but has no effect).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
# shellcheck source=versions.sh
source "$SCRIPT_DIR/versions.sh"
LISTENERS=(PLAINTEXT SASL_PLAINTEXT SSL CONTROLLER INTERNAL)
STOP_GRACE_SECS=20
KILL_WAIT_SECS=10
QUORUM_LOST_GRACE_SECS=3
# A fixed secret: these clusters are for tests only.
DELEGATION_TOKEN_SECRET="sluice-test-delegation-token-secret"

die() { echo "cluster.sh: $*" >&2; exit 1; }
log() { echo "cluster.sh: $*" >&2; }

usage() {
  sed -n '2,46p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

now() { date +%s.%N; }
elapsed_since() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }'; }

# ---------------------------------------------------------------- arguments

CMD="${1:-}"
[[ -n "$CMD" ]] || { usage >&2; exit 2; }
shift
NAME="" NODES="" BASE_PORT="" NODE_ARG="" STATE_DIR="" NO_WAIT=0 PURGE=0 REAUTH_MS=""
KAFKA_VERSION="${SLUICE_KAFKA_VERSION:-$SLUICE_KAFKA_DEFAULT_VERSION}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --name) NAME="${2:?--name needs a value}"; shift 2 ;;
    --nodes) NODES="${2:?--nodes needs a value}"; shift 2 ;;
    --base-port) BASE_PORT="${2:?--base-port needs a value}"; shift 2 ;;
    --node) NODE_ARG="${2:?--node needs a value}"; shift 2 ;;
    --state-dir) STATE_DIR="${2:?--state-dir needs a value}"; shift 2 ;;
    --no-wait) NO_WAIT=1; shift ;;
    --purge) PURGE=1; shift ;;
    --reauth-ms) REAUTH_MS="${2:?--reauth-ms needs a value}"; shift 2 ;;
    --kafka-version) KAFKA_VERSION="${2:?--kafka-version needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
case "$CMD" in
  -h|--help|help) usage; exit 0 ;;
esac

[[ -n "$NAME" ]] || die "--name is required"
[[ "$NAME" =~ ^[A-Za-z0-9._-]+$ ]] || die "--name may only hold letters, digits, '.', '_', '-'"
STATE_DIR="${STATE_DIR:-${SLUICE_STATE_DIR:-$REPO_ROOT/.sluice}}"
mkdir -p "$STATE_DIR"
STATE_DIR="$(cd "$STATE_DIR" && pwd)"
CERTS_DIR="$STATE_DIR/certs"
CLUSTERS_DIR="$STATE_DIR/clusters"
CLUSTER_DIR="$CLUSTERS_DIR/$NAME"

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
[[ -z "$REAUTH_MS" ]] || is_uint "$REAUTH_MS" || die "--reauth-ms must be a number of milliseconds"
kafka_require_version "$KAFKA_VERSION" cluster.sh

# set_kafka_version VERSION: the version's logging and configuration files.
set_kafka_version() {
  KAFKA_VERSION="$1"
  LOGGING="$(kafka_logging "$KAFKA_VERSION")"
  LOG4J_CONFIG="$(kafka_log_config "$LOGGING" broker)"
  TOOLS_LOG4J_CONFIG="$(kafka_log_config "$LOGGING" tools)"
}
set_kafka_version "$KAFKA_VERSION"

# ---------------------------------------------------------------- helpers

node_dir() { echo "$CLUSTER_DIR/node-$1"; }

# port NODE_ID LISTENER_INDEX
port() { echo $((BASE_PORT + 10 * ($1 - 1) + $2)); }

# jmx_port NODE_ID: node i (0-based) at SLUICE_KAFKA_JMX_BASE_PORT + i. Only
# called when that variable is set.
jmx_port() { echo $((SLUICE_KAFKA_JMX_BASE_PORT + $1 - 1)); }

# The JVM options of NODE_ID's JMX port, one a line; none unless
# SLUICE_KAFKA_JMX_BASE_PORT is set.
jmx_opts() {
  [[ -n "${SLUICE_KAFKA_JMX_BASE_PORT:-}" ]] || return 0
  local p
  p="$(jmx_port "$1")"
  printf '%s\n' -Dcom.sun.management.jmxremote \
    "-Dcom.sun.management.jmxremote.port=$p" "-Dcom.sun.management.jmxremote.rmi.port=$p" \
    -Dcom.sun.management.jmxremote.host=127.0.0.1 -Djava.rmi.server.hostname=127.0.0.1 \
    -Dcom.sun.management.jmxremote.authenticate=false -Dcom.sun.management.jmxremote.ssl=false
}

check_jmx_base_port() {
  [[ -n "${SLUICE_KAFKA_JMX_BASE_PORT:-}" ]] || return 0
  if ! is_uint "$SLUICE_KAFKA_JMX_BASE_PORT" || [[ "$SLUICE_KAFKA_JMX_BASE_PORT" -lt 1024 \
       || $((SLUICE_KAFKA_JMX_BASE_PORT + NODES)) -gt 65535 ]]; then
    die "SLUICE_KAFKA_JMX_BASE_PORT must be a port >= 1024 with room for $NODES ports below 65536"
  fi
}

# Ports in the kernel's ephemeral range can be taken by any outgoing
# connection's local end while a node is down: a node that kill-node and
# start-node restart may then fail to bind ("Address already in use"). Warn.
warn_ephemeral_ports() {
  local lo hi first="$BASE_PORT" last=$((BASE_PORT + 10 * NODES - 1))
  read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || return 0
  if [[ $first -le $hi && $last -ge $lo ]]; then
    log "warning: ports $first-$last overlap the ephemeral range $lo-$hi: a restarted node may find its port taken (use ports below $lo)"
  fi
}

# The tag put on each broker's command line, to find it again.
node_tag() { echo "-Dsluice.node.dir=$(node_dir "$1")"; }

# Prints the pids of live processes whose command line holds NODE's tag.
tagged_pids() {
  local tag proc pid
  tag="$(node_tag "$1")"
  for proc in /proc/[0-9]*; do
    pid="${proc#/proc/}"
    [[ "$pid" == "$$" || "$pid" == "$BASHPID" ]] && continue
    if tr '\0' '\n' 2>/dev/null < "$proc/cmdline" | grep -Fxq -- "$tag"; then
      echo "$pid"
    fi
  done
}

# Prints the pid of NODE's broker when it is running.
node_pid() {
  local pid_file pid
  pid_file="$(node_dir "$1")/pid"
  if [[ -f "$pid_file" ]]; then
    pid="$(cat "$pid_file")"
    if is_uint "$pid" && kill -0 "$pid" 2>/dev/null \
       && tr '\0' '\n' 2>/dev/null < "/proc/$pid/cmdline" | grep -Fxq -- "$(node_tag "$1")"; then
      echo "$pid"
      return 0
    fi
  fi
  tagged_pids "$1" | head -n 1
}

node_running() { [[ -n "$(node_pid "$1")" ]]; }

port_in_use() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# Loads NODES and BASE_PORT of an existing cluster.
load_cluster_meta() {
  [[ -f "$CLUSTER_DIR/meta" ]] || die "no cluster '$NAME' under $CLUSTERS_DIR (start it first)"
  # shellcheck source=/dev/null
  source "$CLUSTER_DIR/meta"
  NODES="$META_NODES"
  BASE_PORT="$META_BASE_PORT"
  CLUSTER_ID="$META_CLUSTER_ID"
  LIBS_DIR="$META_LIBS_DIR"
  set_kafka_version "${META_KAFKA_VERSION:-$(kafka_libs_version "$LIBS_DIR")}"
}

# One command at a time per cluster. The lock fd is closed for brokers.
lock_cluster() {
  mkdir -p "$CLUSTERS_DIR"
  exec 8>"$CLUSTERS_DIR/.$NAME.lock"
  flock -w 300 8 || die "another cluster.sh is still busy with '$NAME'"
}

ensure_devtools() {
  if [[ -n "${SLUICE_DEVTOOLS:-}" ]]; then
    [[ -x "$SLUICE_DEVTOOLS" ]] || die "SLUICE_DEVTOOLS=$SLUICE_DEVTOOLS is not an executable"
    DEVTOOLS="$SLUICE_DEVTOOLS"
    return
  fi
  DEVTOOLS="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/debug/sluice-devtools"
  if [[ ! -x "$DEVTOOLS" ]]; then
    log "building sluice-devtools"
    (cd "$REPO_ROOT" && cargo build -q -p sluice-devtools) >&2
    [[ -x "$DEVTOOLS" ]] || die "cargo build did not produce $DEVTOOLS"
  fi
}

# A fresh base64url (22 characters) Kafka cluster id. Like Kafka's own
# Uuid.randomUuid(), never one starting with '-' (tools would read an option).
new_cluster_id() {
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    [[ "$id" != -* ]] && { echo "$id"; return; }
  done
}

join_by() { local IFS="$1"; shift; echo "$*"; }

# bootstrap LISTENER_INDEX: 127.0.0.1:p1,127.0.0.1:p2,...
bootstrap() {
  local i out=()
  for ((i = 1; i <= NODES; i++)); do out+=("127.0.0.1:$(port "$i" "$1")"); done
  join_by , "${out[@]}"
}

quorum_voters() {
  local i out=()
  for ((i = 1; i <= NODES; i++)); do out+=("$i@127.0.0.1:$(port "$i" 3)"); done
  join_by , "${out[@]}"
}

min() { echo $(($1 < $2 ? $1 : $2)); }

java_tool() {
  local -a log_opts
  mapfile -t log_opts < <(kafka_log_opts "$LOGGING" tools WARN stderr WARN)
  java -Xmx768m -cp "$LIBS_DIR/*" "${log_opts[@]}" "$@"
}

# ---------------------------------------------------------------- config files

write_node_properties() {
  local id="$1" dir rf isr
  dir="$(node_dir "$id")"
  rf="$(min 3 "$NODES")"
  isr="$(min 2 "$NODES")"
  local p0 p1 p2 p3 p4 relay="" relay_at="" relay_map=""
  p0="$(port "$id" 0)" p1="$(port "$id" 1)" p2="$(port "$id" 2)" p3="$(port "$id" 3)" p4="$(port "$id" 4)"
  if [[ "${SLUICE_KAFKA_RELAY_LISTENER:-}" == 1 ]]; then
    relay=",RELAY://127.0.0.1:$(port "$id" 5)"
    relay_at=",RELAY://127.0.0.1:$(port "$id" 6)"
    relay_map=",RELAY:PLAINTEXT"
  fi
  cat > "$dir/node.properties" <<EOF
# Generated by scripts/kafka/cluster.sh for cluster '$NAME', node $id.
process.roles=broker,controller
node.id=$id
# One rack per node (az-1, az-2, ...). The tests' usual Sluice rack (rack0)
# matches none, so only topologies that name an az-N rack route by rack.
broker.rack=$(node_rack "$id")
controller.quorum.voters=$(quorum_voters)
controller.listener.names=CONTROLLER
inter.broker.listener.name=INTERNAL
listeners=PLAINTEXT://127.0.0.1:$p0,SASL_PLAINTEXT://127.0.0.1:$p1,SSL://127.0.0.1:$p2,CONTROLLER://127.0.0.1:$p3,INTERNAL://127.0.0.1:$p4$relay
advertised.listeners=PLAINTEXT://127.0.0.1:$p0,SASL_PLAINTEXT://127.0.0.1:$p1,SSL://127.0.0.1:$p2,CONTROLLER://127.0.0.1:$p3,INTERNAL://127.0.0.1:$p4$relay_at
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,CONTROLLER:SSL,INTERNAL:SSL$relay_map
log.dirs=$dir/data

# TLS (SSL, CONTROLLER and INTERNAL listeners): PEM files, mTLS required.
ssl.keystore.type=PEM
ssl.keystore.location=$CERTS_DIR/broker-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$CERTS_DIR/ca.pem
ssl.client.auth=required
ssl.principal.mapping.rules=RULE:^CN=([^,]+).*\$/\$1/,DEFAULT

# SASL (SASL_PLAINTEXT listener). SCRAM users are added by StorageTool format.
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" user_basic="basic-secret";

# Authorization.
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:sluice-admin;User:broker;User:ANONYMOUS
allow.everyone.if.no.acl.found=false

# Delegation tokens.
delegation.token.secret.key=$DELEGATION_TOKEN_SECRET
delegation.token.max.lifetime.ms=604800000
delegation.token.expiry.time.ms=86400000
delegation.token.expiry.check.interval.ms=5000

# Topics and groups.
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
default.replication.factor=$rf
min.insync.replicas=1
num.partitions=3
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
EOF
  if [[ -n "$REAUTH_MS" ]]; then
    printf '\n# KIP-368: SASL sessions end after this; clients re-authenticate.\nconnections.max.reauth.ms=%s\n' \
      "$REAUTH_MS" >> "$dir/node.properties"
  fi
}

write_client_configs() {
  local d="$CLUSTER_DIR"
  cat > "$d/ssl-client.properties" <<EOF
# mTLS as User:client (CN=client). Use with the SSL bootstrap.
security.protocol=SSL
ssl.keystore.type=PEM
ssl.keystore.location=$CERTS_DIR/client-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$CERTS_DIR/ca.pem
EOF
  cat > "$d/ssl-admin.properties" <<EOF
# mTLS as User:sluice-admin (a super user). Use with the SSL bootstrap.
security.protocol=SSL
ssl.keystore.type=PEM
ssl.keystore.location=$CERTS_DIR/sluice-admin-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$CERTS_DIR/ca.pem
EOF
  local mech user file
  for mech in 256 512; do
    for user in admin basic; do
      file="$d/scram$mech-$user.properties"
      cat > "$file" <<EOF
# SCRAM-SHA-$mech as User:$user. Use with the SASL_PLAINTEXT bootstrap.
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-$mech
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$user" password="$user-secret";
EOF
    done
  done
  for user in admin basic; do
    cat > "$d/plain-$user.properties" <<EOF
# SASL/PLAIN as User:$user. Use with the SASL_PLAINTEXT bootstrap.
security.protocol=SASL_PLAINTEXT
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="$user" password="$user-secret";
EOF
  done
}

json_str() {
  local s="$1"
  s="${s//\\/\\\\}"
  s="${s//\"/\\\"}"
  printf '"%s"' "$s"
}

write_cluster_files() {
  local env_file="$CLUSTER_DIR/cluster.env" json_file="$CLUSTER_DIR/cluster.json"
  local i l name
  {
    echo "# Generated by scripts/kafka/cluster.sh: source it from a shell."
    printf 'SLUICE_CLUSTER_NAME=%q\n' "$NAME"
    printf 'SLUICE_CLUSTER_NODES=%q\n' "$NODES"
    printf 'SLUICE_CLUSTER_BASE_PORT=%q\n' "$BASE_PORT"
    printf 'SLUICE_CLUSTER_ID=%q\n' "$CLUSTER_ID"
    printf 'SLUICE_CLUSTER_DIR=%q\n' "$CLUSTER_DIR"
    printf 'SLUICE_CERTS_DIR=%q\n' "$CERTS_DIR"
    printf 'SLUICE_KAFKA_VERSION=%q\n' "$KAFKA_VERSION"
    printf 'SLUICE_KAFKA_LIBS=%q\n' "$LIBS_DIR"
    printf 'SLUICE_KAFKA_LOGGING=%q\n' "$LOGGING"
    printf 'SLUICE_KAFKA_LOG4J=%q\n' "$LOG4J_CONFIG"
    printf 'SLUICE_KAFKA_TOOLS_LOG4J=%q\n' "$TOOLS_LOG4J_CONFIG"
    for l in "${!LISTENERS[@]}"; do
      printf 'SLUICE_BOOTSTRAP_%s=%q\n' "${LISTENERS[$l]}" "$(bootstrap "$l")"
    done
    printf 'SLUICE_CONTROLLER_QUORUM_VOTERS=%q\n' "$(quorum_voters)"
    for ((i = 1; i <= NODES; i++)); do
      for l in "${!LISTENERS[@]}"; do
        printf 'SLUICE_NODE_%d_%s_PORT=%q\n' "$i" "${LISTENERS[$l]}" "$(port "$i" "$l")"
      done
    done
    for name in ssl-client ssl-admin scram256-admin scram256-basic scram512-admin scram512-basic plain-admin plain-basic; do
      printf 'SLUICE_CLIENT_CONFIG_%s=%q\n' "$(echo "$name" | tr 'a-z-' 'A-Z_')" "$CLUSTER_DIR/$name.properties"
    done
  } > "$env_file.tmp"
  mv "$env_file.tmp" "$env_file"

  {
    echo "{"
    echo "  \"name\": $(json_str "$NAME"),"
    echo "  \"node_count\": $NODES,"
    echo "  \"base_port\": $BASE_PORT,"
    echo "  \"cluster_id\": $(json_str "$CLUSTER_ID"),"
    echo "  \"kafka_version\": $(json_str "$KAFKA_VERSION"),"
    echo "  \"cluster_dir\": $(json_str "$CLUSTER_DIR"),"
    echo "  \"certs_dir\": $(json_str "$CERTS_DIR"),"
    echo "  \"libs_dir\": $(json_str "$LIBS_DIR"),"
    echo "  \"logging\": $(json_str "$LOGGING"),"
    echo "  \"log4j_config\": $(json_str "$LOG4J_CONFIG"),"
    echo "  \"tools_log4j_config\": $(json_str "$TOOLS_LOG4J_CONFIG"),"
    echo "  \"bootstrap\": {"
    for l in "${!LISTENERS[@]}"; do
      printf '    "%s": %s%s\n' "${LISTENERS[$l]}" "$(json_str "$(bootstrap "$l")")" \
        "$([[ $l -lt $((${#LISTENERS[@]} - 1)) ]] && echo ,)"
    done
    echo "  },"
    echo "  \"controller_quorum_voters\": $(json_str "$(quorum_voters)"),"
    echo "  \"client_configs\": {"
    local names=(ssl-client ssl-admin scram256-admin scram256-basic scram512-admin scram512-basic plain-admin plain-basic)
    for i in "${!names[@]}"; do
      printf '    "%s": %s%s\n' "${names[$i]}" "$(json_str "$CLUSTER_DIR/${names[$i]}.properties")" \
        "$([[ $i -lt $((${#names[@]} - 1)) ]] && echo ,)"
    done
    echo "  },"
    echo "  \"nodes\": ["
    for ((i = 1; i <= NODES; i++)); do
      echo "    {"
      echo "      \"id\": $i,"
      echo "      \"rack\": $(json_str "$(node_rack "$i")"),"
      echo "      \"dir\": $(json_str "$(node_dir "$i")"),"
      echo "      \"log\": $(json_str "$(node_dir "$i")/server.log"),"
      echo "      \"pid_file\": $(json_str "$(node_dir "$i")/pid"),"
      echo "      \"ports\": {"
      for l in "${!LISTENERS[@]}"; do
        printf '        "%s": %s%s\n' "${LISTENERS[$l]}" "$(port "$i" "$l")" \
          "$([[ $l -lt $((${#LISTENERS[@]} - 1)) ]] && echo ,)"
      done
      echo "      }"
      echo "    }$([[ $i -lt $NODES ]] && echo ,)"
    done
    echo "  ]"
    echo "}"
  } > "$json_file.tmp"
  mv "$json_file.tmp" "$json_file"
}

# ---------------------------------------------------------------- processes

launch_node() {
  local id="$1" dir
  dir="$(node_dir "$id")"
  local -a heap jvm_extra jmx log_opts
  read -r -a heap <<< "${SLUICE_KAFKA_HEAP_OPTS:--Xmx1g -Xms256m}"
  read -r -a jvm_extra <<< "${SLUICE_KAFKA_JVM_OPTS:-}"
  mapfile -t jmx < <(jmx_opts "$id")
  mapfile -t log_opts < <(kafka_log_opts "$LOGGING" broker "${SLUICE_KAFKA_LOG_LEVEL:-INFO}" stdout WARN)
  echo "==== cluster.sh: starting node $id (Kafka $KAFKA_VERSION) at $(date -Is) ====" >> "$dir/server.log"
  (
    cd "$dir"
    exec nohup java "${heap[@]}" \
      -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
      -Djava.awt.headless=true \
      "${jvm_extra[@]}" "${jmx[@]}" \
      "${log_opts[@]}" \
      -Dkafka.logs.dir="$dir" \
      "$(node_tag "$id")" \
      -cp "$LIBS_DIR/*" kafka.Kafka "$dir/node.properties" \
      < /dev/null >> "$dir/server.log" 2>&1 8>&-
  ) &
  echo "$!" > "$dir/pid"
}

# Waits (bounded) until the given pids are gone; prints those still alive.
wait_gone() {
  local secs="$1"; shift
  local deadline pid alive
  deadline=$(( $(date +%s) + secs ))
  while :; do
    alive=()
    for pid in "$@"; do
      kill -0 "$pid" 2>/dev/null && alive+=("$pid")
    done
    [[ ${#alive[@]} -eq 0 ]] && return 0
    [[ $(date +%s) -ge $deadline ]] && { echo "${alive[*]}"; return 0; }
    sleep 0.2
  done
}

# Stops the given node ids: SIGTERM, then SIGKILL after STOP_GRACE_SECS.
#
# A KRaft node cannot finish its controlled shutdown once the controller
# quorum is gone (a majority of the voters stopped): it would wait minutes.
# So once fewer than a majority of the cluster's nodes are left, the rest get
# QUORUM_LOST_GRACE_SECS before SIGKILL.
stop_nodes() {
  local id pid pids=() others=0 left
  for id in "$@"; do
    while read -r pid; do
      [[ -n "$pid" ]] && pids+=("$pid")
    done < <({ node_pid "$id"; tagged_pids "$id"; } | sort -u)
  done
  for id in $(all_node_ids); do
    if [[ " $* " != *" $id "* ]] && node_running "$id"; then others=$((others + 1)); fi
  done
  if [[ ${#pids[@]} -gt 0 ]]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    local deadline lost_at="" alive
    deadline=$(( $(date +%s) + STOP_GRACE_SECS ))
    while :; do
      alive=()
      for pid in "${pids[@]}"; do
        kill -0 "$pid" 2>/dev/null && alive+=("$pid")
      done
      [[ ${#alive[@]} -eq 0 ]] && break
      [[ $(date +%s) -ge $deadline ]] && break
      if [[ -z "$lost_at" && $(( 2 * (${#alive[@]} + others) )) -le $NODES ]]; then
        lost_at="$(date +%s)"
      fi
      if [[ -n "$lost_at" && $(( $(date +%s) - lost_at )) -ge $QUORUM_LOST_GRACE_SECS ]]; then
        log "controller quorum gone; SIGKILL for what is left: ${alive[*]}"
        break
      fi
      sleep 0.2
    done
    if [[ ${#alive[@]} -gt 0 ]]; then
      [[ -n "$lost_at" ]] || log "still running after ${STOP_GRACE_SECS}s, sending SIGKILL: ${alive[*]}"
      kill -KILL "${alive[@]}" 2>/dev/null || true
      left="$(wait_gone "$KILL_WAIT_SECS" "${alive[@]}")"
      [[ -z "$left" ]] || die "processes survived SIGKILL: $left"
    fi
  fi
  for id in "$@"; do
    rm -f "$(node_dir "$id")/pid"
    [[ -z "$(tagged_pids "$id")" ]] || die "node $id still has processes: $(tagged_pids "$id" | xargs)"
  done
}

all_node_ids() { seq 1 "$NODES"; }
node_rack() { echo "az-$1"; }

print_log_tails() {
  local id
  for id in "$@"; do
    echo "---- node $id: tail of $(node_dir "$id")/server.log ----" >&2
    tail -n 40 "$(node_dir "$id")/server.log" >&2 2>/dev/null || true
  done
}

# wait_ready BOOTSTRAP_PORT BROKERS TIMEOUT NODE_IDS...: runs wait-kafka while
# checking that the nodes stay alive. Returns non-zero on failure.
wait_ready() {
  local bport="$1" brokers="$2" secs="$3"; shift 3
  local wpid id deadline rc
  "$DEVTOOLS" wait-kafka --bootstrap "127.0.0.1:$bport" --brokers "$brokers" \
    --timeout-secs "$secs" 8>&- &
  wpid=$!
  deadline=$(( $(date +%s) + secs + 15 ))
  while kill -0 "$wpid" 2>/dev/null; do
    for id in "$@"; do
      if ! node_running "$id"; then
        kill "$wpid" 2>/dev/null || true
        wait "$wpid" 2>/dev/null || true
        log "node $id exited during startup"
        return 1
      fi
    done
    if [[ $(date +%s) -ge $deadline ]]; then
      kill "$wpid" 2>/dev/null || true
      wait "$wpid" 2>/dev/null || true
      log "wait-kafka did not finish in time"
      return 1
    fi
    sleep 0.5
  done
  rc=0
  wait "$wpid" || rc=$?
  return "$rc"
}

print_summary() {
  echo "cluster '$NAME': $NODES node(s), Kafka $KAFKA_VERSION, cluster id $CLUSTER_ID"
  echo "  PLAINTEXT      $(bootstrap 0)"
  echo "  SASL_PLAINTEXT $(bootstrap 1)   (SCRAM-SHA-256/512, PLAIN: admin/admin-secret, basic/basic-secret)"
  echo "  SSL (mTLS)     $(bootstrap 2)"
  echo "  CONTROLLER     $(bootstrap 3)"
  echo "  INTERNAL       $(bootstrap 4)"
  echo "  env:  $CLUSTER_DIR/cluster.env"
  echo "  json: $CLUSTER_DIR/cluster.json"
  echo "  logs: $CLUSTER_DIR/node-*/server.log"
}

# ---------------------------------------------------------------- commands

cmd_start() {
  if ! is_uint "$NODES" || [[ "$NODES" -lt 1 || "$NODES" -gt 9 ]]; then
    die "--nodes must be 1..9"
  fi
  if ! is_uint "$BASE_PORT" || [[ "$BASE_PORT" -lt 1024 || $((BASE_PORT + 10 * NODES)) -gt 65535 ]]; then
    die "--base-port must be >= 1024 and leave room for 10 ports per node below 65536"
  fi
  command -v java >/dev/null 2>&1 || die "java not found (apt-get install openjdk-17-jre-headless)"
  lock_cluster
  local t0 id l p
  t0="$(now)"

  if [[ -f "$CLUSTER_DIR/meta" ]]; then
    local want_nodes="$NODES" want_base="$BASE_PORT" want_version="$KAFKA_VERSION" running=0
    load_cluster_meta
    for id in $(all_node_ids); do node_running "$id" && running=$((running + 1)); done
    if [[ $running -gt 0 ]]; then
      if [[ $running -eq $NODES && $NODES -eq $want_nodes && $BASE_PORT -eq $want_base \
            && "$KAFKA_VERSION" == "$want_version" && -f "$CLUSTER_DIR/cluster.env" ]]; then
        log "cluster '$NAME' is already running"
        print_summary
        return 0
      fi
      die "cluster '$NAME' is partly running or has other settings: run 'cluster.sh stop --name $NAME' first"
    fi
    NODES="$want_nodes" BASE_PORT="$want_base"
    set_kafka_version "$want_version"
  fi

  for ((id = 1; id <= NODES; id++)); do
    for l in "${!LISTENERS[@]}"; do
      p="$(port "$id" "$l")"
      ! port_in_use "$p" || die "port $p (node $id ${LISTENERS[$l]}) is already in use"
    done
  done
  check_jmx_base_port
  warn_ephemeral_ports
  if [[ -n "${SLUICE_KAFKA_JMX_BASE_PORT:-}" ]]; then
    for ((id = 1; id <= NODES; id++)); do
      p="$(jmx_port "$id")"
      ! port_in_use "$p" || die "port $p (node $id JMX) is already in use"
    done
  fi

  LIBS_DIR="$("$SCRIPT_DIR/fetch.sh" --kafka-version "$KAFKA_VERSION" | tail -n 1)"
  [[ -d "$LIBS_DIR" ]] || die "fetch.sh did not give a libs directory"
  ensure_devtools
  "$DEVTOOLS" gen-certs --out "$CERTS_DIR" >&2

  rm -rf "$CLUSTER_DIR"
  mkdir -p "$CLUSTER_DIR"
  CLUSTER_ID="$(new_cluster_id)"
  {
    printf 'META_NODES=%q\n' "$NODES"
    printf 'META_BASE_PORT=%q\n' "$BASE_PORT"
    printf 'META_CLUSTER_ID=%q\n' "$CLUSTER_ID"
    printf 'META_LIBS_DIR=%q\n' "$LIBS_DIR"
    printf 'META_KAFKA_VERSION=%q\n' "$KAFKA_VERSION"
  } > "$CLUSTER_DIR/meta"
  write_client_configs

  log "formatting storage of $NODES node(s), cluster id $CLUSTER_ID"
  local fmt_pids=()
  for id in $(all_node_ids); do
    mkdir -p "$(node_dir "$id")/data"
    write_node_properties "$id"
    java_tool kafka.tools.StorageTool format -t "$CLUSTER_ID" \
      -c "$(node_dir "$id")/node.properties" \
      --add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]' \
      --add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]' \
      --add-scram 'SCRAM-SHA-256=[name=basic,password=basic-secret]' \
      --add-scram 'SCRAM-SHA-512=[name=basic,password=basic-secret]' \
      > "$(node_dir "$id")/format.log" 2>&1 8>&- &
    fmt_pids+=("$!")
  done
  local failed=0 i
  for i in "${!fmt_pids[@]}"; do
    if ! wait "${fmt_pids[$i]}"; then
      failed=1
      log "formatting node $((i + 1)) failed:"
      cat "$(node_dir $((i + 1)))/format.log" >&2
    fi
  done
  [[ $failed -eq 0 ]] || die "storage format failed"

  log "starting $NODES node(s) of Kafka $KAFKA_VERSION (base port $BASE_PORT)"
  for id in $(all_node_ids); do launch_node "$id"; done

  local timeout_secs="${SLUICE_KAFKA_START_TIMEOUT:-120}"
  # shellcheck disable=SC2046
  if ! wait_ready "$(port 1 0)" "$NODES" "$timeout_secs" $(all_node_ids); then
    # shellcheck disable=SC2046
    print_log_tails $(all_node_ids)
    log "cluster '$NAME' failed to start; stopping its nodes"
    # shellcheck disable=SC2046
    stop_nodes $(all_node_ids) || true
    exit 1
  fi
  write_cluster_files
  print_summary
  log "cluster '$NAME' started in $(elapsed_since "$t0")s"
}

cmd_stop() {
  lock_cluster
  if [[ ! -f "$CLUSTER_DIR/meta" ]]; then
    log "no cluster '$NAME' under $CLUSTERS_DIR: nothing to stop"
    return 0
  fi
  load_cluster_meta
  local t0
  t0="$(now)"
  # shellcheck disable=SC2046
  stop_nodes $(all_node_ids)
  rm -f "$CLUSTER_DIR/cluster.env" "$CLUSTER_DIR/cluster.json"
  if [[ $PURGE -eq 1 ]]; then
    rm -rf "$CLUSTER_DIR"
  fi
  log "cluster '$NAME' stopped in $(elapsed_since "$t0")s"
}

cmd_status() {
  load_cluster_meta
  local id pid running=0
  echo "cluster '$NAME': $NODES node(s), Kafka $KAFKA_VERSION, base port $BASE_PORT, cluster id $CLUSTER_ID"
  for id in $(all_node_ids); do
    pid="$(node_pid "$id")"
    if [[ -n "$pid" ]]; then
      running=$((running + 1))
      echo "  node $id: running (pid $pid), PLAINTEXT 127.0.0.1:$(port "$id" 0)"
    else
      echo "  node $id: stopped"
    fi
  done
  local devtools="${SLUICE_DEVTOOLS:-${CARGO_TARGET_DIR:-$REPO_ROOT/target}/debug/sluice-devtools}"
  if [[ $running -gt 0 && -x "$devtools" ]]; then
    for id in $(all_node_ids); do
      if node_running "$id"; then
        "$devtools" wait-kafka --quiet --bootstrap "127.0.0.1:$(port "$id" 0)" \
          --brokers "$running" --timeout-secs 5 2>&1 | sed 's/^/  /' || true
        break
      fi
    done
  fi
  [[ $running -eq $NODES ]]
}

node_arg() {
  if ! is_uint "$NODE_ARG" || [[ "$NODE_ARG" -lt 1 || "$NODE_ARG" -gt "$NODES" ]]; then
    die "--node must be a node id, 1..$NODES"
  fi
}

cmd_kill_node() {
  lock_cluster
  load_cluster_meta
  node_arg
  local pids
  pids="$({ node_pid "$NODE_ARG"; tagged_pids "$NODE_ARG"; } | sort -u | xargs)"
  if [[ -z "$pids" ]]; then
    log "node $NODE_ARG is not running"
  else
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    local left
    # shellcheck disable=SC2086
    left="$(wait_gone "$KILL_WAIT_SECS" $pids)"
    [[ -z "$left" ]] || die "node $NODE_ARG survived SIGKILL: $left"
    log "killed node $NODE_ARG (pid $pids)"
  fi
  rm -f "$(node_dir "$NODE_ARG")/pid"
}

cmd_start_node() {
  lock_cluster
  load_cluster_meta
  node_arg
  local t0 id running=0
  t0="$(now)"
  if node_running "$NODE_ARG"; then
    log "node $NODE_ARG is already running (pid $(node_pid "$NODE_ARG"))"
    return 0
  fi
  ! port_in_use "$(port "$NODE_ARG" 0)" || die "port $(port "$NODE_ARG" 0) is in use"
  check_jmx_base_port
  [[ -f "$(node_dir "$NODE_ARG")/node.properties" ]] || die "node $NODE_ARG has no storage; use start"
  [[ -d "$LIBS_DIR" ]] || LIBS_DIR="$("$SCRIPT_DIR/fetch.sh" --kafka-version "$KAFKA_VERSION" | tail -n 1)"
  launch_node "$NODE_ARG"
  [[ $NO_WAIT -eq 1 ]] && { log "started node $NODE_ARG (not waiting)"; return 0; }
  for id in $(all_node_ids); do node_running "$id" && running=$((running + 1)); done
  ensure_devtools
  if ! wait_ready "$(port "$NODE_ARG" 0)" "$running" "${SLUICE_KAFKA_START_TIMEOUT:-120}" "$NODE_ARG"; then
    print_log_tails "$NODE_ARG"
    stop_nodes "$NODE_ARG" || true
    die "node $NODE_ARG failed to start"
  fi
  log "node $NODE_ARG started in $(elapsed_since "$t0")s"
}

case "$CMD" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  kill-node) cmd_kill_node ;;
  start-node) cmd_start_node ;;
  *) die "unknown command: $CMD (see --help)" ;;
esac
