import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { linkProblems, linksOf, slug } from "../../helpers/markdown-links";

/**
 * The documentation's links resolve: every relative Markdown link in README.md, SECURITY.md and docs/*.md
 * names a file or folder of the repository, and every `#anchor` names a heading (GitHub's slug rule) or
 * an explicit `<a id>` of its target. No network: an external link is only checked for its form.
 * Also keeps the README a front page (size bound).
 */

const ROOT = resolve(__dirname, "../../../..");
/** The README is the front page; the reference lives in docs/. */
const README_MAX_BYTES = 25 * 1024;

/** A repository path's text ("" for a folder), undefined when it does not exist. */
function readRepo(path: string): string | undefined {
  const abs = join(ROOT, path);
  if (!existsSync(abs)) return undefined;
  return statSync(abs).isDirectory() ? "" : readFileSync(abs, "utf8");
}

const DOCS = [
  "README.md",
  "SECURITY.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

describe("documentation links", () => {
  it("every relative link and anchor in README.md, SECURITY.md and docs/*.md resolves", () => {
    const links = DOCS.flatMap((f) => linksOf(readRepo(f)!, f));
    assert.ok(links.length > 100, `found only ${links.length} links: is the parser broken?`);
    assert.deepEqual(linkProblems(links, readRepo), []);
  });

  it("the check catches a missing file, a missing anchor, a bad external link and skips code", () => {
    const md = [
      "# Title: the `one` [thing](x.md)",
      "## Title: the one thing",
      '<a id="pool"></a>',
      "[ok](#title-the-one-thing) [dup](#title-the-one-thing-1) [explicit](#pool)",
      "[gone](docs/nope.md) [bad anchor](README.md#no-such-heading) [web](https://example.com/a#b)",
      "[not web](ftp://example.com) [form](https://)",
      "`[in code](missing.md)`",
      "```",
      "[in a fence](missing.md)",
      "```",
      "![picture](docs/console-dashboard.png) [folder](docs)",
    ].join("\n");
    const files: Record<string, string> = { "docs/x.md": md };
    const read = (p: string) => files[p] ?? readRepo(p);
    const problems = linkProblems(linksOf(md, "docs/x.md"), read);
    assert.deepEqual(problems, [
      "docs/x.md:5: docs/nope.md: docs/docs/nope.md does not exist",
      "docs/x.md:5: README.md#no-such-heading: docs/README.md does not exist",
      "docs/x.md:6: ftp://example.com: not an http(s) link",
      "docs/x.md:6: https://: not a URL",
      "docs/x.md:11: docs/console-dashboard.png: docs/docs/console-dashboard.png does not exist",
      "docs/x.md:11: docs: docs/docs does not exist",
    ]);
    const fromRoot = linkProblems(linksOf(md, "x.md"), (p) => (p === "x.md" ? md : readRepo(p)));
    assert.deepEqual(
      fromRoot.filter((p) => p.includes("README.md#")),
      ['x.md:5: README.md#no-such-heading: no heading or anchor "no-such-heading" in README.md'],
    );
  });

  it("GitHub's slug rule", () => {
    assert.equal(slug("Every core: `DATA_PLANE_THREADS`"), "every-core-data_plane_threads");
    assert.equal(slug("Node.js version"), "nodejs-version");
    assert.equal(slug("Endpoints (data plane)"), "endpoints-data-plane");
    assert.equal(
      slug("Every process (`shared/src/config/env.ts` `commonEnvShape`)"),
      "every-process-sharedsrcconfigenvts-commonenvshape",
    );
    assert.equal(slug("eth_getLogs splitting"), "eth_getlogs-splitting");
    assert.equal(slug("A **bold** [link](x.md)"), "a-bold-link");
  });

  it(`README.md is a front page: under ${README_MAX_BYTES / 1024} KB`, () => {
    const bytes = Buffer.byteLength(readRepo("README.md")!, "utf8");
    assert.ok(bytes < README_MAX_BYTES, `README.md is ${bytes} bytes`);
  });

  it("every `npm run <script>` the docs name is a script of package.json", () => {
    const scripts = Object.keys(JSON.parse(readRepo("package.json")!).scripts as Record<string, string>);
    const missing: string[] = [];
    let named = 0;
    for (const f of DOCS) {
      for (const m of readRepo(f)!.matchAll(/npm\s+run\s+([a-z][a-z0-9:_-]*)/g)) {
        named++;
        if (!scripts.includes(m[1]!)) missing.push(`${f}: npm run ${m[1]}`);
      }
    }
    assert.ok(named >= 10, `found only ${named} npm run commands`);
    assert.deepEqual(missing, []);
  });

  it("every doc is reachable from the README or another doc", () => {
    const linked = new Set<string>();
    for (const f of DOCS) {
      for (const l of linksOf(readRepo(f)!, f)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(l.target)) continue;
        const p = l.target.split("#")[0]!;
        if (p !== "") linked.add(relative(ROOT, join(ROOT, dirname(f), decodeURIComponent(p))));
      }
    }
    assert.deepEqual(
      DOCS.filter((f) => f !== "README.md" && !linked.has(f)),
      [],
    );
  });
});
