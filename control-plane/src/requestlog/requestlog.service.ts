import type { DataSource } from "typeorm";
import type { RequestContext } from "../auth/context";
import { badInput, notFound } from "../common/errors";
import { Permission } from "../workspaces/roles";
import type { WorkspaceService } from "../workspaces/workspace.service";
import type { RequestLogConnection, RequestLogEntry, RequestLogFilter } from "./requestlog.types";

export const REQUEST_LOG_DEFAULT_PAGE = 50;
export const REQUEST_LOG_MAX_PAGE = 500;

/** Position after which the next page starts: the last row's sort key (time in epoch µs, id, item). */
interface Cursor {
  us: string;
  id: string;
  item: number;
}

function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.us, c.id, c.item])).toString("base64url");
}

function decodeCursor(text: string): Cursor {
  try {
    const v = JSON.parse(Buffer.from(text, "base64url").toString("utf8")) as unknown;
    if (
      Array.isArray(v) &&
      typeof v[0] === "string" &&
      /^\d{1,20}$/.test(v[0]) &&
      typeof v[1] === "string" &&
      Number.isInteger(v[2])
    ) {
      return { us: v[0], id: v[1], item: v[2] as number };
    }
  } catch {
    // fall through
  }
  throw badInput("after", "Invalid cursor");
}

interface Row {
  us: string;
  request_id: string;
  item: number;
  workspace_id: string;
  app_id: string | null;
  network: string;
  transport: string;
  method: string;
  method_length: number | null;
  http_status: number;
  category: string;
  reason: string;
  latency_ms: number;
  client_ip: string | null;
  compute_units: number | null;
}

/**
 * Reads the request log of one workspace (READ permission), newest first, keyset-paginated on
 * (time, request_id, item) so a page costs an index range scan whatever its depth.
 */
export class RequestLogService {
  constructor(
    private readonly ds: DataSource,
    private readonly workspaces: WorkspaceService,
  ) {}

  async list(
    ctx: RequestContext,
    filter: RequestLogFilter,
    first: number | null | undefined,
    after: string | null | undefined,
  ): Promise<RequestLogConnection> {
    let workspaceId: string;
    let appId: string | null = null;
    if (filter.appId != null) {
      const app = await this.workspaces.appForCaller(ctx, filter.appId, Permission.Read);
      if (filter.workspaceId != null && app.workspaceId !== filter.workspaceId) throw notFound("App");
      appId = app.id;
      workspaceId = app.workspaceId;
    } else {
      ({ workspaceId } = await this.workspaces.authorize(ctx, filter.workspaceId ?? null, Permission.Read));
    }
    const limit = first ?? REQUEST_LOG_DEFAULT_PAGE;
    if (!Number.isInteger(limit) || limit < 1 || limit > REQUEST_LOG_MAX_PAGE) {
      throw badInput("first", `first must be between 1 and ${REQUEST_LOG_MAX_PAGE}`);
    }
    const where: string[] = ["workspace_id = $1"];
    const params: unknown[] = [workspaceId];
    const add = (sql: string, v: unknown) => {
      params.push(v);
      where.push(sql.replace("?", `$${params.length}`));
    };
    if (appId !== null) add("app_id = ?", appId);
    if (filter.network != null) add("network = ?", filter.network);
    if (filter.method != null) add("method = ?", filter.method);
    if (filter.category != null) add("category = ?", filter.category);
    if (filter.requestId != null) add("request_id = ?", filter.requestId.trim());
    if (filter.from != null) {
      if (!Number.isFinite(filter.from.getTime())) throw badInput("from", "Invalid date");
      add("time >= ?", filter.from);
    }
    if (filter.to != null) {
      if (!Number.isFinite(filter.to.getTime())) throw badInput("to", "Invalid date");
      add("time < ?", filter.to);
    }
    if (after != null) {
      const c = decodeCursor(after);
      params.push(c.us, c.id, c.item);
      const n = params.length;
      where.push(
        `(time, request_id, item) < (to_timestamp($${n - 2}::numeric / 1000000), $${n - 1}, $${n}::integer)`,
      );
    }
    params.push(limit + 1);
    const rows = (await this.ds.query(
      `SELECT (extract(epoch FROM time) * 1000000)::bigint::text AS us, request_id, item, workspace_id, app_id,
              network, transport, method, method_length, http_status, category, reason, latency_ms, client_ip,
              compute_units
         FROM request_log WHERE ${where.join(" AND ")}
        ORDER BY time DESC, request_id DESC, item DESC LIMIT $${params.length}`,
      params,
    )) as Row[];
    const page = rows.slice(0, limit);
    const edges = page.map((r) => ({
      node: toEntry(r),
      cursor: encodeCursor({ us: r.us, id: r.request_id, item: r.item }),
    }));
    return {
      edges,
      pageInfo: { hasNextPage: rows.length > limit, endCursor: edges.at(-1)?.cursor ?? null },
    };
  }
}

function toEntry(r: Row): RequestLogEntry {
  return {
    time: new Date(Number(BigInt(r.us) / 1000n)),
    requestId: r.request_id,
    item: r.item,
    workspaceId: r.workspace_id,
    appId: r.app_id,
    network: r.network,
    transport: r.transport,
    method: r.method,
    methodLength: r.method_length,
    httpStatus: r.http_status,
    category: r.category,
    reason: r.reason,
    latencyMs: r.latency_ms,
    clientIp: r.client_ip,
    computeUnits: r.compute_units,
  };
}
