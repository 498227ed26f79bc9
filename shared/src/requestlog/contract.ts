import { z } from "zod";

/**
 * The request log stream (docs/contracts.md#request-log): data planes XADD one entry per flush, field
 * `records` = JSON `RequestLogBatch`; the worker's consumer group `request-log-ingest` inserts the records
 * into the day-partitioned `request_log` table (idempotent on time + requestId + item).
 */
export const REQUEST_LOG_STREAM_FIELD = "records";
export const REQUEST_LOG_CONSUMER_GROUP = "request-log-ingest";
/**
 * Default approximate MAXLEN of the stream (entries). With entries of at most REQUEST_LOG_ENTRY_MAX_BYTES the
 * stream holds at most about 4,096 x 64 KiB = 256 MiB, whatever the traffic.
 */
export const DEFAULT_REQUEST_LOG_STREAM_MAXLEN = 4_096;
/** Largest JSON payload of one stream entry, in bytes (a record is a few hundred; larger entries are cut). */
export const REQUEST_LOG_ENTRY_MAX_BYTES = 64 * 1024;
/** Longest method name a record keeps (longer ones are cut; `methodLength` keeps the original length). */
export const REQUEST_LOG_METHOD_MAX = 100;

export const REQUEST_LOG_TRANSPORTS = ["http", "ws", "node"] as const;
export type RequestLogTransport = (typeof REQUEST_LOG_TRANSPORTS)[number];

/** One logged request object (a batch of 3 logs up to 3 records, `item` 0..2, sharing the requestId). */
export const RequestLogRecordSchema = z.object({
  /** Epoch ms when the answer was ready. */
  time: z.number().int().nonnegative(),
  workspaceId: z.string().uuid().nullable(),
  appId: z.string().uuid().nullable(),
  network: z.string().min(1).max(100),
  transport: z.enum(REQUEST_LOG_TRANSPORTS),
  method: z.string().min(1).max(REQUEST_LOG_METHOD_MAX),
  /**
   * The client's method name's length (UTF-16 code units) when `method` is not it verbatim: cut to
   * REQUEST_LOG_METHOD_MAX, or characters Postgres refuses (U+0000, lone surrogates) and other control
   * characters replaced by U+FFFD (shared/src/text/safe-text.ts). Absent otherwise.
   */
  methodLength: z.number().int().nonnegative().optional(),
  /** HTTP status of the response carrying it (0 on WebSocket). */
  httpStatus: z.number().int().min(0).max(999),
  category: z.string().min(1).max(40),
  /** The error row's reason (`rate_limited`...), "" when the gateway raised no error of its own. */
  reason: z.string().max(60),
  latencyMs: z.number().nonnegative(),
  requestId: z.string().min(1).max(100),
  /** Position of the request object in its batch (0 for a single call). */
  item: z.number().int().min(0).max(100_000),
  /** Client address truncated to /24 (IPv4) or /48 (IPv6); null when unknown. */
  clientIp: z.string().max(60).nullable(),
  /** Compute units this request object was charged (its method's weight); absent from older data planes. */
  computeUnits: z.number().int().nonnegative().optional(),
});
export type RequestLogRecord = z.infer<typeof RequestLogRecordSchema>;

export const RequestLogBatchSchema = z.object({
  batchId: z.string().min(1).max(200),
  records: z.array(z.unknown()),
});
export interface RequestLogBatch {
  batchId: string;
  records: RequestLogRecord[];
}
