// Checks an OpenAPI 3 document: against the OpenAPI JSON Schema with
// @seriousme/openapi-schema-validator, then what a schema cannot say (the
// rules openapi-spec-validator also checks): every {name} of a path is a
// declared, required path parameter and every declared path parameter is in
// the path; every local $ref resolves; operationIds are unique; security
// names a declared scheme; every error answer has the error body. Then this
// project's own rules: every operation lists the HTTP layer's statuses, and
// every one that takes a token its 401 and 429.
// Usage: node check.mjs DOC.json   (exit 0: valid; 1: not, with the reasons)
import { readFileSync } from "node:fs";
import { Validator } from "@seriousme/openapi-schema-validator";

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

export async function check(doc) {
    const problems = [];
    const res = await new Validator().validate(structuredClone(doc));
    if (!res.valid) {
        for (const e of [].concat(res.errors ?? [])) problems.push(`schema: ${e.instancePath ?? ""} ${e.message ?? JSON.stringify(e)}`);
        return problems;   // the rest assumes the document's shape
    }
    if (!/^3\.[01]\./.test(doc.openapi)) problems.push(`openapi: ${doc.openapi} is not 3.0 or 3.1`);

    const resolve = (ref, where) => {
        if (!ref.startsWith("#/")) { problems.push(`${where}: $ref ${ref} is not local`); return undefined; }
        let v = doc;
        for (const part of ref.slice(2).split("/").map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))) {
            v = v && typeof v === "object" ? v[part] : undefined;
        }
        if (v === undefined) problems.push(`${where}: $ref ${ref} does not resolve`);
        return v;
    };
    const walk = (v, where) => {
        if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${where}/${i}`));
        else if (v && typeof v === "object")
            for (const [k, x] of Object.entries(v)) {
                if (k === "$ref" && typeof x === "string") resolve(x, where);
                else walk(x, `${where}/${k}`);
            }
    };
    walk(doc, "#");
    const deref = (v, where) => (v && v.$ref ? resolve(v.$ref, where) ?? {} : v);

    const schemes = Object.keys(doc.components?.securitySchemes ?? {});
    const checkSecurity = (sec, where) => {
        for (const req of sec ?? []) for (const name of Object.keys(req))
            if (!schemes.includes(name)) problems.push(`${where}: security names ${name}, not a securityScheme`);
    };
    checkSecurity(doc.security, "security");

    const ids = new Map();
    for (const [path, item] of Object.entries(doc.paths ?? {})) {
        const inPath = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
        if (new Set(inPath).size !== inPath.length) problems.push(`${path}: a path parameter named twice`);
        const pathParams = (item.parameters ?? []).map((p) => deref(p, path));
        for (const method of METHODS.filter((m) => item[m])) {
            const op = item[method], where = `${method.toUpperCase()} ${path}`;
            if (op.operationId) {
                if (ids.has(op.operationId)) problems.push(`${where}: operationId ${op.operationId} also on ${ids.get(op.operationId)}`);
                ids.set(op.operationId, where);
            }
            checkSecurity(op.security, where);
            // Operation parameters override the path's of the same name and place.
            const params = new Map();
            for (const [list, whose] of [[pathParams, path], [(op.parameters ?? []).map((p) => deref(p, where)), where]]) {
                const seen = new Set();
                for (const p of list) {
                    const key = `${p.in}:${p.name}`;
                    if (seen.has(key)) problems.push(`${whose}: parameter ${key} declared twice`);
                    seen.add(key);
                    params.set(key, p);
                }
            }
            for (const name of inPath) {
                const p = params.get(`path:${name}`);
                if (!p) problems.push(`${where}: path parameter {${name}} is not declared`);
                else if (p.required !== true) problems.push(`${where}: path parameter {${name}} is not required: true`);
            }
            for (const p of params.values()) {
                if (p.in === "path" && !inPath.includes(p.name)) problems.push(`${where}: path parameter ${p.name} is not in the path`);
                if (!p.schema && !p.content) problems.push(`${where}: parameter ${p.name} has no schema`);
            }
            const body = deref(op.requestBody, where);
            if (body && !Object.keys(body.content ?? {}).length) problems.push(`${where}: requestBody without content`);

            const responses = op.responses ?? {};
            const statuses = Object.keys(responses);
            if (!statuses.some((s) => /^2/.test(s))) problems.push(`${where}: no 2xx answer`);
            for (const s of statuses.filter((s) => /^[45]/.test(s))) {
                const r = deref(responses[s], `${where} ${s}`);
                if (!r.content?.["application/json"]?.schema) problems.push(`${where}: ${s} has no application/json error body`);
            }
            // The HTTP layer answers these for any request (http_server.cpp).
            for (const s of ["400", "413", "431", "501"])
                if (!responses[s]) problems.push(`${where}: ${s} (answered by the HTTP layer) is not listed`);
            const secured = (op.security ?? doc.security ?? []).length > 0;
            for (const s of ["401", "429"])
                if (secured && !responses[s]) problems.push(`${where}: ${s} (a route that takes a token) is not listed`);
            if (!secured && responses["401"]) problems.push(`${where}: takes no token, yet lists 401`);
        }
    }
    return problems;
}

// Run as a program (not when imported by the self-test).
if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split("/").pop())) {
    const file = process.argv[2];
    if (!file) { console.error("usage: node check.mjs DOC.json"); process.exit(2); }
    let doc;
    try { doc = JSON.parse(readFileSync(file, "utf-8")); } catch (e) { console.error(`${file}: ${e.message}`); process.exit(1); }
    const problems = await check(doc);
    for (const p of problems) console.error(`${file}: ${p}`);
    if (problems.length) process.exit(1);
    console.log(`${file}: valid OpenAPI ${doc.openapi}, ${Object.keys(doc.paths).length} paths`);
}
