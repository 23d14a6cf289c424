// The check can fail: each defect below, put into a copy of the document,
// must be reported (with the words given), and the document itself must pass.
// Usage: node selftest.mjs DOC.json
import { readFileSync } from "node:fs";
import { check } from "./check.mjs";

const doc = JSON.parse(readFileSync(process.argv[2], "utf-8"));
const defects = [
    ["a query parameter without a schema", "schema", (d) => { delete d.paths["/v1/capacity"].get.parameters[0].schema; }],
    ["an undeclared path parameter", "{id} is not declared", (d) => { delete d.paths["/v1/runs/{id}"].parameters; }],
    ["a path parameter not in the path", "is not in the path", (d) => { d.paths["/v1/runs/{id}"].parameters.push({ name: "run", in: "path", required: true, schema: { type: "string" } }); }],
    ["a path parameter not required", "required", (d) => { d.paths["/v1/nodes/{host}"].parameters[0].required = false; }],
    ["a requestBody without content", "content", (d) => { delete d.paths["/v1/decisions"].post.requestBody.content; }],
    ["a $ref that does not resolve", "resolve", (d) => { d.paths["/v1/health"].get.responses["400"] = { $ref: "#/components/responses/Nope" }; }],
    ["an unknown security scheme", "not a securityScheme", (d) => { d.security = [{ basic: [] }]; }],
    ["a duplicate operationId", "operationId", (d) => { d.paths["/v1/runs"].get.operationId = d.paths["/v1/runs"].post.operationId; }],
    ["an error answer without a body", "error body", (d) => { d.paths["/v1/runs/{id}/cancel"].post.responses["409"] = { description: "final" }; }],
    ["the HTTP layer's 413 missing", "413", (d) => { delete d.paths["/v1/runs"].post.responses["413"]; }],
    ["a token route without 401", "401", (d) => { delete d.paths["/v1/heartbeats"].post.responses["401"]; }],
    ["openapi 2", "openapi", (d) => { d.openapi = "2.0"; }],
];
let failed = 0;
const own = await check(doc);
if (own.length) { console.error(`FAIL: ${process.argv[2]} itself: ${own.join("; ")}`); failed++; }
for (const [what, words, spoil] of defects) {
    const d = structuredClone(doc);
    spoil(d);
    const problems = await check(d);
    if (!problems.some((p) => p.includes(words))) {
        console.error(`FAIL: ${what} not reported (got: ${problems.join("; ") || "nothing"})`);
        failed++;
    }
}
if (failed) process.exit(1);
console.log(`selftest: ${defects.length} kinds of defect reported`);
