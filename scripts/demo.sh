#!/usr/bin/env bash
# The README's first command: install, build, generate the example models, start `dais serve`
# on them, send a few example requests (JSON and binary), print the answers, stop.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
scripts/gen_examples.sh

LOG=$(mktemp /tmp/dais-demo.XXXXXX.log)
build/release/src/cmd/dais serve --model-repository examples/model_repository \
  --model-repository examples/feature_repository --http-port 0 --grpc-port 0 --memory \
  2>"$LOG" &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
PORT=""
for _ in $(seq 1 300); do
  PORT=$(sed -n 's/.*ports: http=\([0-9]*\).*/\1/p' "$LOG" | head -1)
  [[ -n "$PORT" ]] && curl -sf "localhost:$PORT/v2/health/ready" >/dev/null && break
  sleep 0.2
done
[[ -n "$PORT" ]] || { cat "$LOG"; echo "demo: server did not start"; exit 1; }
URL="localhost:$PORT"
show() { echo; echo "\$ $*"; "$@"; echo; }

echo "== dais serve is up on port $PORT (log: $LOG)"
show curl -s "$URL/v2"
show curl -s "$URL/v2/models/mlp_small"
show curl -s -X POST "$URL/v2/models/mlp_small/infer" -H 'Content-Type: application/json' -d \
  '{"id":"demo-1","inputs":[{"name":"INPUT__0","shape":[2,16],"datatype":"FP32","data":[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]]}]}'
show curl -s -X POST "$URL/v2/models/xgb_binary/infer" -d \
  '{"inputs":[{"name":"input__0","shape":[1,8],"datatype":"FP32","data":[0.5,-1.2,3.3,0.0,2.1,-0.7,1.0,0.25]}]}'
echo "== binary tensor data extension (what tritonclient uses by default):"
/usr/bin/python3 examples/binary_client.py "$URL"
GRPC_PORT=$(sed -n 's/.*ports: .* grpc=\([0-9]*\).*/\1/p' "$LOG" | head -1)
echo "== a short load test over gRPC (port $GRPC_PORT) with dais perf:"
build/release/src/cmd/dais perf -m mlp_small -i grpc -u "localhost:$GRPC_PORT" \
  --concurrency-range 1:8:x8 --measurement-interval-ms 500 --max-trials 3 --no-progress
echo "== the feature store (in process here; --redis HOST:PORT for Redis or a Redis Cluster):"
echo "   push two users' profiles (Feast's /push), read them back (Feast's /get-online-features),"
echo "   then infer with user ids only: dais fetches the features and fills INPUT__0"
NOW=$(date -u +%Y-%m-%dT%H:%M:%SZ)
show curl -s -X POST "$URL/push" -d '{"push_source_name":"user_profile","df":{"user_id":[7,8],"event_timestamp":["'"$NOW"'","'"$NOW"'"],"age":[31,52],"clicks_15d":[[0,1,0,2,0,0,3,1,0,0,1,0,4,0,1],null]}}'
show curl -s -X POST "$URL/get-online-features" -d '{"features":["user_profile:age","user_profile:clicks_15d"],"entities":{"user_id":[7,8,9]}}'
show curl -s -X POST "$URL/v2/models/mlp_features/infer" -d \
  '{"inputs":[{"name":"USER_ID","shape":[3],"datatype":"INT64","data":[7,8,9]}]}'
echo "== vector memory (docs/memory.md; durable with --redis): a collection, four items, the two"
echo "   nearest to a vector among those in stock under 50"
show curl -s -X POST "$URL/v2/memory/collections" -d '{"name":"items","dimension":3,"metric":"cosine","payload":{"category":"string","price":"number","in_stock":"bool"}}'
show curl -s -X POST "$URL/v2/memory/collections/items/upsert" -d '{"points":[{"id":"101","vector":[0.9,0.1,0],"payload":{"category":"shoes","price":40,"in_stock":true}},{"id":"102","vector":[0.8,0.3,0.1],"payload":{"category":"shoes","price":90,"in_stock":true}},{"id":"103","vector":[0.7,0.2,0.2],"payload":{"category":"bags","price":25,"in_stock":true}},{"id":"104","vector":[0,0.1,1],"payload":{"category":"hats","price":15,"in_stock":false}}]}'
show curl -s -X POST "$URL/v2/memory/collections/items/search" -d '{"vector":[1,0.2,0],"k":2,"filter":{"in_stock":true,"price":{"lt":50}}}'
show curl -s "$URL/healthz"
echo "== a few of the metrics:"
curl -s "$URL/metrics" | grep -E '^dais_(inference_request_success_total|batch_size_(sum|count)|feature_values_total)' | head -12
kill -TERM $PID
wait $PID && echo "== dais serve stopped cleanly (SIGTERM, exit 0)"
trap - EXIT
