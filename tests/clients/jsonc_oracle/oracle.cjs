// The oracle of tests/test_jsonc_oracle.py: Microsoft's jsonc-parser (VS Code's JSONC
// reader) on a batch of documents. Reads a JSON array of strings on stdin; writes a JSON
// array with, for each document, what parseTree reports: its errors (code and offset),
// its value, and where the root's "servers" member and each of its members are (UTF-16
// offsets, as JavaScript counts). One process per batch.
"use strict";
const { parseTree, getNodeValue, printParseErrorCode } = require("jsonc-parser");

const options = { allowTrailingComma: true, disallowComments: false, allowEmptyContent: false };

function describe(text) {
  const errors = [];
  const root = parseTree(text, errors, options);
  const report = {
    errors: errors.map((e) => ({ error: printParseErrorCode(e.error), offset: e.offset, length: e.length })),
    value: null,
    servers: null,
  };
  if (errors.length || root === undefined) return report;
  report.value = getNodeValue(root);
  if (root.type !== "object") return report;
  let servers = null;
  for (const property of root.children || []) {
    if (property.children[0].value === "servers") servers = property; // the last one wins
  }
  if (servers && servers.children[1]) {
    const value = servers.children[1];
    report.servers = {
      key: servers.children[0].offset,
      start: value.offset,
      end: value.offset + value.length,
      members:
        value.type === "object"
          ? value.children.map((p) => [p.children[0].value, p.children[0].offset, p.children[1].offset, p.children[1].offset + p.children[1].length])
          : null,
    };
  }
  return report;
}

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const documents = JSON.parse(input);
  process.stdout.write(JSON.stringify(documents.map(describe)));
});
