#!/usr/bin/env bash
# compare.sh: the same inferd-bench workload against inferd and a peer
# server on the same machine, in one run, drawn into one HTML report side
# by side (docs/bench.md).
#
#   bench/compare.sh [--peer llama.cpp|URL] [--out DIR] -- INFERD-BENCH-ARGS...
#
# inferd is started from build/inferd with config/default.json on a free
# loopback port. The peer is either a URL already serving the same protocol
# (any OpenAI-compatible server, say), or "llama.cpp" (the default):
# llama-cpp-python's OpenAI-compatible server (python -m llama_cpp.server,
# from the bench venv bench/replicas installs) on the same GGUF file, with
# the same number of threads as inferd's replica, and --interrupt_requests
# False (its default True cuts a streamed answer short when the next
# request arrives; it has no parallel slots, so requests wait their turn
# instead). The two are measured one
# after the other, each idle while the other runs; the args are passed to
# both unchanged (--url, --label and --json are set here and win).
# Writes OUT/inferd.json, OUT/peer.json and OUT/compare.html (default OUT
# bench/results/compare).
#
# Example (generation, streamed, a concurrency sweep):
#   bench/compare.sh -- --endpoint openai-chat --stream --max-tokens 64 \
#       --sweep 1,4,16 --duration 20
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
peer=llama.cpp
out=$top/bench/results/compare
while [ $# -gt 0 ]; do
	case $1 in
	--peer) peer=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "compare.sh: unknown option $1 (options go before --)" >&2; exit 2 ;;
	esac
done
if [ $# -eq 0 ]; then
	sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
bin=${INFERD_BIN:-$top/build/inferd}
bench=${INFERD_BENCH_BIN:-$top/build/inferd-bench}
venv=${XDG_CACHE_HOME:-$HOME/.cache}/inferd/bench-venv
mkdir -p "$out"
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_http() { # URL SECONDS
	for _ in $(seq $(($2 * 20))); do
		curl -sf "$1" >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	echo "compare.sh: $1 did not come up in $2 s" >&2
	exit 1
}

port=$(free_port)
INFERD_GRPC_LISTEN= "$bin" --config "$top/config/default.json" --listen "127.0.0.1:$port" \
	2>"$out/inferd.log" &
pids+=($!)
wait_http "http://127.0.0.1:$port/v2/health/ready" 120
echo "compare.sh: inferd on port $port" >&2
"$bench" "$@" --url "http://127.0.0.1:$port" --label inferd --json "$out/inferd.json"
kill "${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
pids=()

if [ "$peer" = llama.cpp ]; then
	py=$venv/bin/python3
	if ! "$py" -c 'import llama_cpp.server' 2>/dev/null; then
		echo "compare.sh: no llama-cpp-python server in $venv: run bench/replicas --only generation once (it installs it)" >&2
		exit 1
	fi
	# config/default.json's generation replica uses every CPU this process may
	threads=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
	lport=$(free_port)
	(cd "$top" && exec "$py" -m llama_cpp.server --model models/gemma-3-270m-q4_k_m.gguf \
		--model_alias gemma-3-270m --n_threads "$threads" --n_threads_batch "$threads" \
		--n_ctx 8192 --logits_all False --verbose False --interrupt_requests False \
		--host 127.0.0.1 --port "$lport") \
		2>"$out/peer.log" &
	pids+=($!)
	wait_http "http://127.0.0.1:$lport/v1/models" 120
	peer_url=http://127.0.0.1:$lport
	label=llama.cpp
else
	peer_url=$peer
	label=peer
fi
echo "compare.sh: peer $label at $peer_url" >&2
"$bench" "$@" --url "$peer_url" --label "$label" --json "$out/peer.json"
"$bench" report --html "$out/compare.html" "$out/inferd.json" "$out/peer.json"
echo "compare.sh: report $out/compare.html" >&2
