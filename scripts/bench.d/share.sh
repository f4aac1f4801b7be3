# shellcheck shell=bash
# The share phase of scripts/bench: share consumers (KIP-932) through Sluice
# and directly, throughput then end-to-end latency. Sourced by scripts/bench;
# the functions run with the bench's helpers (run, must, step, ...). What the
# phase measures is in scripts/bench's header.

# share_throughput VIA BOOTSTRAP TOPIC ROUND: one share consumer of a fresh
# group reads all SHARE_RECORDS records of TOPIC; a "share" row (and, through
# Sluice, a cpu share row).
share_throughput() {
  local via="$1" bootstrap="$2" topic="$3" round="$4" log t0 t1
  log="$RUN_DIR/share-$round-$via"
  step "share consumer throughput, $via, round $round of $SHARE_ROUNDS"
  t0=$(cpu_ticks "$sluice_pid")
  must "ShareBench throughput ($via, round $round)" "$log" \
    run 900 "$log.out" "$log.err" \
    "${JAVA[@]}" ShareBench --mode throughput --bootstrap "$bootstrap" --setup-bootstrap "$DIRECT" \
    --topic "$topic" --group "bench-share-$via-$round-$RANDOM" --records "$SHARE_RECORDS" --timeout-secs 600
  t1=$(cpu_ticks "$sluice_pid")
  awk -v via="$via" '/^RESULT throughput/ { printf "share\t%s\t%s\t%s\t%s\n", via, $3, $4, $5 }' "$log.out" >> "$RESULTS"
  [[ "$via" == direct ]] || cpu_row share "$t0" "$t1" $((SHARE_RECORDS * RECORD_SIZE)) >> "$RESULTS"
}

# share_tail VIA BOOTSTRAP ROUND: the share latency case on a fresh topic; a
# "sharelat" row.
share_tail() {
  local via="$1" bootstrap="$2" round="$3" topic log
  topic="bench-sharetail-$via-$round-$RANDOM"
  log="$RUN_DIR/sharetail-$round-$via"
  step "share consumer latency at $SHARE_RATE records/s, $via, round $round of $SHARE_ROUNDS"
  create_topic "$topic"
  must "ShareBench tail ($via, round $round)" "$log" \
    run $((TAIL_WARMUP + TAIL_SECS + 240)) "$log.out" "$log.err" \
    "${JAVA[@]}" ShareBench --mode tail --bootstrap "$bootstrap" --setup-bootstrap "$DIRECT" \
    --topic "$topic" --group "bench-sharetail-$via-$round-$RANDOM" --rate "$SHARE_RATE" \
    --warmup-secs "$TAIL_WARMUP" --seconds "$TAIL_SECS" --timeout-secs $((TAIL_WARMUP + TAIL_SECS + 180))
  awk -v via="$via" '/^RESULT tail/ { printf "sharelat\t%s\t%s\t%s\t%s\t%s\t%s\n", via, $3, $4, $5, $6, $7 }' "$log.out" >> "$RESULTS"
}

# The share phase: throughput on one topic filled directly, then latency.
share_phase() {
  local topic round
  topic="bench-share-$RANDOM"
  create_topic "$topic"
  fill_topic "$topic" "$SHARE_RECORDS" "$RUN_DIR/share-fill" "share topic"
  for ((round = 1; round <= SHARE_ROUNDS; round++)); do
    if ((round % 2 == 1)); then
      share_throughput direct "$DIRECT" "$topic" "$round"; share_throughput sluice "$SLUICE_BOOTSTRAP" "$topic" "$round"
    else
      share_throughput sluice "$SLUICE_BOOTSTRAP" "$topic" "$round"; share_throughput direct "$DIRECT" "$topic" "$round"
    fi
  done
  for ((round = 1; round <= SHARE_ROUNDS; round++)); do
    if ((round % 2 == 1)); then
      share_tail direct "$DIRECT" "$round"; share_tail sluice "$SLUICE_BOOTSTRAP" "$round"
    else
      share_tail sluice "$SLUICE_BOOTSTRAP" "$round"; share_tail direct "$DIRECT" "$round"
    fi
  done
}
