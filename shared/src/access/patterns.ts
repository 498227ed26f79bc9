/**
 * The pattern languages of an app's access rules, shared so the control plane validates exactly what the
 * data plane matches (docs/contracts.md#access-rules).
 *
 * Method entries: an exact method name (`eth_call`) or a whole namespace (`debug_*`). Compared trimmed and
 * lowercased: nodes differ in how strictly they match names, and a deny-list that a spelling (`ETH_CALL`)
 * could step around is no rule.
 *
 * User-Agent entries: globs where `*` stands for any run of characters (`MyWallet/*`, `*Chrome/*`),
 * matched against the whole header, case-insensitively.
 */

/** Longest method entry (names longer than this are not methods any node serves). */
export const METHOD_PATTERN_MAX = 128;
/** Longest User-Agent pattern. */
export const USER_AGENT_PATTERN_MAX = 200;

const EXACT_METHOD = /^[A-Za-z][A-Za-z0-9_]*$/;
const NAMESPACE = /^[A-Za-z][A-Za-z0-9]*_\*$/;

/** Whether `entry` is a valid method entry: an exact name or `namespace_*`. */
export function isMethodPattern(entry: string): boolean {
  return entry.length <= METHOD_PATTERN_MAX && (EXACT_METHOD.test(entry) || NAMESPACE.test(entry));
}

/** Whether `entry` is a valid User-Agent pattern: 1..200 printable ASCII characters, not only `*`s. */
export function isUserAgentPattern(entry: string): boolean {
  return (
    entry.length >= 1 &&
    entry.length <= USER_AGENT_PATTERN_MAX &&
    /^[\x20-\x7e]+$/.test(entry) &&
    entry.replace(/\*/g, "").trim() !== ""
  );
}

/** Bound of a matcher's per-name memo: names come from clients. */
const MEMO_MAX = 1024;

/** Matches method names against a list of entries (exact names and `namespace_*`). */
export class MethodMatcher {
  private readonly exact = new Set<string>();
  /** `namespace_` prefixes (lowercased). */
  private readonly prefixes: string[] = [];
  private readonly memo = new Map<string, boolean>();

  constructor(entries: readonly string[]) {
    for (const raw of entries) {
      const e = raw.trim().toLowerCase();
      if (e === "") continue;
      if (e.endsWith("_*")) this.prefixes.push(e.slice(0, -1));
      else this.exact.add(e);
    }
  }

  matches(method: string): boolean {
    const known = this.memo.get(method);
    if (known !== undefined) return known;
    const m = method.trim().toLowerCase();
    let hit = this.exact.has(m);
    if (!hit) for (const p of this.prefixes) if (m.startsWith(p)) hit = true;
    if (this.memo.size < MEMO_MAX) this.memo.set(method, hit);
    return hit;
  }
}

/**
 * Matches a User-Agent against glob patterns. Glob matching is the two-pointer algorithm (at most
 * length x pattern steps, no backtracking blow-up whatever the pattern), and results are memoised per
 * header value: clients send the same few user agents over and over.
 */
export class UserAgentMatcher {
  private readonly patterns: string[];
  private readonly memo = new Map<string, boolean>();

  constructor(entries: readonly string[]) {
    this.patterns = entries.map((e) => e.toLowerCase()).filter((e) => e !== "");
  }

  /** No patterns: every user agent passes. */
  get empty(): boolean {
    return this.patterns.length === 0;
  }

  matches(userAgent: string): boolean {
    if (this.patterns.length === 0) return true;
    const known = this.memo.get(userAgent);
    if (known !== undefined) return known;
    const ua = userAgent.toLowerCase();
    let hit = false;
    for (const p of this.patterns) {
      if (globMatch(p, ua)) {
        hit = true;
        break;
      }
    }
    if (this.memo.size < MEMO_MAX) this.memo.set(userAgent, hit);
    return hit;
  }
}

/** Whole-string glob match where `*` matches any run of characters (including none). */
export function globMatch(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let star = -1;
  let mark = 0;
  while (t < text.length) {
    if (p < pattern.length && pattern[p] !== "*" && pattern[p] === text[t]) {
      p++;
      t++;
    } else if (p < pattern.length && pattern[p] === "*") {
      star = p++;
      mark = t;
    } else if (star >= 0) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === "*") p++;
  return p === pattern.length;
}
