# shellcheck shell=bash
# The memory phase of scripts/bench: RSS holding idle connections, direct and
# through a Sluice node of its own, and the peak RSS under a client that
# pipelines fetches and never reads. Sourced by scripts/bench; the functions
# run with the bench's helpers (run, start, must, step, ...). What the phase
# measures is in scripts/bench's header.

# rss_kb PID: the process's resident set (VmRSS) in KiB.
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# open_count ADDR: Sluice's open client connections, from the memory
# node's /metrics.
open_count() {
  curl -sf --max-time 5 "http://$MEM_METRICS/metrics" \
    | awk '/^sluice_client_connections_open[{ ]/ { n += $NF } END { print n + 0 }'
}

# idle_memory_case VIA ADDR PID COUNT: RSS of PID (Sluice, or the broker for
# direct) while COUNT idle connections to ADDR are held, recorded as VIA.
idle_memory_case() {
  local via="$1" addr="$2" pid="$3" count="$4" log client rss deadline
  log="$RUN_DIR/memory-idle-$via-$count"
  step "memory: $count idle connections, $via"
  start client 420 "$log.out" "$log.err" \
    "$SLUICE_DEVTOOLS" idle-connections --bootstrap "$addr" --count "$count" \
    --timeout-secs 300 --ignore-stdin --hold-secs 400
  wait_line "$log.out" '^ready' "$client" 330 "idle-connections ($count, $via)"
  sleep 2 # let the last connections settle before reading RSS
  rss=$(rss_kb "$pid")
  kill -TERM "$client"
  must "idle-connections ($count, $via)" "$log" wait_ok "$client"
  printf 'memory\t%s\t%s\t%s\n' "$via" "$count" "$rss" >> "$RESULTS"
  [[ "$via" == sluice ]] || return 0
  deadline=$((SECONDS + 60))
  until (($(open_count) == 0)); do
    if ((SECONDS >= deadline)); then
      echo "bench: Sluice still counts $(open_count) open client connections 60 s after idle-connections let go" >&2
      return 1
    fi
    sleep 0.2
  done
}

# pipeline_case: peak RSS of the memory node while pipeline-fetch holds 40
# unread Fetch requests on a full topic.
pipeline_case() {
  local topic log dir p bytes min_bytes="" client peak=0 rss samples closed="no"
  topic="bench-pipeline-$RANDOM"
  log="$RUN_DIR/memory-pipeline"
  create_topic "$topic"
  fill_topic "$topic" "$MEM_RECORDS" "$log-produce" "pipelining topic"
  # RF 3 on 3 brokers: broker 1 holds every partition.
  for p in 0 1 2 3 4 5; do
    dir="$SLUICE_STATE_DIR/clusters/bench/node-1/data/$topic-$p"
    # The segments only: a segment's index files are preallocated (sparse).
    bytes=$(cat "$dir"/*.log 2>/dev/null | wc -c)
    ((bytes > 0)) || { echo "bench: no records in $dir" >&2; return 1; }
    if [[ -z "$min_bytes" || "$bytes" -lt "$min_bytes" ]]; then min_bytes=$bytes; fi
  done
  if ((min_bytes < 50 * 1024 * 1024 * 3 / 2 / 6)); then
    echo "bench: the smallest partition of $topic holds $min_bytes bytes, under 1.5 x 50 MiB / 6; raise BENCH_MEMORY_RECORDS" >&2
    return 1
  fi
  step "memory: pipelining client on $topic ($MEM_SECS s)"
  start client $((MEM_SECS + 180)) "$log.out" "$log.err" \
    "$SLUICE_DEVTOOLS" pipeline-fetch --bootstrap "$MEM_LISTEN" --topic "$topic" \
    --requests 40 --max-bytes 52428800 --ignore-stdin --hold-secs $((MEM_SECS + 120))
  wait_line "$log.out" '^sent' "$client" 60 "pipeline-fetch"
  samples=$((MEM_SECS * 2))
  while ((samples-- > 0)); do
    rss=$(rss_kb "$mem_sluice_pid")
    ((rss > peak)) && peak=$rss
    sleep 0.5
  done
  if ! kill -0 "$client" 2>/dev/null; then
    echo "bench: pipeline-fetch exited during the window" >&2
    show_logs "$log.out" "$log.err"
    return 1
  fi
  grep -q 'write_timeout_secs); closing' "$SLUICE_STATE_DIR/sluice-memory.log" && closed="yes"
  kill -TERM "$client"
  must "pipeline-fetch" "$log" wait_ok "$client"
  printf 'pipeline\t%s\t%s\t%s\t%s\t%s\n' "$peak" "$MEM_SECS" "$MEM_WRITE_TIMEOUT" "$min_bytes" "$closed" >> "$RESULTS"
}

# The memory node: a Sluice of its own, so that its RSS at rest is that of a
# process that served nothing yet, and the hostile client's memory does not
# show in the other phases' peak.
start_memory_sluice() {
  write_topology "$SLUICE_STATE_DIR/topology-memory.yaml" $((MEM_MAX + 1000)) "$MEM_LISTEN"
  sed -e "s/$METRICS/$MEM_METRICS/" "$SLUICE_STATE_DIR/config.yaml" > "$SLUICE_STATE_DIR/config-memory.yaml"
  step "memory: starting a Sluice node of its own on $MEM_LISTEN"
  target/release/sluice --topology-file "$SLUICE_STATE_DIR/topology-memory.yaml" \
    --config-file "$SLUICE_STATE_DIR/config-memory.yaml" >"$SLUICE_STATE_DIR/sluice-memory.log" 2>&1 &
  mem_sluice_pid=$!
  wait_listening "$mem_sluice_pid" "$SLUICE_STATE_DIR/sluice-memory.log" "$MEM_LISTEN"
  sleep 1 # at rest: let start-up allocations settle
}
