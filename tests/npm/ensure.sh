# npm_ensure DIR PACKAGE: the version of PACKAGE that DIR/package.json pins
# is in DIR/node_modules (git-ignored), else npm ci installs it there from
# DIR/package-lock.json. Without node or npm the calling test fails: it is
# never skipped. Sourced by tests/openapi/t-openapi.sh and tests/web/lib.sh;
# the caller defines fail.
npm_ensure() {
    local dir=$1 pkg=$2 want have
    command -v node >/dev/null 2>&1 || fail "node not found: scripts/install-deps.sh installs nodejs and npm"
    want=$(sed -n "s|.*\"$pkg\": *\"\\([^\"]*\\)\".*|\\1|p" "$dir/package.json")
    # Not installed yet is no error (the callers may run under set -e -o pipefail).
    have=$(sed -n 's/^[[:space:]]*"version": *"\([^"]*\)".*/\1/p' "$dir/node_modules/$pkg/package.json" 2>/dev/null | head -1) || have=""
    if [ -z "$want" ] || [ "$have" != "$want" ]; then
        command -v npm >/dev/null 2>&1 || fail "npm not found: scripts/install-deps.sh installs it"
        echo "installing $pkg $want into $dir/node_modules (npm ci)"
        (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci in $dir failed: $pkg is not installed"
    fi
}
