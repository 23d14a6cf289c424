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
. "$here/../npm/ensure.sh"
npm_ensure "$here" @seriousme/openapi-schema-validator
node "$here/selftest.mjs" "$DOC" || fail "the check does not catch every kind of defect"
node "$here/check.mjs" "$DOC" || fail "$DOC is not valid OpenAPI 3 (the reasons above)"
echo "ok: $DOC is valid OpenAPI 3"
