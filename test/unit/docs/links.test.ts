import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

/**
 * The documentation's links resolve: every relative Markdown link in README.md, SECURITY.md and docs/*.md
 * names a file or folder of the repository, and every `#anchor` names a heading (GitHub's slug rule) or
 * an explicit `<a id>` of its target. No network: an external link is only checked for its form.
 * Also keeps the README a front page (size bound).
 */

const ROOT = resolve(__dirname, "../../../..");
/** The README is the front page; the reference lives in docs/. */
const README_MAX_BYTES = 25 * 1024;

export interface Link {
  file: string;
  line: number;
  target: string;
}

/** The text outside fenced code blocks (and inline code spans unless kept), line numbers kept. */
function proseLines(md: string, keepInlineCode = false): string[] {
  let fence: string | undefined;
  return md.split("\n").map((line) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence !== undefined) {
      if (open && open[1]![0] === fence[0] && open[1]!.length >= fence.length) fence = undefined;
      return "";
    }
    if (open) {
      fence = open[1]!;
      return "";
    }
    return keepInlineCode ? line : line.replace(/(`+)(?:(?!\1).)+?\1/g, "");
  });
}

/** Every inline link and image target `[text](target)` / `![alt](target "title")` outside code. */
export function linksOf(md: string, file: string): Link[] {
  const out: Link[] = [];
  proseLines(md).forEach((line, i) => {
    for (const m of line.matchAll(/!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      out.push({ file, line: i + 1, target: m[1]! });
    }
  });
  return out;
}

/**
 * GitHub's anchor of a heading: the rendered text (links become their text, emphasis and code marks
 * and HTML tags go), lower case, everything but letters, digits, spaces, `-` and `_` dropped, spaces
 * to `-`.
 */
export function slug(heading: string): string {
  const text = heading
    .replace(/<[^>]+>/g, "")
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/(\*\*|__)(.+?)\1/g, "$2")
    .replace(/(^|\W)[*_](.+?)[*_](?=\W|$)/g, "$1$2")
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
}

/** The anchors of a Markdown file: its headings (duplicates get -1, -2...) and `<a id|name="...">`. */
export function anchorsOf(md: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(md, true)) {
    const h = /^ {0,3}#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (h) {
      const base = slug(h[1]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      out.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const a of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(a[1]!);
  }
  return out;
}

/** Problems with `links`, each as `file:line: target: why`; [] when every link resolves. */
export function linkProblems(links: readonly Link[], read: (path: string) => string | undefined): string[] {
  const problems: string[] = [];
  const anchors = new Map<string, Set<string>>();
  for (const { file, line, target } of links) {
    const at = `${file}:${line}: ${target}`;
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
      if (/^mailto:[^@\s]+@[^@\s]+$/.test(target)) continue;
      try {
        const u = new URL(target);
        if ((u.protocol !== "https:" && u.protocol !== "http:") || u.hostname === "") {
          problems.push(`${at}: not an http(s) link`);
        }
      } catch {
        problems.push(`${at}: not a URL`);
      }
      continue;
    }
    const hash = target.indexOf("#");
    const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
    const fragment = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
    const path = pathPart === "" ? file : join(dirname(file), pathPart);
    if (path.startsWith("..")) {
      problems.push(`${at}: leaves the repository`);
      continue;
    }
    const text = read(path);
    if (text === undefined) {
      problems.push(`${at}: ${path} does not exist`);
      continue;
    }
    if (fragment === undefined) continue;
    if (!path.endsWith(".md")) {
      problems.push(`${at}: an anchor into a file that is not Markdown`);
      continue;
    }
    let set = anchors.get(path);
    if (set === undefined) anchors.set(path, (set = anchorsOf(text)));
    if (!set.has(fragment)) problems.push(`${at}: no heading or anchor "${fragment}" in ${path}`);
  }
  return problems;
}

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
