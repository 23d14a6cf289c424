#!/bin/sh
# doc/broker-openapi.json is valid OpenAPI 3 (check.mjs: the OpenAPI JSON
# Schema through @seriousme/openapi-schema-validator, then path parameters,
# $refs, security, operationIds, error bodies and the statuses every route
# answers), and the check catches each kind of defect (selftest.mjs).
# The validator is installed here from package-lock.json (npm ci into
# tests/openapi/node_modules, git-ignored) when it is missing or another
# version; without node or npm this test fails, it is never skipped.
# Run by `make check` with DOC set.
set -u
DOC=${DOC:?}
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
command -v node >/dev/null 2>&1 || fail "node not found: scripts/install-deps.sh installs nodejs and npm"
want=$(sed -n 's/.*"@seriousme\/openapi-schema-validator": *"\([^"]*\)".*/\1/p' "$here/package.json")
have=$(sed -n 's/^[[:space:]]*"version": *"\([^"]*\)".*/\1/p' "$here/node_modules/@seriousme/openapi-schema-validator/package.json" 2>/dev/null | head -1)
if [ -z "$want" ] || [ "$have" != "$want" ]; then
    command -v npm >/dev/null 2>&1 || fail "npm not found: scripts/install-deps.sh installs it"
    echo "installing @seriousme/openapi-schema-validator $want into $here/node_modules (npm ci)"
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci in $here failed: the validator is not installed"
fi
node "$here/selftest.mjs" "$DOC" || fail "the check does not catch every kind of defect"
node "$here/check.mjs" "$DOC" || fail "$DOC is not valid OpenAPI 3 (the reasons above)"
echo "ok: $DOC is valid OpenAPI 3"
