# shellcheck shell=bash
# The phases of scripts/bench that measure how Sluice's cost grows with the
# work (partitions, clients, nodes), and the bare relay every proxy row is
# read against. Sourced by scripts/bench right after its own knobs are read:
# the knobs here are checked at once (before any cluster starts), the
# functions run later with the bench's helpers (run, start, must, step, ...).
# What each phase does is in scripts/bench's header; the rows it writes to
# results.tsv are in report.py's docstring.

SCALE_TOPICS="${BENCH_PARTITIONS_TOPICS:-500}"
SCALE_PER_TOPIC="${BENCH_PARTITIONS_PER_TOPIC:-20}"
SCALE_CLIENT_PARTITIONS="${BENCH_PARTITIONS_CLIENT:-1000}"
SCALE_PART_RECORDS="${BENCH_PARTITIONS_RECORDS:-$RECORDS}"
SCALE_META_REQUESTS="${BENCH_METADATA_REQUESTS:-200}"
SCALE_META_PASSES="${BENCH_METADATA_PASSES:-3}"
SCALE_CLIENTS_TOTAL="${BENCH_CLIENTS_TOTAL:-5000}"
SCALE_CLIENTS_ACTIVE="${BENCH_CLIENTS_ACTIVE:-500}"
SCALE_CLIENTS_RATE="${BENCH_CLIENTS_RATE:-2}"
SCALE_CLIENTS_SECS="${BENCH_CLIENTS_SECONDS:-30}"
SCALE_CLIENTS_WARMUP="${BENCH_CLIENTS_WARMUP_SECONDS:-5}"
SCALE_CLIENTS_PORT="${BENCH_CLIENTS_PORT:-$((${BENCH_SLUICE_PORT:-24192} + 40))}"
SCALE_NODES_COUNTS="${BENCH_NODES_COUNTS:-1 2 3}"
SCALE_NODES_CLIENTS="${BENCH_NODES_CLIENTS:-3}"
SCALE_NODES_RECORDS="${BENCH_NODES_RECORDS:-$RECORDS}"
SCALE_NODES_PORT="${BENCH_NODES_PORT:-$((${BENCH_SLUICE_PORT:-24192} + 50))}"
SCALE_PREFIX="bench-many-"

for v in BENCH_PARTITIONS_TOPICS BENCH_PARTITIONS_PER_TOPIC BENCH_PARTITIONS_CLIENT BENCH_PARTITIONS_RECORDS \
         BENCH_METADATA_REQUESTS BENCH_METADATA_PASSES BENCH_CLIENTS_TOTAL BENCH_CLIENTS_ACTIVE BENCH_CLIENTS_RATE BENCH_CLIENTS_SECONDS \
         BENCH_CLIENTS_WARMUP_SECONDS BENCH_CLIENTS_PORT BENCH_NODES_CLIENTS BENCH_NODES_RECORDS BENCH_NODES_PORT; do
  [[ "${!v:-1}" =~ ^[0-9]+$ && "${!v:-1}" -gt 0 ]] || { echo "bench: $v must be a whole number > 0, not '${!v}'" >&2; exit 2; }
done
for n in $SCALE_NODES_COUNTS; do
  [[ "$n" =~ ^[0-9]+$ && "$n" -gt 0 ]] || { echo "bench: BENCH_NODES_COUNTS must hold whole numbers > 0, not '$n'" >&2; exit 2; }
done
((SCALE_CLIENT_PARTITIONS <= SCALE_TOPICS * SCALE_PER_TOPIC)) || {
  echo "bench: BENCH_PARTITIONS_CLIENT ($SCALE_CLIENT_PARTITIONS) is more than the $((SCALE_TOPICS * SCALE_PER_TOPIC)) partitions of BENCH_PARTITIONS_TOPICS x BENCH_PARTITIONS_PER_TOPIC" >&2
  exit 2
}
((SCALE_CLIENTS_ACTIVE <= SCALE_CLIENTS_TOTAL)) || { echo "bench: BENCH_CLIENTS_ACTIVE must be <= BENCH_CLIENTS_TOTAL" >&2; exit 2; }
# The clients phase's Sluice holds every client's socket and one broker
# connection per producing client; the brokers (started from here, so they
# inherit the limit) hold the direct case's. Raise the soft limit now, or stop.
if [[ "$PHASES" == *" clients "* ]]; then
  want_fds=$((SCALE_CLIENTS_TOTAL + SCALE_CLIENTS_ACTIVE + 1024))
  (($(ulimit -n) >= want_fds)) || ulimit -n "$want_fds" 2>/dev/null || true
  if (($(ulimit -n) < want_fds)); then
    echo "bench: BENCH_CLIENTS_TOTAL=$SCALE_CLIENTS_TOTAL needs $want_fds file descriptors, but the hard limit (ulimit -Hn) is $(ulimit -Hn); raise it or lower BENCH_CLIENTS_TOTAL" >&2
    exit 2
  fi
fi

# relay_up: starts the bare relay (bench.d/relay.py) in front of the brokers'
# RELAY listeners unless it runs; relay_pid is its process (for CPU).
relay_up() {
  [[ -n "${relay_bg:-}" ]] && kill -0 "$relay_bg" 2>/dev/null && return 0
  step "starting the bare relay on $RELAY_BOOTSTRAP"
  start relay_bg 86400 "$RUN_DIR/relay.out" "$RUN_DIR/relay.err" "$PY" "$BENCH_D/relay.py" \
    "$((BASE_PORT + 6)):$((BASE_PORT + 5))" "$((BASE_PORT + 16)):$((BASE_PORT + 15))" \
    "$((BASE_PORT + 26)):$((BASE_PORT + 25))"
  wait_line "$RUN_DIR/relay.out" '^listening' "$relay_bg" 30 "the relay"
  # start's pid is timeout(1)'s; the relay's CPU is its child's.
  relay_pid="$(pgrep -P "$relay_bg" | head -n 1)"
  [[ -n "$relay_pid" ]] || { echo "bench: the relay's process is not found" >&2; exit 1; }
}

# relay_down: stops the relay if it runs.
relay_down() {
  [[ -z "${relay_bg:-}" ]] || stop_bg "$relay_bg"
  relay_bg=""
}

# scale_sluice VAR LOG LIMIT INDEX ADDR...: one Sluice process serving node
# INDEX of the nodes ADDR... (each its own process), connection_limit LIMIT
# (empty: the default), /metrics on its listener's port + 1; waits until it
# listens and puts its pid in VAR.
scale_sluice() {
  local var="$1" log="$2" limit="$3" index="$4" j new_pid
  shift 4
  local addrs=("$@")
  local addr="${addrs[$index]}"
  {
    printf 'sources:\n  - Kafka:\n      name: "kafka%s"\n      listen_addr: "%s"\n' "$index" "$addr"
    [[ -z "$limit" ]] || printf '      connection_limit: %s\n' "$limit"
    printf '      chain:\n        - KafkaSinkCluster:\n            shotover_nodes:\n'
    for j in "${!addrs[@]}"; do
      printf '              - address_for_clients: "%s"\n                address_for_peers: "%s"\n                rack: "rack0"\n                broker_id: %s\n' \
        "${addrs[$j]}" "${addrs[$j]}" "$j"
    done
    cat <<YAML
            local_shotover_broker_id: $index
            first_contact_points: ["127.0.0.1:$BASE_PORT", "127.0.0.1:$((BASE_PORT + 10))"]
            connect_timeout_ms: 3000
            read_timeout: 60
YAML
  } > "$log.topology.yaml"
  printf 'main_log_level: "warn"\nobservability_interface: "127.0.0.1:%s"\n' "$((${addr#*:} + 1))" > "$log.config.yaml"
  target/release/sluice --topology-file "$log.topology.yaml" --config-file "$log.config.yaml" > "$log" 2>&1 &
  new_pid=$!
  scale_pids+=("$new_pid")
  wait_listening "$new_pid" "$log" "$addr"
  printf -v "$var" '%s' "$new_pid"
}

# scale_stop: stops every Sluice process scale_sluice started.
scale_pids=()
scale_stop() {
  local pid
  for pid in "${scale_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${scale_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  scale_pids=()
}

# ticks_of PID...: the summed utime+stime of the processes, in clock ticks.
ticks_of() {
  local pid sum=0
  for pid in "$@"; do sum=$((sum + $(cpu_ticks "$pid"))); done
  echo "$sum"
}

# many_client MODE VIA BOOTSTRAP PID ARGS...: one ManyPartitions run over the
# phase's first BENCH_PARTITIONS_CLIENT partitions, recorded as a many-MODE
# row and, through a proxy (PID), a cpu many-MODE[-relay] row.
many_client() {
  local mode="$1" via="$2" bootstrap="$3" pid="$4" log t0 t1 bytes cpu_kind="many-$1"
  shift 4
  log="$RUN_DIR/partitions-$mode-$via"
  step "partitions: one $mode client over $SCALE_CLIENT_PARTITIONS partitions, $via"
  [[ -z "$pid" ]] || t0=$(cpu_ticks "$pid")
  must "ManyPartitions $mode ($via)" "$log" \
    run 900 "$log.out" "$log.err" \
    "${JAVA[@]/#-Xmx256m/-Xmx768m}" ManyPartitions "$mode" --bootstrap "$bootstrap" --prefix "$SCALE_PREFIX" \
    --per-topic "$SCALE_PER_TOPIC" --partitions "$SCALE_CLIENT_PARTITIONS" "$@"
  [[ -z "$pid" ]] || t1=$(cpu_ticks "$pid")
  bytes=$(tail -n 1 "$log.out" | awk '{ print $3 }')
  printf 'many-%s\t%s\t%s\t%s\n' "$mode" "$via" "$SCALE_CLIENT_PARTITIONS" \
    "$(tail -n 1 "$log.out" | cut -d' ' -f2- | tr ' ' '\t')" >> "$RESULTS"
  [[ "$via" != relay ]] || cpu_kind="many-$mode-relay"
  [[ -z "$pid" ]] || cpu_row "$cpu_kind" "$t0" "$t1" "$bytes" >> "$RESULTS"
}

# The partitions phase: BENCH_PARTITIONS_TOPICS x BENCH_PARTITIONS_PER_TOPIC
# partitions (RF 1); full Metadata, then one producer and one consumer over
# BENCH_PARTITIONS_CLIENT of them; direct, through the relay and through Sluice.
scale_partitions() {
  local total=$((SCALE_TOPICS * SCALE_PER_TOPIC)) via bootstrap pid log line produced i order
  javac -nowarn -d "$CLASSES" -cp "$LIBS/*" "$BENCH_D/ManyPartitions.java"
  step "partitions: creating $SCALE_TOPICS topics x $SCALE_PER_TOPIC partitions (RF 1)"
  must "creating the partitions phase's topics" "$RUN_DIR/partitions-topics" \
    run 1200 "$RUN_DIR/partitions-topics.out" "$RUN_DIR/partitions-topics.err" \
    "$PY" "$BENCH_D/topics.py" --bootstrap "$DIRECT" --prefix "$SCALE_PREFIX" \
    --topics "$SCALE_TOPICS" --per-topic "$SCALE_PER_TOPIC" --timeout-secs 1100
  # Each broker answers Metadata from its own cache, which learns of new
  # topics a little after the others: wait until every broker lists all of
  # them (the timed requests check that every answer does).
  step "partitions: waiting until every broker's Metadata lists all $total partitions"
  local broker deadline
  for broker in $(seq 0 2); do
    deadline=$((SECONDS + 180))
    until "$SLUICE_DEVTOOLS" metadata-latency --bootstrap "127.0.0.1:$((BASE_PORT + 10 * broker))" \
      --requests 1 --warmup 0 --expect-partitions "$total" --topic-prefix "$SCALE_PREFIX" \
      --timeout-secs 30 >"$RUN_DIR/partitions-complete.out" 2>"$RUN_DIR/partitions-complete.err"; do
      if ((SECONDS > deadline)); then
        echo "bench: broker $((broker + 1))'s Metadata did not list all $total partitions within 180 s:" >&2
        cat "$RUN_DIR/partitions-complete.err" >&2
        return 1
      fi
      sleep 1
    done
  done
  # Uncounted: ten records to each partition the clients use, so that no
  # timed producer is the first to write to one (and the brokers are done
  # with the new topics before anything is timed).
  step "partitions: warming up (10 records to each of $SCALE_CLIENT_PARTITIONS partitions, direct, not counted)"
  must "ManyPartitions warm-up" "$RUN_DIR/partitions-warmup" \
    run 900 "$RUN_DIR/partitions-warmup.out" "$RUN_DIR/partitions-warmup.err" \
    "${JAVA[@]/#-Xmx256m/-Xmx768m}" ManyPartitions produce --bootstrap "$DIRECT" --prefix "$SCALE_PREFIX" \
    --per-topic "$SCALE_PER_TOPIC" --partitions "$SCALE_CLIENT_PARTITIONS" \
    --records $((10 * SCALE_CLIENT_PARTITIONS)) --record-size "$RECORD_SIZE"
  produced=$((10 * SCALE_CLIENT_PARTITIONS))
  relay_up
  # BENCH_METADATA_PASSES passes, every other one in the opposite order, so
  # that no path is always the first.
  order=""
  for ((i = 1; i <= SCALE_META_PASSES; i++)); do
    if ((i % 2)); then order+="direct-$i relay-$i sluice-$i "; else order+="sluice-$i relay-$i direct-$i "; fi
  done
  for via in $order; do
    case "$via" in
      direct*) bootstrap="127.0.0.1:$BASE_PORT" pid="" ;;
      relay*) bootstrap="127.0.0.1:$((BASE_PORT + 6))" pid="$relay_pid" ;;
      sluice*) bootstrap="$LISTEN" pid="$sluice_pid" ;;
    esac
    log="$RUN_DIR/partitions-metadata-$via"
    via="${via%-*}"
    step "partitions: $SCALE_META_REQUESTS full Metadata requests ($total partitions), $via"
    must "metadata-latency ($via)" "$log" \
      run 660 "$log.out" "$log.err" \
      "$SLUICE_DEVTOOLS" metadata-latency --bootstrap "$bootstrap" --requests "$SCALE_META_REQUESTS" \
      --warmup 10 --expect-partitions "$total" --topic-prefix "$SCALE_PREFIX" --timeout-secs 600 \
      ${pid:+--cpu-pid "$pid"}
    line="$(tail -n 1 "$log.out")"
    [[ "$line" == metadata$'\t'* ]] || { echo "bench: metadata-latency ($via) printed '$line'" >&2; return 1; }
    printf '%s\t%s\t%s\n' "metadata" "$via" "${line#metadata$'\t'}" >> "$RESULTS"
  done
  for via in direct relay sluice; do
    case "$via" in
      direct) bootstrap="$DIRECT" pid="" ;;
      relay) bootstrap="$RELAY_BOOTSTRAP" pid="$relay_pid" ;;
      sluice) bootstrap="$SLUICE_BOOTSTRAP" pid="$sluice_pid" ;;
    esac
    many_client produce "$via" "$bootstrap" "$pid" --records "$SCALE_PART_RECORDS" --record-size "$RECORD_SIZE"
    produced=$((produced + SCALE_PART_RECORDS))
  done
  for via in direct relay sluice; do
    case "$via" in
      direct) bootstrap="$DIRECT" pid="" ;;
      relay) bootstrap="$RELAY_BOOTSTRAP" pid="$relay_pid" ;;
      sluice) bootstrap="$SLUICE_BOOTSTRAP" pid="$sluice_pid" ;;
    esac
    many_client consume "$via" "$bootstrap" "$pid" --expect "$produced" --timeout-secs 600
  done
  relay_down
}

# The clients phase: BENCH_CLIENTS_TOTAL connections, BENCH_CLIENTS_ACTIVE
# of them producing; direct, then through a fresh one-node Sluice.
scale_clients() {
  local topic addr pid rest log via bootstrap line
  addr="127.0.0.1:$SCALE_CLIENTS_PORT"
  topic="bench-clients-$RANDOM"
  create_topic "$topic"
  scale_sluice pid "$SLUICE_STATE_DIR/sluice-clients.log" $((SCALE_CLIENTS_TOTAL + 1000)) 0 "$addr"
  sleep 1 # at rest: let start-up allocations settle
  rest=$(rss_kb "$pid")
  printf 'clients-rest\t%s\n' "$rest" >> "$RESULTS"
  for via in direct sluice; do
    log="$RUN_DIR/clients-$via"
    bootstrap="$addr"
    [[ "$via" == sluice ]] || bootstrap="127.0.0.1:$BASE_PORT"
    step "clients: $SCALE_CLIENTS_TOTAL connections, $SCALE_CLIENTS_ACTIVE producing $SCALE_CLIENTS_RATE/s each, $via ($SCALE_CLIENTS_WARMUP s + $SCALE_CLIENTS_SECS s)"
    must "produce-load ($via)" "$log" \
      run $((SCALE_CLIENTS_WARMUP + SCALE_CLIENTS_SECS + 420)) "$log.out" "$log.err" \
      "$SLUICE_DEVTOOLS" produce-load --bootstrap "$bootstrap" --topic "$topic" \
      --total "$SCALE_CLIENTS_TOTAL" --active "$SCALE_CLIENTS_ACTIVE" --rate "$SCALE_CLIENTS_RATE" \
      --record-size "$RECORD_SIZE" --warmup-secs "$SCALE_CLIENTS_WARMUP" --seconds "$SCALE_CLIENTS_SECS" \
      --timeout-secs 300 $( [[ "$via" == sluice ]] && echo "--cpu-pid $pid --rss-pid $pid")
    line="$(tail -n 1 "$log.out")"
    [[ "$line" == clients$'\t'* ]] || { echo "bench: produce-load ($via) printed '$line'" >&2; return 1; }
    printf 'clients\t%s\t%s\n' "$via" "${line#clients$'\t'}" >> "$RESULTS"
  done
  scale_stop
}

# nodes_batch VIA KIND TAG BOOTSTRAP... : BENCH_NODES_CLIENTS clients of KIND
# (produce or consume) at once, client i on its own topic TAG-i and the
# bootstrap i mod the count given; each one's last line is a KIND row of VIA.
nodes_batch() {
  local via="$1" kind="$2" tag="$3" i pids=() log topic line
  shift 3
  local addrs=("$@")
  for ((i = 0; i < SCALE_NODES_CLIENTS; i++)); do
    log="$RUN_DIR/nodes-$tag-$kind-$i"
    topic="bench-nodes-$tag-$i"
    if [[ "$kind" == produce ]]; then
      start "pids[$i]" 900 "$log.out" "$log.err" \
        "$TOOL" producer-perf --topic "$topic" --num-records "$SCALE_NODES_RECORDS" \
        --record-size "$RECORD_SIZE" --throughput -1 \
        --command-property bootstrap.servers="${addrs[i % ${#addrs[@]}]}" acks=all linger.ms=5 batch.size=131072
    else
      start "pids[$i]" 900 "$log.out" "$log.err" \
        "$TOOL" consumer-perf --bootstrap-server "${addrs[i % ${#addrs[@]}]}" --topic "$topic" \
        --num-records "$SCALE_NODES_RECORDS" --timeout 60000 --hide-header
    fi
  done
  for ((i = 0; i < SCALE_NODES_CLIENTS; i++)); do
    log="$RUN_DIR/nodes-$tag-$kind-$i"
    must "nodes: $kind client $i ($via)" "$log" wait_ok "${pids[$i]}"
    line="$(tail -n 1 "$log.out")"
    # ConsumerPerformance exits 0 when it times out short of --num-records.
    if [[ "$kind" == consume ]] && (($(echo "$line" | awk -F', *' '{ printf "%d", $5 }') != SCALE_NODES_RECORDS)); then
      echo "bench: nodes: consumer $i ($via) read fewer than $SCALE_NODES_RECORDS records: $line" >&2
      show_logs "$log.out" "$log.err"
      return 1
    fi
    printf 'nodes-%s\t%s\t%s\t%s\n' "$kind" "$via" "$SCALE_NODES_CLIENTS" "$line" >> "$RESULTS"
  done
}

# nodes_case VIA TAG PIDS BOOTSTRAP...: BENCH_NODES_CLIENTS producers at once,
# then as many consumers reading what they wrote; the CPU of PIDS (a
# space-separated list; empty for direct) over each batch.
nodes_case() {
  local via="$1" tag="$2" pids="$3" i t0 t1 kind bytes
  shift 3
  for ((i = 0; i < SCALE_NODES_CLIENTS; i++)); do create_topic "bench-nodes-$tag-$i"; done
  bytes=$((SCALE_NODES_CLIENTS * SCALE_NODES_RECORDS * RECORD_SIZE))
  for kind in produce consume; do
    step "nodes: $SCALE_NODES_CLIENTS ${kind}rs at once, $via"
    # shellcheck disable=SC2086 # PIDS is a list
    [[ -z "$pids" ]] || t0=$(ticks_of $pids)
    nodes_batch "$via" "$kind" "$tag" "$@"
    # shellcheck disable=SC2086
    [[ -z "$pids" ]] || { t1=$(ticks_of $pids); cpu_row "nodes-$kind-$via" "$t0" "$t1" "$bytes" >> "$RESULTS"; }
  done
}

# The nodes phase: the same clients direct, through the relay, and through
# each of BENCH_NODES_COUNTS Sluice nodes (one process each).
scale_nodes() {
  local k j addrs pids pid
  relay_up
  nodes_case direct "direct-$RANDOM" "" "127.0.0.1:$BASE_PORT" "127.0.0.1:$((BASE_PORT + 10))" "127.0.0.1:$((BASE_PORT + 20))"
  nodes_case relay "relay-$RANDOM" "$relay_pid" "127.0.0.1:$((BASE_PORT + 6))" "127.0.0.1:$((BASE_PORT + 16))" "127.0.0.1:$((BASE_PORT + 26))"
  relay_down
  for k in $SCALE_NODES_COUNTS; do
    addrs=()
    for ((j = 0; j < k; j++)); do addrs+=("127.0.0.1:$((SCALE_NODES_PORT + 2 * j))"); done
    pids=""
    step "nodes: starting $k Sluice processes on ${addrs[*]}"
    for ((j = 0; j < k; j++)); do
      scale_sluice pid "$SLUICE_STATE_DIR/sluice-nodes-$k-$j.log" "" "$j" "${addrs[@]}"
      pids+="$pid "
    done
    nodes_case "sluice-$k" "sluice$k-$RANDOM" "$pids" "${addrs[@]}"
    scale_stop
  done
}

# scale_phases: the phases above that BENCH_PHASES names, in this order (the
# partitions phase last: its topics stay).
scale_phases() {
  if phase nodes; then scale_nodes; fi
  if phase clients; then scale_clients; fi
  if phase partitions; then scale_partitions; fi
}
