/**
 * Throttle on failed JWT verifications (docs/contracts.md#jwt): a signature check is the one thing on the
 * request path a client can make expensive at will (a public-key operation per request: a new bad token
 * per request misses every cache). Counted per app and per client address (IPv6 per /64) in fixed windows of
 * `windowMs`; once either count reaches its maximum, tokens that would need a check are refused with 429
 * until the window ends, before any signature is checked. Tokens already verified (cached verdicts) are
 * never throttled, so an app's working clients keep working while someone floods it.
 *
 * A verification in flight counts as a failure until it succeeds, so a burst sent at once cannot start more
 * than the maximum before the first answers. Per process thread, like the verdict cache (no Redis round
 * trip before a check); memory is bounded by the addresses and apps that reached a check in one window.
 */
export interface JwtThrottleOptions {
  /** Length of one counting window (ms). */
  windowMs: number;
  /** Failed (or pending) verifications from one client address per window; then 429. */
  maxFailuresPerAddress: number;
  /** Failed (or pending) verifications for one app per window, all addresses together; then 429. */
  maxFailuresPerApp: number;
  now?: () => number;
}

/** What refused: the limit that was reached and how long until the window ends. */
export interface JwtThrottled {
  readonly retryAfterMs: number;
  readonly limit: number;
  readonly scope: "address" | "app";
}

/** A verification counted as a failure until `succeeded` takes it back (in the window it began in). */
export interface JwtAttempt {
  readonly window: number;
  readonly appId: string;
  readonly address: string;
}

export class JwtFailureThrottle {
  private readonly windowMs: number;
  private readonly maxPerAddress: number;
  private readonly maxPerApp: number;
  private readonly now: () => number;
  private window = -1;
  private byAddress = new Map<string, number>();
  private byApp = new Map<string, number>();
  private refusals = 0;

  constructor(opts: JwtThrottleOptions) {
    this.windowMs = opts.windowMs;
    this.maxPerAddress = opts.maxFailuresPerAddress;
    this.maxPerApp = opts.maxFailuresPerApp;
    this.now = opts.now ?? Date.now;
  }

  /**
   * The attempt, counted as a failure (call `succeeded` if the token verifies), or the refusal when the
   * address or the app has used its failures in this window.
   */
  begin(appId: string, address: string): JwtAttempt | JwtThrottled {
    const nowMs = this.now();
    const w = Math.floor(nowMs / this.windowMs);
    if (w > this.window) {
      this.window = w;
      this.byAddress = new Map();
      this.byApp = new Map();
    }
    const byAddress = this.byAddress.get(address) ?? 0;
    const byApp = this.byApp.get(appId) ?? 0;
    if (byAddress >= this.maxPerAddress || byApp >= this.maxPerApp) {
      this.refusals++;
      const retryAfterMs = Math.max(1, (this.window + 1) * this.windowMs - nowMs);
      return byAddress >= this.maxPerAddress
        ? { retryAfterMs, limit: this.maxPerAddress, scope: "address" }
        : { retryAfterMs, limit: this.maxPerApp, scope: "app" };
    }
    this.byAddress.set(address, byAddress + 1);
    this.byApp.set(appId, byApp + 1);
    return { window: this.window, appId, address };
  }

  /** The attempt verified: it was no failure. */
  succeeded(a: JwtAttempt): void {
    if (a.window !== this.window) return;
    const byAddress = this.byAddress.get(a.address);
    if (byAddress !== undefined && byAddress > 0) this.byAddress.set(a.address, byAddress - 1);
    const byApp = this.byApp.get(a.appId);
    if (byApp !== undefined && byApp > 0) this.byApp.set(a.appId, byApp - 1);
  }

  /** Checks refused by the throttle since start (for /metrics and tests). */
  get refused(): number {
    return this.refusals;
  }
}

export function isThrottled(r: JwtAttempt | JwtThrottled): r is JwtThrottled {
  return (r as JwtThrottled).retryAfterMs !== undefined;
}
