# Sourced: the environment that builds and tests pvllm-server offline, in
# GOPATH mode over Debian's Go sources (see scripts/build_server.sh).
#   server_gopath WORK INCLUDE_DIR LIB_DIR
# makes WORK/gopath (the checkout's bindings/go as pvllm.dev/pvllm),
# WORK/pkgconfig/pvllm.pc, exports the go variables, and sets $server_dir,
# the package's folder inside that GOPATH (the place to run go in).
server_gopath() {
  local work="$1" include_dir="$2" lib_dir="$3"
  local root gocode
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  gocode="${PVLLM_GOCODE:-/usr/share/gocode}"
  command -v go >/dev/null || { echo "pvllm-server: no go (install golang-go)" >&2; return 1; }
  [ -d "$gocode/src/github.com/prometheus/client_golang/prometheus" ] || {
    echo "pvllm-server: no client_golang under $gocode (install" \
         "golang-github-prometheus-client-golang-dev)" >&2
    return 1
  }
  mkdir -p "$work/gopath/src/pvllm.dev" "$work/pkgconfig"
  ln -sfn "$root/bindings/go" "$work/gopath/src/pvllm.dev/pvllm"
  cat >"$work/pkgconfig/pvllm.pc" <<PC
Name: pvllm
Description: pvllm for building pvllm-server
Version: 0
Cflags: -I$include_dir
Libs: -L$lib_dir -lpvllm
PC
  export GO111MODULE=off GOPATH="$work/gopath:$gocode" GOCACHE="$work/cache" GOFLAGS=
  export GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=1 GOENV=off
  export PKG_CONFIG_PATH="$work/pkgconfig"
  server_dir="$work/gopath/src/pvllm.dev/pvllm/cmd/pvllm-server"
}
