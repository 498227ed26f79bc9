/**
 * Markdown link checking for the docs tests: inline links outside code, GitHub's heading anchors, and
 * what is wrong with each link (test/unit/docs/links.test.ts).
 */
import { dirname, join } from "node:path";

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
    if (set === undefined) {
      set = anchorsOf(text);
      anchors.set(path, set);
    }
    if (!set.has(fragment)) problems.push(`${at}: no heading or anchor "${fragment}" in ${path}`);
  }
  return problems;
}
