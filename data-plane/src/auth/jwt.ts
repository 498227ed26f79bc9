import { hash as oneShotHash } from "node:crypto";
import { decodeProtectedHeader, type JWK, jwtVerify } from "jose";
import { Counter, type Registry } from "prom-client";
import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { JwtRecord } from "../../../shared/src/redis/records";
import { InFlightMap } from "../memory/in-flight-map";
import { isThrottled, type JwtFailureThrottle } from "./jwt-throttle";
import { TtlLru } from "./ttl-lru";

/**
 * App JWTs (docs/contracts.md#jwt): an app that requires them gets every request checked for
 * `Authorization: Bearer <jwt>` (WebSocket upgrades also `?jwt=`) signed by one of its registered public
 * keys (RS256 / ES256), with `exp` required and checked strictly, `nbf` with `JWT_NBF_LEEWAY_S` of leeway,
 * and `aud` / `sub` when the app sets them. Verification is jose's `jwtVerify`.
 *
 * Verified tokens are cached until their `exp` in a bounded LRU keyed by app and the token's SHA-256, so a
 * client reusing its token costs no signature check. A cached verdict is only served under the same
 * compiled JWT settings it was made with: a key record re-published with other keys or claims (its
 * CompiledJwt is another object) re-verifies. Refusals that time cannot cure (bad signature, wrong
 * audience, expired...) are cached for NEGATIVE_TTL_MS, so a client retrying a bad token does not cost a
 * signature check per request either.
 *
 * Hashing a token of several hundred characters was about half of a cached check (bench/jwt.ts; figures
 * in docs/benchmarks.md). So, as the key
 * cache does with API keys, the most recently seen tokens are also found by the token text itself in
 * `front` (at most FRONT_MAX, first in first out, each entry's app, settings and expiry checked on every
 * read): a heap dump of a data plane shows recently used tokens, where the hash-keyed cache alone holds
 * only their SHA-256.
 */

/** How long a refused token's verdict is kept (not `nbf`: that one cures itself). */
export const NEGATIVE_TTL_MS = 60_000;
/** Tokens remembered by their text in front of the hash-keyed cache (never more than its size). */
const FRONT_MAX = 4_096;

/** Longest token looked at; anything longer is malformed (and never hashed or parsed). */
export const MAX_TOKEN_CHARS = 8192;

const ACCEPTED_ALGS = new Set(["RS256", "ES256"]);

/**
 * RSA moduli accepted (bits). Below 2048 is forgeable in practice; above 4096 each verification costs
 * more CPU than a request is worth (it grows with the square of the size), and a client chooses how
 * often it runs.
 */
export const RSA_MIN_BITS = 2048;
export const RSA_MAX_BITS = 4096;
/** The only public exponent accepted (65537, base64url "AQAB"); e = 3 and other odd choices are refused. */
export const RSA_EXPONENT_B64 = "AQAB";

/**
 * Whether a published key may be used: RSA 2048..4096 bits with e = 65537 for RS256, EC P-256 for ES256.
 * The control plane refuses anything else when the key is added (access/access.validation.ts); a key in
 * Redis that does not pass (written by hand, or by an older control plane) is ignored, as if absent.
 */
export function jwkAcceptable(alg: string, jwk: JWK): boolean {
  if (alg === "ES256") return jwk.kty === "EC" && jwk.crv === "P-256";
  if (alg !== "RS256" || jwk.kty !== "RSA" || jwk.e !== RSA_EXPONENT_B64 || typeof jwk.n !== "string") {
    return false;
  }
  const n = Buffer.from(jwk.n, "base64url");
  let i = 0;
  while (i < n.length && n[i] === 0) i++;
  if (i === n.length) return false;
  const bits = (n.length - i - 1) * 8 + (32 - Math.clz32(n[i]!));
  return bits >= RSA_MIN_BITS && bits <= RSA_MAX_BITS;
}

interface JwtKey {
  readonly kid: string;
  readonly alg: "RS256" | "ES256";
  readonly jwk: JWK;
}

/** An app's JWT settings, compiled once per key record (see compact.ts: shared by equal records). */
export class CompiledJwt {
  readonly keys: readonly JwtKey[];
  private readonly byKid = new Map<string, JwtKey>();
  readonly audience: string | undefined;
  readonly subject: string | undefined;

  constructor(r: JwtRecord) {
    this.keys = r.keys
      .filter((k) => jwkAcceptable(k.alg, k.jwk as JWK))
      .map((k) => Object.freeze({ kid: k.kid, alg: k.alg, jwk: { ...k.jwk } as JWK }));
    for (const k of this.keys) this.byKid.set(k.kid, k);
    this.audience = r.audience ?? undefined;
    this.subject = r.subject ?? undefined;
  }

  key(kid: string): JwtKey | undefined {
    return this.byKid.get(kid);
  }
}

export type JwtCheck = JwtAccepted | JwtRefused;

export interface JwtAccepted {
  readonly ok: true;
  /** The token's `exp` (epoch ms): a WebSocket session opened with it closes then. */
  readonly expiresAtMs: number;
}

export interface JwtRefused {
  readonly ok: false;
  readonly row: ErrorRow;
  /** Says what exactly (sent as the error's message); undefined = the row's. */
  readonly message: string | undefined;
  /** `JwtThrottled` only: ms until the throttle's window ends (`Retry-After`), and the limit reached. */
  readonly retryAfterMs?: number;
  readonly limit?: number;
}

/** One cached verdict. Every field set in the constructor: one hidden class for all entries. */
class Verdict {
  /** When the LRU last moved it to the most recent end (epoch ms; see TtlLru's `bumped`). */
  bumpedAtMs = 0;

  constructor(
    readonly appId: string,
    readonly config: CompiledJwt,
    /** Until when it is served (epoch ms): the token's exp, or now + NEGATIVE_TTL_MS for a refusal. */
    readonly untilMs: number,
    readonly result: JwtCheck,
  ) {}
}

const MISSING: JwtRefused = Object.freeze({ ok: false, row: GatewayError.JwtMissing, message: undefined });

function refused(row: ErrorRow, message?: string): JwtRefused {
  return { ok: false, row, message: message === undefined ? undefined : `${row.message}: ${message}` };
}

export interface JwtVerifierOptions {
  /** Cached verdicts (each about 200 bytes besides its key string). */
  maxEntries: number;
  /** Leeway for `nbf` (seconds); `exp` gets none. */
  nbfLeewaySeconds: number;
  /** Failed verifications per app and per client address (none: not throttled). */
  throttle?: JwtFailureThrottle;
  /** The clock (epoch ms): a fake one in tests, where expiry is the subject. */
  nowMs?: () => number;
}

/** Verifications by outcome (`ok` or the refusal's reason) and cache hits, for /metrics and tests. */
export interface JwtStats {
  readonly verifications: ReadonlyMap<string, number>;
  readonly cacheHits: number;
}

export class JwtVerifier {
  private readonly cache: TtlLru<Verdict>;
  /** Token text -> a verdict of `cache` (or one it evicted, still checked for expiry on every read). */
  private readonly front = new Map<string, Verdict>();
  private readonly frontMax: number;
  private readonly pending = new InFlightMap<string, Promise<JwtCheck>>();
  private readonly leewayS: number;
  private readonly throttle: JwtFailureThrottle | undefined;
  private readonly now: () => number;
  private readonly counts = new Map<string, number>();
  private hits = 0;

  constructor(opts: JwtVerifierOptions) {
    this.cache = new TtlLru(opts.maxEntries, (v) => v.untilMs, {
      at: (v) => v.bumpedAtMs,
      set: (v, nowMs) => {
        v.bumpedAtMs = nowMs;
      },
    });
    this.frontMax = Math.min(FRONT_MAX, opts.maxEntries);
    this.leewayS = opts.nbfLeewaySeconds;
    this.throttle = opts.throttle;
    this.now = opts.nowMs ?? Date.now;
  }

  /**
   * Checks `token` (the bearer token, "" when the request carries none) for app `appId` under `config`.
   * Synchronous on a cached verdict; a promise when the signature has to be verified. Never rejects.
   * `address` is the client's address bucket (`ipBucket`): a token that needs a check is refused
   * (`JwtThrottled`) while the address or the app has used its failed verifications (jwt-throttle.ts).
   */
  check(
    config: CompiledJwt,
    appId: string,
    token: string,
    address = "unknown",
  ): JwtCheck | Promise<JwtCheck> {
    if (token === "") return MISSING;
    if (token.length > MAX_TOKEN_CHARS) return refused(GatewayError.JwtMalformed, "token too long");
    const nowMs = this.now();
    const known = this.front.get(token);
    if (known !== undefined) {
      if (known.untilMs > nowMs && known.config === config && known.appId === appId) {
        this.hits++;
        return known.result;
      }
      if (known.untilMs <= nowMs) this.front.delete(token);
    }
    const id = `${appId}\u0000${oneShotHash("sha256", token, "base64")}`;
    const cached = this.cache.get(id, nowMs);
    if (cached !== undefined && cached.config === config) {
      this.hits++;
      this.remember(token, cached);
      return cached.result;
    }
    let p = this.pending.get(id);
    if (p === undefined) {
      // Joining a check in flight costs nothing; a new one is throttled first.
      const attempt = this.throttle?.begin(appId, address);
      if (attempt !== undefined && isThrottled(attempt)) {
        this.count(GatewayError.JwtThrottled.reason);
        return {
          ok: false,
          row: GatewayError.JwtThrottled,
          message: `${GatewayError.JwtThrottled.message} (${attempt.limit} per ${attempt.scope === "app" ? "app" : "client address"})`,
          retryAfterMs: attempt.retryAfterMs,
          limit: attempt.limit,
        };
      }
      const run = this.verify(config, token)
        .catch((): JwtCheck => refused(GatewayError.JwtMalformed))
        .then((r) => {
          if (this.pending.get(id) === run) this.pending.delete(id);
          if (r.ok && attempt !== undefined) this.throttle!.succeeded(attempt);
          this.count(r.ok ? "ok" : r.row.reason);
          const until = r.ok
            ? r.expiresAtMs
            : r.row === GatewayError.JwtNotYetValid
              ? 0
              : nowMs + NEGATIVE_TTL_MS;
          if (until > this.now()) {
            const v = new Verdict(appId, config, until, r);
            this.cache.set(id, v);
            this.remember(token, v);
          }
          return r;
        });
      this.pending.set(id, run);
      p = run;
    }
    return p;
  }

  stats(): JwtStats {
    return { verifications: new Map(this.counts), cacheHits: this.hits };
  }

  /** Cached verdicts (tests and diagnostics). */
  get size(): number {
    return this.cache.size;
  }

  clear(): void {
    this.cache.clear();
    this.front.clear();
    this.pending.clear();
  }

  private remember(token: string, v: Verdict): void {
    if (this.front.size >= this.frontMax) {
      const oldest = this.front.keys().next();
      if (!oldest.done) this.front.delete(oldest.value);
    }
    this.front.set(token, v);
  }

  private count(outcome: string): void {
    this.counts.set(outcome, (this.counts.get(outcome) ?? 0) + 1);
  }

  private async verify(config: CompiledJwt, token: string): Promise<JwtCheck> {
    let alg: string | undefined;
    let kid: string | undefined;
    try {
      const header = decodeProtectedHeader(token);
      alg = header.alg;
      kid = header.kid;
    } catch {
      return refused(GatewayError.JwtMalformed, "not a signed JWT (header.payload.signature)");
    }
    if (alg === undefined || !ACCEPTED_ALGS.has(alg)) {
      return refused(GatewayError.JwtMalformed, `algorithm ${alg ?? "(none)"} not accepted (RS256, ES256)`);
    }
    let candidates: readonly JwtKey[];
    if (kid !== undefined) {
      const k = config.key(kid);
      if (k === undefined)
        return refused(GatewayError.JwtUnknownKey, `no key with kid ${JSON.stringify(kid)}`);
      if (k.alg !== alg) {
        return refused(
          GatewayError.JwtBadSignature,
          `key ${JSON.stringify(kid)} is ${k.alg}, the token ${alg}`,
        );
      }
      candidates = [k];
    } else {
      // Without a kid only a single-key app is checked: trying every key would multiply the cost of each
      // bad token by the number of keys.
      if (config.keys.length > 1) {
        return refused(
          GatewayError.JwtMalformed,
          `kid required: the app has ${config.keys.length} keys; put the key's kid in the token's header`,
        );
      }
      candidates = config.keys.filter((k) => k.alg === alg);
      if (candidates.length === 0) return refused(GatewayError.JwtBadSignature, `no registered ${alg} key`);
    }
    for (const k of candidates) {
      const r = await this.verifyWith(config, k, alg, token);
      if (r !== "bad_signature") return r;
    }
    return refused(
      GatewayError.JwtBadSignature,
      kid === undefined ? "no registered key verifies it" : `does not verify with key ${JSON.stringify(kid)}`,
    );
  }

  private async verifyWith(
    config: CompiledJwt,
    k: JwtKey,
    alg: string,
    token: string,
  ): Promise<JwtCheck | "bad_signature"> {
    let exp: unknown;
    try {
      const { payload } = await jwtVerify(token, k.jwk, {
        algorithms: [alg],
        audience: config.audience,
        subject: config.subject,
        requiredClaims: ["exp"],
        // jose applies its tolerance to exp too; exp is checked strictly below.
        clockTolerance: this.leewayS,
        currentDate: new Date(this.now()),
      });
      exp = payload.exp;
    } catch (err) {
      return mapJoseError(err);
    }
    const expiresAtMs = (exp as number) * 1000;
    if (!(expiresAtMs > this.now())) return refused(GatewayError.JwtExpired, `exp ${exp}`);
    return { ok: true, expiresAtMs };
  }
}

/** jose's error (code, claim) as the refusal the client gets. */
function mapJoseError(err: unknown): JwtRefused | "bad_signature" {
  const e = err as { code?: string; claim?: string; reason?: string; message?: string };
  switch (e.code) {
    case "ERR_JWS_SIGNATURE_VERIFICATION_FAILED":
      return "bad_signature";
    case "ERR_JWT_EXPIRED":
      return refused(GatewayError.JwtExpired);
    case "ERR_JWT_CLAIM_VALIDATION_FAILED":
      if (e.reason === "missing") return refused(GatewayError.JwtMalformed, `no ${e.claim} claim`);
      if (e.claim === "aud") return refused(GatewayError.JwtWrongAudience);
      if (e.claim === "sub") return refused(GatewayError.JwtWrongSubject);
      if (e.claim === "nbf") return refused(GatewayError.JwtNotYetValid);
      return refused(GatewayError.JwtMalformed, `${e.claim} claim invalid`);
    default:
      // JWSInvalid, JWTInvalid (claims not JSON, exp not a number), a key jose cannot use.
      return refused(GatewayError.JwtMalformed, e.message ?? "invalid");
  }
}

/** The token of an `Authorization: Bearer <jwt>` header value ("" when absent or another scheme). */
export function bearerToken(authorization: string): string {
  if (authorization.length < 8) return "";
  const scheme = authorization.slice(0, 7);
  if (scheme !== "Bearer " && scheme.toLowerCase() !== "bearer ") return "";
  return authorization.slice(7).trim();
}

/**
 * `rpcgw_jwt_verifications_total{result}` (signature checks, by `ok` or the refusal's reason) and
 * `rpcgw_jwt_cache_hits_total` (verdicts served from the cache), read at scrape time.
 */
export function registerJwtMetrics(registry: Registry, verifier: JwtVerifier): void {
  const registers = [registry];
  new Counter({
    name: "rpcgw_jwt_verifications_total",
    help: "App JWTs verified (signature and claims checked, not served from the cache), by result: ok or the refusal's reason",
    labelNames: ["result"],
    registers,
    collect() {
      this.reset();
      for (const [result, n] of verifier.stats().verifications) this.inc({ result }, n);
    },
  });
  new Counter({
    name: "rpcgw_jwt_cache_hits_total",
    help: "App JWT checks answered from the verdict cache (no signature check)",
    registers,
    collect() {
      this.reset();
      this.inc(verifier.stats().cacheHits);
    },
  });
}
