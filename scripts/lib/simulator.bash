#!/usr/bin/env bash
# Sourced, not run: the bundled provider simulator for scripts/demo and the benchmark scripts, started one way.
#
#   start_simulator BIN DIR [push-simulator flags…]
#       Starts BIN/push-simulator in the background, its credentials in DIR/credentials, its ready file
#       DIR/ready.json and its log DIR/simulator.log, and sets `simulator` to its pid. Waits up to 10 s for it to be
#       ready; if it is not, prints its log and returns 69 (EX_UNAVAILABLE: a script under `set -e` exits with it,
#       an interactive shell stays), so that nothing runs against a server that is not there. Then sets `simulator_url` (https://127.0.0.1:PORT) and exports what production sets
#       (docs/CONFIGURATION.md), pointed at it: PUSH_APNS_KEY_FILE, PUSH_APNS_KEY_ID, PUSH_APNS_TEAM_ID,
#       PUSH_APNS_TOPIC, PUSH_APNS_ENDPOINT, PUSH_APNS_SANDBOX_ENDPOINT, PUSH_FCM_SERVICE_ACCOUNT_FILE,
#       PUSH_FCM_ENDPOINT and PUSH_CA_FILE.
#   stop_simulator
#       Stops it (SIGTERM: it then prints its counters to its log) and waits for it; nothing if none runs. For an
#       EXIT trap, and safe to call twice.

simulator=""
simulator_url=""

start_simulator() {
    local bin=$1 dir=$2
    shift 2
    mkdir -p "$dir"
    rm -f "$dir/ready.json"
    "$bin/push-simulator" --credentials "$dir/credentials" --ready-file "$dir/ready.json" "$@" \
        > /dev/null 2> "$dir/simulator.log" &
    simulator=$!
    local _
    for _ in $(seq 1 100); do
        [ -s "$dir/ready.json" ] && break
        kill -0 "$simulator" 2> /dev/null || break
        sleep 0.1
    done
    if [ ! -s "$dir/ready.json" ]; then
        echo "${0##*/}: the provider simulator did not start; its log ($dir/simulator.log):" >&2
        cat "$dir/simulator.log" >&2
        stop_simulator
        return 69
    fi
    simulator_url=$(simulator_field "$dir" base_url)
    export PUSH_APNS_KEY_FILE="$(simulator_field "$dir" apns_key_file)"
    export PUSH_APNS_KEY_ID="$(simulator_field "$dir" apns_key_id)"
    export PUSH_APNS_TEAM_ID="$(simulator_field "$dir" apns_team_id)"
    export PUSH_APNS_TOPIC="$(simulator_field "$dir" apns_topic)"
    export PUSH_APNS_ENDPOINT="$simulator_url" PUSH_APNS_SANDBOX_ENDPOINT="$simulator_url"
    export PUSH_FCM_SERVICE_ACCOUNT_FILE="$(simulator_field "$dir" fcm_service_account_file)"
    export PUSH_FCM_ENDPOINT="$simulator_url"
    export PUSH_CA_FILE="$(simulator_field "$dir" ca_file)"
}

# The string FIELD of the ready file DIR/ready.json (one JSON line of string fields; no python needed).
simulator_field() {
    sed -e "s/.*\"$2\":\"\([^\"]*\)\".*/\1/" "$1/ready.json"
}

stop_simulator() {
    [ -n "$simulator" ] || return 0
    kill "$simulator" 2> /dev/null || true
    wait "$simulator" 2> /dev/null || true
    simulator=""
}
