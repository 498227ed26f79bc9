import { logAddressPrefix } from "../../../shared/src/net/address-bucket";
import type { GatewayContext } from "../pipeline/context";
import { PipelineRequest } from "../pipeline/request";
import { endByCategory } from "../telemetry/tracing";
import type { WsSession } from "./session";
import type { WsSessions } from "./sessions";

/**
 * One WebSocket text message in the pipeline: its answer is a message on the socket (nothing for a
 * notification or an answer without body), its request-log records carry HTTP status 0 and the session's
 * address, and its span ends by the answer's category.
 */
export class WsRequest extends PipelineRequest {
  /** A single call without id: whatever its outcome, nothing is sent back. */
  notification = false;

  constructor(
    ctx: GatewayContext,
    private readonly sessions: WsSessions,
    readonly session: WsSession,
    requestId: string,
    startedAt: number,
  ) {
    const node = session.pool === undefined;
    super(
      ctx,
      node ? "node" : "ws",
      requestId,
      session.usageNetwork,
      node ? "" : session.slug,
      startedAt,
      session.pool,
      session.policy ?? ctx.policy,
      session.key === undefined ? "public" : node ? "node" : "app",
    );
    this.key = session.key;
    this.ipBucket = session.key === undefined ? session.ipBucket : undefined;
  }

  /** Over WebSocket a request is answered whatever becomes of the socket meanwhile (sends are no-ops then). */
  protected get gone(): boolean {
    return false;
  }

  protected deliver(): void {
    const s = this.session;
    if (this.status !== 204 && this.body !== "" && !this.notification) this.sessions.send(s, this.body);
    if (this.hasLogRows) this.logged(0, s.ip === undefined ? null : logAddressPrefix(s.ip));
    const t = this.trace;
    if (t !== undefined) {
      this.trace = undefined;
      endByCategory(t, this.category);
    }
  }
}
