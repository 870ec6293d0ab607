#!/usr/bin/env bash
# Installs everything the build, the tests, the demo and the benchmarks need (Debian 12, as root).
set -euo pipefail
PACKAGES=(
  # build
  cmake ninja-build g++ ccache pkg-config git curl ca-certificates
  dpkg-dev  # dpkg-shlibdeps: the Depends of the .deb CPack builds (cmake/packaging.cmake)
  openssl  # scripts/make_certs.sh: the test certificates (docs/tls.md)
  libsimdjson-dev  # the JSON inference request parser (src/frontends/http/json_view.h)
  libboost-dev rapidjson-dev libprotobuf-dev protobuf-compiler libfmt-dev libcli11-dev
  libgrpc++-dev protobuf-compiler-grpc libnghttp2-dev libyaml-cpp-dev libssl-dev
  libpq-dev        # `dais txn`: the PostgreSQL client
  node-llhttp      # llhttp's C sources: the gateway's HTTP/1.1 request parser (src/gateway)
  libjemalloc-dev  # the allocator of the dais executable (CMakeLists.txt DAIS_JEMALLOC)
  zlib1g-dev       # gzip-compressed offline feature files
  # feature store: tests start real Redis servers and Redis Clusters on loopback
  redis-server redis-tools
  # cluster mode: etcd (tests start their own), and etcd's .proto files for the C++ client stubs
  etcd-server etcd-client golang-etcd-server-dev
  # model runtimes
  libtorch-dev libxgboost-dev
  # the BLAS under LibTorch: Debian's default libblas3 is the reference one, 2-18x slower on
  # matrix products; the serial OpenBLAS is not safe across instance threads (docs/backends.md)
  libopenblas0-pthread
  # tests, fuzzing, formatting, benchmarks
  # vector memory: the HNSW index (header-only); faiss for the bench's exact ground truth and
  # the library comparison (docs/memory.md "Why hnswlib")
  libhnswlib-dev libfaiss-dev
  libgtest-dev libgmock-dev libbenchmark-dev clang clang-format libclang-rt-14-dev wrk
  gnuplot-nox  # bench/scheduler_bench.py plots
  prometheus  # promtool: tests/integration/test_alert_rules.py
  postgresql  # `dais txn` tests: participants and the decision log (initdb as the postgres user)
  # Python for model generation and integration tests (run with /usr/bin/python3)
  python3 python3-torch python3-xgboost python3-numpy python3-requests python3-pytest
  python3-grpcio python3-protobuf python3-yaml python3-h2 python3-jwt python3-cryptography
  python3-psycopg2  # the `dais txn` tests read the participants
  python3-sklearn  # scripts/fed_demo.py: the digits dataset (nothing downloaded)
  nginx-light
  # `dais console`: its tests drive the page in a real headless browser (docs/console.md)
  chromium chromium-driver python3-selenium
  # baselines for bench/ (FastAPI and Flask servers; h2o, the gateway bench's second proxy)
  python3-fastapi python3-uvicorn python3-flask h2o
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${#missing[@]} package(s): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} packages already installed"
fi
